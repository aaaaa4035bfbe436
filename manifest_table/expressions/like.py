"""LIKE patterns: `%` any run, `_` one character, a backslash escapes the next character.
One reading of a pattern serves pruning (its literal prefix) and rows."""

from __future__ import annotations


def like_prefix(pattern: str) -> tuple[str, str]:
    """Split a LIKE pattern into its literal prefix (escapes resolved) and the rest, which
    starts at the first wildcard ('' when the pattern has none)."""
    prefix: list[str] = []
    index = 0
    while index < len(pattern) and pattern[index] not in "%_":
        if pattern[index] == "\\" and index + 1 < len(pattern):
            index += 1
        prefix.append(pattern[index])
        index += 1
    return "".join(prefix), pattern[index:]
