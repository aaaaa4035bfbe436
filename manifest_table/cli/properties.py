"""``manifest-table properties URI [KEY=VALUE ...]``: show a table's or a database's
properties, or set some in one commit (docs/cli.md). A VALUE is read as JSON when it is JSON
(``tail_limit=16``, ``cluster_by=["a","b"]``), else as text (``gc_grace=6h``); ``KEY=``
restores the default."""

from __future__ import annotations

import argparse
import json
from typing import Any

from ..database import Database
from .options import key_value, open_table_or_database


def properties(args: argparse.Namespace) -> None:
    target = open_table_or_database(args)
    what = f"database {target.uri}" if isinstance(target, Database) else target.uri
    if args.settings:
        given = dict(args.settings)
        info = target.set_properties({key: _value(text) for key, text in given.items()})
        settings = ", ".join(f"{key}={text}" if text else f"{key} (default)" for key, text in given.items())
        print(f"set {settings} on {what}: version {info.version}")
    width = max(map(len, target.properties), default=0)
    for name, value in target.properties.items():
        print(f"{name:<{width}}  {json.dumps(value) if not isinstance(value, str) else value}")


def _value(text: str) -> Any:
    if not text:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return text


def add_commands(command: Any) -> None:
    shown = command("properties", properties, "show a table's or a database's properties, or set some in one commit")
    shown.add_argument(
        "settings",
        nargs="*",
        type=key_value,
        metavar="KEY=VALUE",
        help="set these (e.g. gc_grace=6h; KEY= restores the default)",
    )
