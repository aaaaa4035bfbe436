"""LIKE patterns: `%` any run of characters, `_` exactly one, and a backslash makes the next
character literal (`\\%`, `\\_`, `\\\\`), as `LIKE ... ESCAPE '\\'` in SQL. A pattern ending in
a lone backslash is an error, as in DuckDB and PostgreSQL.

One reading of a pattern serves pruning (its literal prefix) and rows (the Arrow kernels in
arrow.py). Arrow's own `match_like` is not used: its fast paths for `p%`, `%p` and `%p%`
compare the pattern text with its backslashes still in it.
"""

from __future__ import annotations

from dataclasses import dataclass

ANY, ONE = "%", "_"


@dataclass(frozen=True)
class LikePattern:
    """A pattern as pieces: the wildcards ANY and ONE, and literal text with escapes resolved
    (adjacent literal text merged into one piece, runs of ANY collapsed into one)."""

    pieces: tuple[tuple[bool, str], ...]
    """(is_wildcard, text) pairs; a wildcard's text is ANY or ONE."""

    @property
    def prefix(self) -> str:
        """The literal text every match starts with."""
        return self.pieces[0][1] if self.pieces and not self.pieces[0][0] else ""

    @property
    def literal(self) -> str | None:
        """The one string matched when the pattern has no wildcard, else None."""
        if any(wildcard for wildcard, _ in self.pieces):
            return None
        return self.prefix

    @property
    def prefix_only(self) -> bool:
        """The pattern is `prefix%`: every string starting with the prefix matches."""
        rest = self.pieces[1:] if self.prefix else self.pieces
        return rest == ((True, ANY),)

    def regex(self) -> str:
        """An RE2 regular expression matching exactly the strings the pattern matches."""
        parts = []
        for wildcard, text in self.pieces:
            if wildcard:
                parts.append(".*" if text == ANY else ".")
            else:
                parts.append("".join(c if c.isalnum() else f"\\x{{{ord(c):x}}}" for c in text))
        return "(?s)^" + "".join(parts) + "$"  # (?s): '.' matches a newline too


def parse_like(pattern: str) -> LikePattern:
    """Read a pattern; ValueError for a dangling escape."""
    pieces: list[tuple[bool, str]] = []
    index = 0
    while index < len(pattern):
        char = pattern[index]
        if char == "\\":
            if index + 1 == len(pattern):
                raise ValueError(f"LIKE pattern {pattern!r} ends with the escape character '\\'")
            index += 1
            _add(pieces, False, pattern[index])
        elif char in (ANY, ONE):
            _add(pieces, True, char)
        else:
            _add(pieces, False, char)
        index += 1
    return LikePattern(tuple(pieces))


def _add(pieces: list[tuple[bool, str]], wildcard: bool, text: str) -> None:
    if pieces and not wildcard and not pieces[-1][0]:
        pieces[-1] = (False, pieces[-1][1] + text)
    elif not (pieces and wildcard and text == ANY and pieces[-1] == (True, ANY)):
        pieces.append((wildcard, text))
