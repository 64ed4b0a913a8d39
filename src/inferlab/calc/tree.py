"""The calculator's expression tree: frozen nodes, each with its span in the source text.

:mod:`inferlab.calc.syntax` builds the tree; :mod:`inferlab.calc` evaluates it. Sums and
products are flat chains (``a + b - c`` is one node), so the depth of the tree grows only with
parentheses, which the parser bounds.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Node:
    """A part of the expression tree; ``start:end`` is its span in the source text."""

    start: int
    end: int


@dataclass(frozen=True)
class Number(Node):
    value: float


@dataclass(frozen=True)
class Unit(Node):
    """A unit: names with exponents, e.g. ``TB/s`` is ``(("TB", 1), ("s", -1))``."""

    factors: tuple[tuple[str, float], ...]


@dataclass(frozen=True)
class CatalogValue(Node):
    """``<catalog id>.<field path>``, e.g. ``h100-sxm.flops.bf16``."""

    ident: str
    path: tuple[str, ...]
    text: str


@dataclass(frozen=True)
class BareId(Node):
    """A catalog id without a field (``h100-sxm``), kept so the evaluator can say what to add."""

    ident: str


@dataclass(frozen=True)
class Group(Node):
    inner: Node


@dataclass(frozen=True)
class WithUnit(Node):
    """A number (or parenthesis, or power) and the unit written after it; ``$2`` too."""

    base: Node
    unit: Unit


@dataclass(frozen=True)
class Negate(Node):
    operand: Node


@dataclass(frozen=True)
class Power(Node):
    base: Node
    exponent: Node


@dataclass(frozen=True)
class Chain(Node):
    """``first op1 x1 op2 x2 ...``, left to right: a sum (``+ -``) or a product (``* /``)."""

    first: Node
    rest: tuple[tuple[str, Node], ...]


def has_unit(node: Node) -> bool:
    """Whether a unit or catalog value is written anywhere in ``node``."""
    if isinstance(node, (Unit, CatalogValue, BareId)):
        return True
    if isinstance(node, WithUnit):
        return True
    if isinstance(node, Group):
        return has_unit(node.inner)
    if isinstance(node, Negate):
        return has_unit(node.operand)
    if isinstance(node, Power):
        return has_unit(node.base) or has_unit(node.exponent)
    if isinstance(node, Chain):
        return has_unit(node.first) or any(has_unit(n) for _, n in node.rest)
    return False
