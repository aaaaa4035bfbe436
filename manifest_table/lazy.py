"""Modules imported when one of their names is first used, not when the module naming them
is imported: what keeps ``manifest-table count`` and ``import manifest_table`` from loading
pyarrow's compute, Parquet and dataset layers, pandas and fastavro that they never call
(docs/benchmarks.md, "Start-up"). ``pc = lazy("pyarrow.compute")`` stands where
``import pyarrow.compute as pc`` stood; the first ``pc.field`` imports it."""

from __future__ import annotations

import importlib
import types
from typing import Any


class _Deferred(types.ModuleType):
    def __getattr__(self, name: str) -> Any:
        module = importlib.import_module(self.__name__)
        self.__dict__.update(module.__dict__)  # later lookups find the names here directly
        return getattr(module, name)


def lazy(name: str) -> Any:
    """The module ``name``, imported at the first use of one of its attributes."""
    return _Deferred(name)
