"""The calculator's tokens: numbers, unit names, catalog references and operators
(:mod:`.syntax` reads them into a tree)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..errors import UnitError

#: Most digits in one number literal; a float holds 17 significant digits.
MAX_DIGITS = 40

#: A catalog id (dotted parts begin with a digit: llama-3.1-8b), with a MIG slice after a colon
#: (h100-sxm:3g.40gb).
_ID = r"[a-z][a-z0-9\-]*(?:\.[0-9][a-z0-9\-]*)*(?::[0-9][a-z0-9\-]*(?:\.[0-9][a-z0-9\-]*)*)?"
CATALOG_REF = re.compile(rf"({_ID})\.([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z0-9_]+)*)", re.IGNORECASE)
_BARE = re.compile(rf"({_ID})(?![\w.])", re.IGNORECASE)
_NUMBER = re.compile(r"(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_NAME = re.compile(r"[A-Za-z_\u00b5\u03bc][A-Za-z0-9_\u00b5\u03bc]*")
_DIGITS = tuple("0123456789")
_OPERATORS = ("**", "+", "-", "*", "/", "^", "(", ")", "%", "$")


@dataclass(frozen=True)
class Token:
    """One token: ``kind`` is num, name, ref, id (a bare catalog id) or op."""

    kind: str
    text: str
    start: int
    end: int


def tokenize(text: str, catalog_ids: frozenset[str] = frozenset()) -> list[Token]:
    """Split ``text`` into tokens; catalog references are single tokens.

    Raises
    ------
    UnitError
        On a character the grammar does not use, or a number literal over :data:`MAX_DIGITS`.
    """
    tokens: list[Token] = []
    pos = 0
    while pos < len(text):
        char = text[pos]
        if char.isspace():
            pos += 1
            continue
        if char in _DIGITS or (char == "." and text[pos + 1: pos + 2] in _DIGITS):
            match = _NUMBER.match(text, pos)
            _check_digits(match.group(0), text)
            tokens.append(Token("num", match.group(0), pos, match.end()))
        elif _NAME.match(text, pos):
            tokens.append(_word(text, pos, catalog_ids))
        else:
            op = next((o for o in _OPERATORS if text.startswith(o, pos)), None)
            if op is None:
                raise UnitError(f"unexpected character {char!r} at position {pos + 1} of {text!r}; "
                                "use numbers, units, catalog values and + - * / ** ( ) %")
            tokens.append(Token("op", "**" if op == "^" else op, pos, pos + len(op)))
        pos = tokens[-1].end
    return tokens


def _check_digits(literal: str, text: str) -> None:
    digits = sum(c.isdigit() for c in literal.split("e")[0].split("E")[0])
    if digits > MAX_DIGITS:
        raise UnitError(f"a number with {digits} digits in {text[:60]!r}... is longer than {MAX_DIGITS} digits; "
                        "write it with an exponent, e.g. 1.5e40")


def _word(text: str, pos: int, catalog_ids: frozenset[str]) -> Token:
    """A catalog reference, a bare catalog id, or a unit name starting at ``pos``."""
    ref = CATALOG_REF.match(text, pos)
    if ref:
        return Token("ref", ref.group(0), pos, ref.end())
    bare = _BARE.match(text, pos)
    if bare and bare.group(1).lower().partition(":")[0] in catalog_ids:  # (a MIG slice's GPU too)
        return Token("id", bare.group(1).lower(), pos, bare.end())
    name = _NAME.match(text, pos)
    return Token("name", name.group(0), pos, name.end())
