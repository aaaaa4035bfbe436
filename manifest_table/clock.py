"""The library's clocks (docs/protocol.md, "Time").

- ``wall()`` / ``utc_now()``: this host's wall clock, for what is recorded (a commit's
  timestamp). Ages that decide what garbage collection deletes are never measured on it:
  GC reads the store's clock (storage/clock.py).
- ``Stamp``: a moment of this process, to measure how long ago it was without trusting any
  one clock. A monotonic clock stops while the machine sleeps (Linux's ``CLOCK_MONOTONIC``,
  macOS's ``mach_absolute_time``: a closed laptop lid), the boot-time clock does not, and the
  wall clock jumps when NTP steps it. ``elapsed`` is the largest of their differences, so a
  pause of any kind looks at least as long as it was (a commit's deadline: deadline.py).

``manifest_table.testing.skewed_clock`` shifts ``wall`` to test hosts whose clocks are off."""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

_skew = 0.0
"""Seconds added to the wall clock (only ``testing.skewed_clock`` sets it)."""


def wall() -> float:
    """Seconds since the Unix epoch on this host's wall clock."""
    return time.time() + _skew


def utc_now() -> datetime:
    return datetime.fromtimestamp(wall(), UTC)


def before(moment: datetime, span: timedelta) -> datetime:
    """``moment - span``, or the earliest time there is when that is before the year 1: a
    retention or grace period of thousands of years means everything is younger than it."""
    try:
        return moment - span
    except OverflowError:
        return datetime.min.replace(tzinfo=moment.tzinfo)


def _boot() -> float | None:
    """Seconds since boot including suspended time, where the system has that clock."""
    try:
        return time.clock_gettime(time.CLOCK_BOOTTIME)  # type: ignore[attr-defined,unused-ignore]
    except (AttributeError, OSError):
        return None


@dataclass(frozen=True)
class Stamp:
    """A moment of this process, as read on each of its clocks."""

    wall: float
    monotonic: float
    boot: float | None

    @classmethod
    def now(cls) -> Stamp:
        return cls(wall(), time.monotonic(), _boot())

    @classmethod
    def at(cls, when: datetime) -> Stamp:
        """The moment ``when`` (a wall-clock time, e.g. one another process recorded), as a
        stamp of this process: every clock set back by the wall clock's distance to it."""
        now = cls.now()
        back = max(0.0, now.wall - when.timestamp())
        return cls(now.wall - back, now.monotonic - back, None if now.boot is None else now.boot - back)

    def elapsed(self) -> float:
        """Seconds since this moment: the largest difference any clock shows (never < 0)."""
        now = Stamp.now()
        spans = [now.wall - self.wall, now.monotonic - self.monotonic]
        if self.boot is not None and now.boot is not None:
            spans.append(now.boot - self.boot)
        return max(0.0, *spans)

    def earliest(self, other: Stamp) -> Stamp:
        """The earlier of two moments, clock by clock (the elapsed time of the result is at
        least each one's)."""
        boot = None if self.boot is None or other.boot is None else min(self.boot, other.boot)
        return Stamp(min(self.wall, other.wall), min(self.monotonic, other.monotonic), boot)
