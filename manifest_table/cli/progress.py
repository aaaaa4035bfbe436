"""Progress on stderr, only when stderr is a terminal: a pipe or a log file gets none, and
stdout (where results go) never does."""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pyarrow as pa


def _on_terminal() -> bool:
    return sys.stderr.isatty()


def counted(batches: Iterable[pa.RecordBatch], description: str, total: int | None = None) -> Iterator[pa.RecordBatch]:
    """``batches`` unchanged, with a bar of the rows gone through (of ``total`` if known)."""
    if not _on_terminal():
        yield from batches
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    columns = [
        SpinnerColumn(),
        TextColumn("{task.description}", markup=False),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("rows"),
        TimeElapsedColumn(),
    ]
    with Progress(*columns, console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task(description, total=total)
        for batch in batches:
            yield batch
            bar.advance(task, batch.num_rows)


@contextmanager
def activity(description: str, logger: str = "manifest_table.maintenance") -> Iterator[None]:
    """A spinner showing the latest progress message ``logger`` emits at INFO (compaction's
    groups, GC's counts), whatever the ``-v`` level; messages below that level are shown
    here only, as before."""
    if not _on_terminal():
        yield
        return
    from rich.console import Console
    from rich.text import Text  # plain text: a URI or a message may hold [brackets]

    source = logging.getLogger(logger)
    level, threshold = source.level, source.getEffectiveLevel()
    with Console(stderr=True).status(Text(description)) as status:

        def relay(record: logging.LogRecord) -> bool:
            status.update(Text(f"{description}: {record.getMessage()}"))
            return record.levelno >= threshold

        source.addFilter(relay)
        source.setLevel(min(threshold, logging.INFO))
        try:
            yield
        finally:
            source.removeFilter(relay)
            source.setLevel(level)
