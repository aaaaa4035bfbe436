"""Counts in the reports people read: ``1 table``, ``2 tables``, never ``1 tables``."""

from __future__ import annotations


def count(n: int, noun: str) -> str:
    """``n`` with ``noun`` (singular, pluralised with an ``s``) in the number ``n`` takes."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"
