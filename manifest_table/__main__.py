"""``python -m manifest_table``: the same command as ``manifest-table``."""

from .cli import run

run()
