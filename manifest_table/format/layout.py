"""The columns a table's layout properties name (``cluster_by``, ``sort_by``,
``bloom_filter_columns``), checked against its schema: every version is written with them
naming columns it has, of types with an order (those with statistics: numbers, booleans,
strings, dates, timestamps, decimals), or, for bloom filters, of a type they are kept for.
``create_table``, ``set_properties`` and schema changes all pass here (commit/builder.py), so
a property never names a dropped column and a rename carries into it
(``renamed_in_layout``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pyarrow as pa

from ..errors import InvalidArgumentError
from .bloom_filter import probed_type
from .properties import BLOOM_FILTER_COLUMNS, LAYOUT, Properties
from .stats import has_stats


def check_layout(properties: Properties, schema: pa.Schema) -> None:
    """``InvalidArgumentError`` naming a layout property that names a column ``schema`` lacks,
    or one without an order."""
    for prop in LAYOUT:
        for name in properties[prop]:
            if name not in schema.names:
                raise InvalidArgumentError(
                    f"{prop.name} names column {name!r}, which the table would not have (its "
                    f"columns: {schema.names}); a column {prop.name} names is dropped only once "
                    f"{prop.name} no longer names it; nothing was committed"
                )
            dtype = schema.field(name).type
            if prop is BLOOM_FILTER_COLUMNS:
                if not probed_type(dtype):
                    raise InvalidArgumentError(
                        f"{prop.name} names column {name!r} of type {dtype}; bloom filters are kept "
                        "for signed integers, dates, strings and binary columns; nothing was committed"
                    )
            elif not has_stats(dtype):
                raise InvalidArgumentError(
                    f"{prop.name} names column {name!r} of type {dtype}, which has no order to "
                    "sort by (numbers, booleans, strings, dates, timestamps and decimals do)"
                )


def renamed_in_layout(properties: Properties, renames: Mapping[str, str]) -> dict[str, Any]:
    """The layout properties updated for columns renamed ``old -> new`` (property updates as
    ``set_properties`` takes them), so that a rename keeps the table's layout."""
    updates: dict[str, Any] = {}
    for prop in LAYOUT:
        names = properties[prop]
        if any(name in renames for name in names):
            updates[prop.name] = tuple(renames.get(name, name) for name in names)
    return updates
