"""The SQL-like filter language: a hand-written tokenizer and precedence-climbing parser.

Hand-written so that every syntax error says what was expected and points a caret at the
exact position, with no dependency. The grammar is in docs/expressions.md.
"""

from __future__ import annotations

import datetime as dt
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal

from ..errors import InvalidFilterError
from .literals import MAX_DIGITS, QUOTE_HINT, RESERVED, Value, filter_error, timestamp_from_text
from .nodes import MAX_DEPTH, And, Comparison, Computed, Expr, In, IsNull, Like, Or
from .terms import FUNCTIONS, PRECEDENCE, Arithmetic, Condition, Function, Literal, Ref, Term, term

_TOKEN = re.compile(
    r"""(?P<space>\s+)
      | (?P<number>-?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?)
      | (?P<name>[A-Za-z_][A-Za-z0-9_.]*)
      | (?P<quoted>"(?:[^"]|"")*")
      | (?P<string>'(?:[^']|'')*')
      | (?P<op><>|!=|<=|>=|==|=|<|>)
      | (?P<punct>[(),])
      | (?P<arith>%)""",
    re.VERBOSE,
)
_TERM_TOKEN = re.compile(_TOKEN.pattern.replace("(?P<arith>%)", "(?P<arith>[-+*/%])"), re.VERBOSE)
"""Terms (``parse_term``) take every arithmetic operator; filters only ``%`` (``id % 10 = 0``),
so that a stray ``-`` or ``+`` in a filter is still an unexpected character."""
_UNTERMINATED = {"'": "unterminated string literal", '"': "unterminated quoted column name"}
_FLIPPED = {"=": "=", "!=": "!=", "<": ">", "<=": ">=", ">": "<", ">=": "<="}
_BINARY: dict[str, tuple[int, Callable[[Expr, Expr], Expr]]] = {"OR": (1, Or), "AND": (2, And)}


@dataclass(frozen=True)
class _Token:
    kind: str  # keyword, name, number, string, op, punct, end
    text: str  # as written
    pos: int

    @property
    def value(self) -> str:
        """Keywords upper-cased, `<>` as `!=`, quoted names and strings unquoted."""
        if self.kind == "keyword":
            return self.text.upper()
        if self.kind == "op":
            return "!=" if self.text == "<>" else self.text
        if self.kind in ("quoted", "string"):
            quote = self.text[0]
            return self.text[1:-1].replace(quote * 2, quote)
        return self.text


def syntax_error(text: str, message: str, pos: int) -> InvalidFilterError:
    """`message at position N:` followed by the text with a caret under the position, and
    the hint SQL users need when the text holds a double quote."""
    shown = re.sub(r"\s", " ", text)  # one column per character keeps the caret aligned
    hint = QUOTE_HINT if '"' in text else ""
    return filter_error(f"{message}{hint} at position {pos}:\n  {shown}\n  {' ' * pos}^", pos)


def _tokenize(text: str, pattern: re.Pattern[str] = _TOKEN) -> list[_Token]:
    tokens: list[_Token] = []
    pos = 0
    while pos < len(text):
        match = pattern.match(text, pos)
        if match is None:
            problem = _UNTERMINATED.get(text[pos], f"unexpected character {text[pos]!r}")
            raise syntax_error(text, problem, pos)
        kind = match.lastgroup or ""
        if kind == "name" and match.group().upper() in RESERVED:
            kind = "keyword"
        if kind == "quoted" and match.group() == '""':
            raise syntax_error(text, "empty quoted column name", pos)
        if kind == "op" and match.group() == "==":
            raise syntax_error(text, "'==' is not SQL: compare with a single '=' (id = 5)", pos)
        if kind != "space":
            tokens.append(_Token(kind, match.group(), pos))
        pos = match.end()
    tokens.append(_Token("end", "", len(text)))
    return tokens


class _Parser:
    def __init__(self, text: str, pattern: re.Pattern[str] = _TOKEN) -> None:
        self.text = text
        self.tokens = _tokenize(text, pattern)
        self.index = 0
        self.depth = 0  # open '(' and NOT around the current position

    # --- token helpers --------------------------------------------------------------------
    def peek(self, ahead: int = 0) -> _Token:
        return self.tokens[min(self.index + ahead, len(self.tokens) - 1)]

    def advance(self) -> _Token:
        token = self.peek()
        self.index += 1
        return token

    def accept(self, kind: str, value: str) -> bool:
        if self.peek().kind == kind and self.peek().value == value:
            self.index += 1
            return True
        return False

    def expect(self, kind: str, value: str, what: str) -> None:
        if not self.accept(kind, value):
            raise self.expected(what)

    def expected(self, what: str) -> InvalidFilterError:
        after = f" after {self.tokens[self.index - 1].text!r}" if self.index else ""
        return syntax_error(self.text, f"expected {what}{after}", self.peek().pos)

    def at_typed_literal(self) -> bool:
        """DATE/TIMESTAMP start a literal only before a string, so they stay usable as names."""
        token = self.peek()
        return token.kind == "name" and token.text.upper() in ("DATE", "TIMESTAMP") and self.peek(1).kind == "string"

    def at_column(self) -> bool:
        return self.peek().kind in ("name", "quoted") and not self.at_typed_literal()

    def at_function(self) -> bool:
        """``lower(`` or ``upper(``: a call, while a bare ``lower`` stays a column name."""
        token = self.peek()
        return token.kind == "name" and token.text.lower() in FUNCTIONS and self.peek(1).text == "("

    # --- grammar --------------------------------------------------------------------------
    def parse(self) -> Expr:
        expr = self.expression(1)
        if self.peek().kind != "end":
            raise self.expected("AND, OR or the end of the filter")
        return expr

    def expression(self, min_precedence: int) -> Expr:
        """Precedence climbing over AND/OR; a run of one operator becomes one node, so a
        filter of 10,000 ORs needs neither deep recursion nor quadratic copying."""
        left = self.unary()
        while self.peek().kind == "keyword" and self.peek().value in _BINARY:
            keyword = self.peek().value
            precedence, node = _BINARY[keyword]
            if precedence < min_precedence:
                break
            operands = [left]
            while self.accept("keyword", keyword):
                operands.append(self.expression(precedence + 1))
            left = node(*operands)
        return left

    def unary(self) -> Expr:
        if (self.peek().kind, self.peek().value) in (("keyword", "NOT"), ("punct", "(")):
            return self.nested()
        if self.at_column():
            return self.predicate(self.subject())
        if (
            self.peek().kind in ("number", "string")
            or self.at_typed_literal()
            or (self.peek().kind == "keyword" and self.peek().value in ("TRUE", "FALSE", "NULL"))
        ):
            return self.flipped_comparison()
        raise self.expected("a column name, a literal, NOT or '('")

    def nested(self) -> Expr:
        """NOT e or ( e ), at most MAX_DEPTH deep: the parser recurses once per level."""
        if self.depth >= MAX_DEPTH:
            raise syntax_error(self.text, f"the filter nests more than {MAX_DEPTH} levels deep", self.peek().pos)
        self.depth += 1
        if self.accept("keyword", "NOT"):
            inner = ~self.unary()
        else:
            self.expect("punct", "(", "'('")
            inner = self.expression(1)
            self.expect("punct", ")", "')'")
        self.depth -= 1
        return inner

    def flipped_comparison(self) -> Expr:
        """`literal op column`, stored as `column op' literal`."""
        value = self.literal()
        if self.peek().kind != "op":
            raise self.expected("a comparison operator")
        op = self.advance().value
        if not self.at_column():
            raise self.expected("a column name")
        subject = self.subject()
        return _on(subject, Comparison(_named(subject), _FLIPPED[op], value))

    def subject(self) -> str | Term:
        """What a leaf tests: a column (its name), ``lower(...)`` / ``upper(...)`` of one, or
        ``column % integer``."""
        if self.at_function():
            name = self.advance().text.lower()
            self.expect("punct", "(", "'('")
            if not self.at_column():
                raise self.expected("a column name")
            inner = self.subject()
            self.expect("punct", ")", "')'")
            value: str | Term = Function(name, Ref(inner) if isinstance(inner, str) else inner)
        else:
            value = self.advance().value
        if self.accept("arith", "%"):
            if self.peek().kind != "number" or not re.fullmatch(r"-?\d+", self.peek().text):
                raise self.expected("an integer divisor")
            divisor = int(self.advance().text)
            value = Arithmetic("%", Ref(value) if isinstance(value, str) else value, Literal(divisor))
        return value

    def predicate(self, subject: str | Term) -> Expr:
        name = _named(subject)
        if self.peek().kind == "op":
            op = self.advance().value
            return _on(subject, Comparison(name, op, self.literal()))
        if self.accept("keyword", "IS"):
            negated = self.accept("keyword", "NOT")
            self.expect("keyword", "NULL", "NULL")
            return _on(subject, IsNull(name, negated))
        negated = self.accept("keyword", "NOT")
        if self.accept("keyword", "BETWEEN"):
            low = self.literal()
            self.expect("keyword", "AND", "AND")
            high = self.literal()
            between = And(_on(subject, Comparison(name, ">=", low)), _on(subject, Comparison(name, "<=", high)))
            return ~between if negated else between
        if self.accept("keyword", "IN"):
            return _on(subject, In(name, self.literal_list(), negated))
        for keyword in ("LIKE", "ILIKE"):
            if self.accept("keyword", keyword):
                if self.peek().kind != "string":
                    raise self.expected("a quoted pattern")
                return _on(subject, Like(name, self.advance().value, negated, case_insensitive=keyword == "ILIKE"))
        if negated:
            raise self.expected("BETWEEN, IN, LIKE or ILIKE")
        raise self.expected("a comparison operator, BETWEEN, IN, LIKE, ILIKE or IS")

    # --- terms (parse_term) -----------------------------------------------------------------
    def parse_term(self) -> Term:
        result = self.term(1)
        if self.peek().kind != "end":
            raise self.expected("an operator (+ - * / %) or the end of the expression")
        return result

    def term(self, min_precedence: int) -> Term:
        """Precedence climbing over + - * /, all left-associative."""
        left = self.operand()
        while (op := self.arithmetic_operator()) is not None and PRECEDENCE[op] >= min_precedence:
            self.index += 1
            left = Arithmetic(op, left, self.term(PRECEDENCE[op] + 1))
        return left

    def arithmetic_operator(self) -> str | None:
        """The operator at the current token, if any. The tokenizer reads ``a -1`` as a name
        and the number -1; in operator position that is ``a - 1``: split the token."""
        token = self.peek()
        if token.kind == "arith":
            return token.text
        if token.kind == "number" and token.text.startswith("-"):
            self.tokens[self.index : self.index + 1] = [
                _Token("arith", "-", token.pos),
                _Token("number", token.text[1:], token.pos + 1),
            ]
            return "-"
        return None

    def operand(self) -> Term:
        if self.depth >= MAX_DEPTH:
            raise syntax_error(self.text, f"the expression nests more than {MAX_DEPTH} levels deep", self.peek().pos)
        if self.accept("punct", "("):
            self.depth += 1
            inner = self.term(1)
            self.depth -= 1
            self.expect("punct", ")", "')'")
            return inner
        if self.accept("arith", "-"):
            self.depth += 1
            inner = -self.operand()
            self.depth -= 1
            return inner
        if self.at_function():
            name = self.advance().text.lower()
            self.expect("punct", "(", "'('")
            self.depth += 1
            arg = self.term(1)
            self.depth -= 1
            self.expect("punct", ")", "')'")
            return Function(name, arg)
        if self.at_column():
            return Ref(self.advance().value)
        if self.accept("keyword", "NULL"):
            return Literal(None)
        if (
            self.peek().kind in ("number", "string")
            or self.at_typed_literal()
            or (self.peek().kind == "keyword" and self.peek().value in ("TRUE", "FALSE"))
        ):
            return Literal(self.literal())
        raise self.expected("a column name, a literal, '-' or '('")

    def literal_list(self) -> tuple[Value, ...]:
        self.expect("punct", "(", "'('")
        values = [self.literal()]
        while self.accept("punct", ","):
            values.append(self.literal())
        self.expect("punct", ")", "',' or ')'")
        return tuple(values)

    def literal(self) -> Value:
        token = self.peek()
        if token.kind == "keyword" and token.value == "NULL":
            raise syntax_error(self.text, "NULL is never equal to anything; use IS NULL or IS NOT NULL", token.pos)
        if token.kind == "keyword" and token.value in ("TRUE", "FALSE"):
            self.advance()
            return token.value == "TRUE"
        if token.kind == "string":
            return self.advance().value
        if token.kind == "number":
            self.advance()
            if len(token.text) > MAX_DIGITS:
                raise syntax_error(self.text, f"number of more than {MAX_DIGITS} digits", token.pos)
            if re.fullmatch(r"-?\d+", token.text):
                return int(token.text)  # of any size: a column type may not hold it, SQL still compares
            if "e" not in token.text.lower():
                return Decimal(token.text)  # SQL's exact numeric: 1.10 is not a binary float
            number = float(token.text)
            if not math.isfinite(number):
                raise syntax_error(self.text, f"number {token.text} is out of range", token.pos)
            return number
        if self.at_typed_literal():
            kind = self.advance().text.upper()
            text = self.advance().value
            try:
                return dt.date.fromisoformat(text) if kind == "DATE" else timestamp_from_text(text)
            except ValueError as error:
                raise syntax_error(self.text, f"invalid {kind} literal {text!r} ({error})", token.pos) from None
        raise self.expected("a literal")


def _named(subject: str | Term) -> str:
    """The column a leaf is built on: the subject's own, or a stand-in named by its text."""
    return subject if isinstance(subject, str) else str(subject)


def _on(subject: str | Term, leaf: Expr) -> Expr:
    """``leaf`` on a column, or on the computed value ``subject`` (``Computed``)."""
    return leaf if isinstance(subject, str) else Computed(subject, leaf)  # type: ignore[arg-type]


def parse(text: str) -> Expr:
    """Parse a filter such as `id >= 5 AND country IN ('DE', 'FR')`."""
    if not isinstance(text, str):
        raise filter_error(f"a filter must be a string, got {type(text).__name__}")
    if not text.strip():
        raise filter_error("the filter expression is empty")
    return _Parser(text).parse()


def to_expr(where: str | Expr | None) -> Expr | None:
    """Normalise the `where=` argument of public APIs: text is parsed, an Expr kept."""
    if where is None or isinstance(where, Expr):
        return where
    if isinstance(where, str):
        return parse(where)
    raise filter_error(f"a filter must be a string or an Expr, got {type(where).__name__}")


def parse_term(text: str) -> Term:
    """Parse a value expression such as ``price * 1.1`` or ``(a + b) / 2`` (docs/expressions.md)."""
    if not isinstance(text, str):
        raise filter_error(f"an expression must be a string, got {type(text).__name__}")
    if not text.strip():
        raise filter_error("the expression is empty")
    return _Parser(text, _TERM_TOKEN).parse_term()


def to_term(value: object) -> Term:
    """Normalise a value assigned by ``update(set=...)``: text is parsed as a term (quote a
    string literal: ``"'DE'"``), a term or ``col(...)`` is kept, a boolean filter (an
    ``Expr``) is its truth value, anything else is a literal (``None`` is NULL)."""
    if isinstance(value, str):
        return parse_term(value)
    if isinstance(value, Expr):
        return Condition(value)
    return term(value)
