"""The layers of docs/architecture.md hold: every import of the library (those inside
functions and under ``TYPE_CHECKING`` too) goes to a module of its own layer's package or of a
lower layer, never back up. The table in the docs is the contract; this reads it."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "manifest_table"


def layers() -> dict[str, int]:
    """Top-level module or package -> its layer, from the table in docs/architecture.md."""
    found = {}
    text = (ROOT / "docs" / "architecture.md").read_text()
    table = text[text.index("## Layers") :].split("\n## ")[0]
    for line in table.splitlines():
        row = re.fullmatch(r"\| (\d+) \| ([^|]+) \|.*", line)
        if row:
            for name in re.findall(r"`([a-z_]+)`", row.group(2)):
                found[name] = int(row.group(1))
    return found


def unit_of(path: Path) -> str:
    """The top-level module or package a file of the library belongs to."""
    parts = path.relative_to(PACKAGE).parts
    return parts[0].removesuffix(".py")


def imported_units(path: Path) -> set[str]:
    """The library's top-level modules and packages ``path`` imports."""
    package = list(path.relative_to(PACKAGE).parts[:-1])
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level:
            base = package[: len(package) - node.level + 1] + (node.module.split(".") if node.module else [])
            found |= {base[0]} if base else {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("manifest_table."):
            found.add(node.module.split(".")[1])
        elif isinstance(node, ast.Import):
            found |= {a.name.split(".")[1] for a in node.names if a.name.startswith("manifest_table.")}
    return found


def test_the_architecture_table_names_every_module_of_the_library() -> None:
    units = {unit_of(p) for p in PACKAGE.rglob("*.py")}
    assert units == set(layers()), units ^ set(layers())


def test_no_import_climbs_back_up_a_layer() -> None:
    layer = layers()
    climbing = []
    for path in sorted(PACKAGE.rglob("*.py")):
        own = unit_of(path)
        for target in imported_units(path) - {own}:
            target = "__init__" if target == "__version__" else target  # ``from .. import __version__``
            if layer[target] >= layer[own]:
                climbing.append(
                    f"{path.relative_to(ROOT)} (layer {layer[own]}) imports {target} (layer {layer[target]})"
                )
    assert not climbing, "\n".join(climbing)
