"""The ``manifest-table`` command: inspect, query, write and maintain tables from a shell.

One module per concern: ``app`` (parsing, errors, exit codes), ``read``, ``write`` and
``maintain`` (the commands), ``inputs`` and ``output`` (file formats), ``schema_spec``,
``options`` and ``progress``. See docs/cli.md."""

from .app import main, run

__all__ = ["main", "run"]
