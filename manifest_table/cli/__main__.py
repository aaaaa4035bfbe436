"""``python -m manifest_table.cli``: the same command as ``manifest-table``."""

from .app import run

run()
