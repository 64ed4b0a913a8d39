"""The calculator's grammar: tokens, precedence and the expression tree it reads.

Precedence, tightest first:

1. parentheses;
2. a unit: unit names joined by ``/``, ``*``, spaces and integer powers (``TB/s``,
   ``USD/Mtok``, ``kW*h``, ``s**2``), as in ``--to``;
3. powers, ``**`` or ``^`` (``10**9``); a power of a power needs parentheses;
4. a number or a parenthesis followed by a unit is one quantity (implicit multiplication),
   ``10%`` is the number 0.1, ``$2.95`` is 2.95 USD;
5. unary ``-`` and ``+``;
6. ``*`` and ``/``, left to right;
7. ``+`` and ``-``, left to right.

So ``140 GB / 3.35 TB/s`` is ``140 GB / (3.35 TB/s)`` (41.8 ms) and ``1 h / 2 h`` is 0.5:
a quantity written as a number and its unit is never split by the division before it.

One form is refused as ambiguous: a divisor written as a number and its unit when nothing before
the ``/`` carries a unit or names a catalog value (``1/2 h`` is half an hour to some readers and
0.5 per hour to others; ``3600 / 2 s`` likewise). The error offers both parenthesized readings,
``(1/2) h`` and ``1/(2 h)``. With a unit on the left (``1 h / 2 h``, ``7 TB / 10 GB``) or a
divisor without a unit (``7 TB / 10%``, ``1 / s``) there is one reading and it is accepted.

Also refused: juxtaposed numbers (``2 3``), a unit after a catalog value (write ``*``), ``%`` that
does not follow a number, exponents beyond :data:`MAX_EXPONENT`, number literals longer than
:data:`.tokens.MAX_DIGITS` digits, text longer than :data:`MAX_LENGTH` characters and parentheses nested
deeper than :data:`MAX_DEPTH`; each bound is checked before any arithmetic, so every answer is
immediate.
"""

from __future__ import annotations

import math

from ..errors import UnitError
from .tokens import CATALOG_REF, Token, tokenize
from .tree import BareId, CatalogValue, Chain, Group, Negate, Node, Number, Power, Unit, WithUnit, has_unit

#: Longest expression read [characters]; a back-of-envelope formula is a line.
MAX_LENGTH = 1000
#: Largest exponent, in absolute value: enough for 10**18 or a unit squared, never a hang.
MAX_EXPONENT = 64
#: Deepest nesting of parentheses.
MAX_DEPTH = 32


class AmbiguousExpressionError(UnitError):
    """An expression has two plausible readings; ``readings`` holds both, parenthesized."""

    def __init__(self, message: str, readings: tuple[str, str]):
        super().__init__(message)
        self.readings = readings


def parse(text: str, catalog_ids: frozenset[str] = frozenset()) -> Node:
    """The expression tree of ``text`` under the precedence in this module's docstring.

    Parameters
    ----------
    text : str
        The expression, e.g. ``"140 GB / 3.35 TB/s"``.
    catalog_ids : frozenset of str
        Lower-case catalog ids, so that a bare id (``h100-sxm``) is recognized as one.

    Raises
    ------
    AmbiguousExpressionError
        For a unit-less dividend over a number with a unit (``1/2 h``), with both readings.
    UnitError
        On malformed text or a bound exceeded.
    """
    if len(text) > MAX_LENGTH:
        raise UnitError(f"the expression is {len(text)} characters long; at most {MAX_LENGTH} are read")
    parser = _Parser(text, tokenize(text, catalog_ids))
    tree = parser.sum()
    if parser.at_op(")"):
        raise UnitError(f"unmatched ')' at position {parser.peek().start + 1} of {text!r}")
    if parser.pos < len(parser.tokens):
        raise parser.unexpected()
    return tree


def parse_unit_text(text: str) -> Unit:
    """A unit written alone (``ms``, ``GB/s``, ``USD/Mtok``, ``%``), as ``--to`` takes it."""
    if len(text) > MAX_LENGTH:
        raise UnitError(f"the unit is {len(text)} characters long; at most {MAX_LENGTH} are read")
    if text.strip() in ("%", "percent"):
        return Unit(0, len(text), (("percent", 1.0),))
    parser = _Parser(text, tokenize(text))
    inverse = parser.at_kind("num") and float(parser.peek().text) == 1 and parser.at_op("/", offset=1)
    if inverse:
        parser.pos = 2
    if not (parser.at_kind("name") or parser.at_op("$")):
        raise UnitError(f"{text!r} is not a unit; write one such as ms, GB/s, 1/s or USD/Mtok")
    unit = parser.unit()
    if parser.pos < len(parser.tokens):
        raise UnitError(f"{text!r} is not a unit; write one such as ms, GB/s, 1/s or USD/Mtok")
    if inverse:  # left to right, 1/a/b is 1/(a*b): only the first factor changes sign
        (name, exponent), *rest = unit.factors
        unit = Unit(0, unit.end, ((name, -exponent), *rest))
    return unit


class _Parser:
    """Recursive descent over the tokens; one method per precedence level."""

    def __init__(self, text: str, tokens: list[Token]):
        self.text = text
        self.tokens = tokens
        self.pos = 0
        self.depth = 0

    def peek(self, offset: int = 0) -> Token | None:
        i = self.pos + offset
        return self.tokens[i] if i < len(self.tokens) else None

    def at_op(self, *ops: str, offset: int = 0) -> bool:
        tok = self.peek(offset)
        return tok is not None and tok.kind == "op" and tok.text in ops

    def at_kind(self, kind: str, offset: int = 0) -> bool:
        tok = self.peek(offset)
        return tok is not None and tok.kind == kind

    def take(self) -> Token:
        tok = self.peek()
        if tok is None:
            last = self.tokens[-1].text if self.tokens else ""
            raise UnitError(f"{self.text!r} ends too early after {last!r}; expected a number, a unit, "
                            "a catalog value or '('")
        self.pos += 1
        return tok

    def unexpected(self) -> UnitError:
        """The error for the token at ``pos``, which no rule can take."""
        tok = self.peek()
        prev = self.tokens[self.pos - 1] if self.pos else None
        if tok.text == "%":
            return UnitError(f"'%' must follow a number, as in 10%, in {self.text!r} at position {tok.start + 1}")
        if prev is not None and prev.text != "(" and (tok.kind != "op" or tok.text in ("(", "$")):
            return UnitError(f"missing operator between {prev.text!r} and {tok.text!r} at position "
                             f"{tok.start + 1} of {self.text!r}; write * or / between them"
                             + ("; % is percent (5% = 0.05), not a remainder" if prev.text == "%" else ""))
        return UnitError(f"unexpected {tok.text!r} at position {tok.start + 1} of {self.text!r}; expected a "
                         "number, a unit, a catalog value or '('")

    def sum(self) -> Node:
        return self.chain(("+", "-"), self.product)

    def product(self) -> Node:
        return self.chain(("*", "/"), self.signed)

    def chain(self, ops: tuple[str, ...], operand) -> Node:
        first = operand()
        rest: list[tuple[str, Node]] = []
        while self.at_op(*ops):
            op = self.take().text
            right = operand()
            if op == "/":
                self.refuse_ambiguous(first, rest, right)
            rest.append((op, right))
        if not rest:
            return first
        return Chain(first.start, rest[-1][1].end, first, tuple(rest))

    def signs(self) -> tuple[Token | None, bool]:
        """Leading ``+`` and ``-``: the first token (where the span starts) and whether they negate."""
        first, negative = self.peek(), False
        while self.at_op("-", "+"):
            negative ^= self.take().text == "-"
        return first, negative

    def signed(self) -> Node:
        first, negative = self.signs()
        node = self.quantity()
        return Negate(first.start, node.end, node) if negative else node

    def at_unit(self) -> bool:
        """A unit name, or a ``$`` that is not a dollar amount (``2 $/h``), starts here."""
        return self.at_kind("name") or (self.at_op("$") and not self.at_kind("num", offset=1))

    def quantity(self) -> Node:
        node = self.power()
        if self.at_unit() and isinstance(node, (Number, Group, Power)):
            unit = self.unit()
            return WithUnit(node.start, unit.end, node, unit)
        return node

    def power(self) -> Node:
        base = self.primary()
        if not self.at_op("**"):
            return base
        self.take()
        exponent = self.exponent()
        self.refuse_chained()
        return Power(base.start, exponent.end, base, exponent)

    def refuse_chained(self) -> None:
        if self.at_op("**"):
            raise UnitError(f"chained powers are not allowed in {self.text!r}; add parentheses, "
                            "e.g. (a**b)**c, or compute in steps")

    def exponent(self) -> Node:
        first, negative = self.signs()
        if self.at_kind("num"):
            tok = self.take()
            node: Node = Number(tok.start, tok.end, self.number(tok))
            self.check_exponent(node.value, tok.text)
        elif self.at_op("("):
            node = self.group()
        else:
            raise UnitError(f"an exponent must be a number or a parenthesis, in {self.text!r} at position "
                            f"{self.peek().start + 1 if self.peek() else len(self.text)}")
        return Negate(first.start, node.end, node) if negative else node

    def number(self, tok: Token) -> float:
        """The value of a number literal, refused when float64 cannot hold it."""
        value = float(tok.text)
        if not math.isfinite(value):
            raise UnitError(f"the number {tok.text} in {self.text!r} is not a finite number in float64 "
                            "(the largest is about 1.8e308); use a unit prefix")
        if value == 0 and any(c in "123456789" for c in tok.text.lower().split("e")[0]):
            raise UnitError(f"the number {tok.text} in {self.text!r} is below the float64 range "
                            "(about 1e-308) and would read as 0; use a unit prefix")
        return value

    def check_exponent(self, value: float, shown: str) -> None:
        if not abs(value) <= MAX_EXPONENT:
            raise UnitError(f"exponent {shown} in {self.text!r} is larger than {MAX_EXPONENT} "
                            "(in absolute value); compute in steps or use a unit prefix")

    def primary(self) -> Node:
        tok = self.take()
        if tok.kind == "num":
            if self.at_op("%"):
                end = self.take().end
                return Number(tok.start, end, self.number(tok) / 100)
            return Number(tok.start, tok.end, self.number(tok))
        if tok.text == "(" and tok.kind == "op":
            self.pos -= 1
            return self.group()
        if tok.kind == "ref":
            ref = CATALOG_REF.match(tok.text)
            return CatalogValue(tok.start, tok.end, ref.group(1).lower(), tuple(ref.group(2).split(".")), tok.text)
        if tok.kind == "id":
            return BareId(tok.start, tok.end, tok.text)
        if tok.kind == "name":
            self.pos -= 1
            return self.unit()
        if tok.text == "$":
            return self.dollars(tok)
        self.pos -= 1
        raise self.unexpected()

    def group(self) -> Node:
        opening = self.take()
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise UnitError(f"parentheses nested deeper than {MAX_DEPTH} in {self.text[:60]!r}...")
        inner = self.sum()
        if not self.at_op(")"):
            raise UnitError(f"'(' at position {opening.start + 1} of {self.text!r} is never closed")
        closing = self.take()
        self.depth -= 1
        return Group(opening.start, closing.end, inner)

    def dollars(self, sign: Token) -> Node:
        """``$2.95`` or ``$2.95/hour``: the amount in USD, then any unit after it."""
        if not self.at_kind("num"):
            return self.unit(first=(("USD", 1.0),), start=sign.start)
        amount = self.power()
        factors: tuple[tuple[str, float], ...] = (("USD", 1.0),)
        end = amount.end
        if self.unit_continues() or self.at_kind("name"):
            rest = self.unit(first=factors, start=sign.start)
            factors, end = rest.factors, rest.end
        return WithUnit(sign.start, end, amount, Unit(sign.start, end, factors))

    def unit_continues(self) -> bool:
        """A ``/`` or ``*`` followed by a unit name continues the unit being read."""
        return self.at_op("/", "*") and (self.at_kind("name", offset=1) or
                                         (self.at_op("$", offset=1) and not self.at_kind("num", offset=2)))

    def unit(self, first: tuple[tuple[str, float], ...] = (), start: int | None = None) -> Unit:
        """Unit names from ``pos`` on; ``first`` holds factors already read (the USD of ``$2/h``)."""
        factors = list(first)
        begin = self.peek().start if start is None else start
        sign = 1.0
        if first:
            if self.unit_continues():
                sign = -1.0 if self.take().text == "/" else 1.0
            elif not self.at_kind("name"):
                return Unit(begin, self.tokens[self.pos - 1].end, tuple(factors))
        while True:
            tok = self.take()
            name = "USD" if tok.text == "$" else tok.text
            exponent = 1.0
            if self.at_op("**"):
                self.take()
                exponent = self.unit_exponent()
            factors.append((name, sign * exponent))
            end = self.tokens[self.pos - 1].end
            if self.unit_continues():
                sign = -1.0 if self.take().text == "/" else 1.0
            elif self.at_kind("name"):
                sign = 1.0
            else:
                return Unit(begin, end, tuple(factors))

    def unit_exponent(self) -> float:
        _, negative = self.signs()
        if not self.at_kind("num"):
            raise UnitError(f"a unit's exponent must be a number, as in s**2, in {self.text!r}")
        tok = self.take()
        value = self.number(tok)
        self.check_exponent(value, tok.text)
        if value != int(value):  # GB**0.5 is no unit; a power of a quantity takes parentheses
            raise UnitError(f"a unit's exponent must be a whole number, as in s**2, got {tok.text} in {self.text!r}; "
                            "a power of a quantity takes parentheses, e.g. (4 GB)**0.5")
        self.refuse_chained()
        return -value if negative else value

    def refuse_ambiguous(self, first: Node, rest: list[tuple[str, Node]], right: Node) -> None:
        """``x / N unit`` with nothing unit-bearing in ``x``: refuse, offering both readings."""
        quantity = right
        while isinstance(quantity, Negate):
            quantity = quantity.operand
        if not isinstance(quantity, WithUnit) or quantity.unit.start < quantity.base.start:
            return  # no number-and-unit divisor, or a dollar amount ($2), which is one quantity
        if has_unit(first) or any(has_unit(n) for _, n in rest):
            return
        src = self.text
        left = src[first.start: rest[-1][1].end if rest else first.end]
        head, tail = src[: first.start], src[right.end:]
        number, unit = src[right.start: quantity.base.end], src[quantity.unit.start: quantity.unit.end]
        tight = f"{head}{left} / ({src[right.start: right.end]}){tail}"
        loose = f"{head}({left} / {number}) {unit}{tail}"
        raise AmbiguousExpressionError(
            f"{src!r} is ambiguous: {left!r} has no unit, so '{left} / {number} {unit}' may mean "
            f"{tight!r} or {loose!r}; write one of them",
            (tight, loose),
        )
