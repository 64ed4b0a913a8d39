"""A unit-checked calculator in which catalog values can be named.

``h100-sxm.flops.bf16 / h100-sxm.memory_bandwidth`` is the ridge point in FLOP/B;
``140 GB / 3.35 TB/s`` is 41.8 ms. References are ``<catalog id>.<field path>``:
hardware fields as in the YAML files (``memory_bandwidth``, ``flops.fp8``,
``scale_up.bandwidth``, ``price``...), and for models the quantities in
:data:`~inferlab.calc.references.MODEL_QUANTITIES` (``llama-3.1-70b.kv_bytes_per_token.fp8``).

The text is read by :mod:`inferlab.calc.syntax` (a number and its unit bind tighter than
``/``; ``10%`` is 0.1; ambiguous forms are refused); this module evaluates the tree in
float64 quantities, checking after every step that the value stays finite and representable.
"""

from __future__ import annotations

import difflib
import functools
import math
import operator
from dataclasses import dataclass
from typing import Any

import pint

from ..errors import UnitError, UnknownNameError
from ..specs.catalog import (AmbiguousNameError, hardware_id, hardware_ids, load_hardware, load_model, model_ids,
                             short_hardware_names)
from ..units import Quantity, readable, ureg
from . import syntax
from .references import hardware_ref, model_ref
from .tree import BareId, CatalogValue, Group, Negate, Node, Number, Power, Unit, WithUnit

@dataclass(frozen=True)
class Reference:
    """One catalog value used in an expression."""

    text: str
    value: pint.Quantity
    source: str


@dataclass(frozen=True)
class CalcResult:
    """The value of an expression and the catalog values it used."""

    expression: str
    value: pint.Quantity
    references: tuple[Reference, ...]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form: value in the displayed unit and in SI, plus references with sources."""
        return {
            "expression": self.expression,
            "value": float(self.value.magnitude),
            "unit": f"{self.value.units:~P}" or "dimensionless",
            "references": [
                {"name": r.text, "value": float(r.value.magnitude), "unit": f"{r.value.units:~P}", "source": r.source}
                for r in self.references
            ],
        }


def _resolve(node: CatalogValue) -> Reference:
    ident, path, text = node.ident, list(node.path), node.text
    if ident in model_ids():
        value, source = model_ref(load_model(ident), path, text)
    else:
        hw = _hardware(ident)
        text = hw + text[len(ident):] if text.startswith(ident) else text  # shown as the id it stands for
        value, source = hardware_ref(load_hardware(hw), path, text)
    return Reference(text, Quantity(float(value.magnitude), value.units), source)


@functools.lru_cache(maxsize=1)
def _catalog_names() -> frozenset[str]:
    """Catalog ids and the short GPU names :func:`hardware_id` completes (``h200``, ``h100``), so
    that a bare one is read as a catalog entry, not as an unknown unit."""
    return frozenset({*hardware_ids(), *model_ids(), *short_hardware_names()})


def _hardware(ident: str) -> str:
    """The hardware id ``ident`` names, as elsewhere (``h200`` is ``h200-sxm``: :func:`hardware_id`);
    an unknown name is refused among every catalog id, models included."""
    base, colon, mig = ident.partition(":")  # a MIG slice: the GPU's id completed, the slice checked on loading
    if colon and base in model_ids():
        raise UnitError(f"{ident}: a MIG slice (after ':') is a part of a GPU, and {base} is a model")
    try:
        return hardware_id(base) + colon + mig
    except AmbiguousNameError:
        raise
    except UnknownNameError:
        raise UnknownNameError("catalog id", ident, [*hardware_ids(), *model_ids()]) from None


def evaluate(expression: str, to: str | None = None) -> CalcResult:
    """Evaluate a unit expression, with catalog references, into a quantity.

    A number and its unit are one quantity, so ``140 GB / 3.35 TB/s`` divides by 3.35 TB/s;
    ``10%`` is the number 0.1; a unit-less dividend over a number with a unit (``1/2 h``) is
    refused as ambiguous. The grammar, its bounds and the refused forms are in
    :mod:`inferlab.calc.syntax`.

    Parameters
    ----------
    expression : str
        E.g. ``"140 GB / 3.35 TB/s"`` or ``"h100-sxm.flops.bf16 / h100-sxm.memory_bandwidth"``.
    to : str, optional
        Unit to express the result in (``"ms"``, ``"GB/s"``, ``"%"``); must have the result's
        dimension.

    Returns
    -------
    CalcResult
        The value (in ``to``, or in a readable unit) and the catalog values used, with sources.

    Raises
    ------
    UnitError
        On malformed or ambiguous text, unknown units, mixing dimensions (bytes + seconds),
        division by zero, an exponent or literal over the bounds, or a value outside float64.
    UnknownNameError
        On an unknown catalog id or field, with suggestions.

    Examples
    --------
    >>> evaluate("140 GB / 3.35 TB/s", to="ms").value.magnitude
    41.7910447761194
    >>> evaluate("1 h / 2 h").value.magnitude
    0.5
    >>> evaluate("7 TB / 10%").value
    <Quantity(70.0, 'terabyte')>
    """
    if not isinstance(expression, str):
        raise UnitError(f"the expression must be text such as '140 GB / 3.35 TB/s', got "
                        f"{type(expression).__name__} {expression!r:.60}")
    if to is not None and not isinstance(to, str):
        raise UnitError(f"to must be a unit such as 'ms' or 'GB/s', got {type(to).__name__} {to!r:.60}")
    if not expression.strip():
        raise UnitError("the expression is empty; write one such as '140 GB / 3.35 TB/s'")
    tree = syntax.parse(expression, _catalog_names())
    evaluator = _Evaluator(expression)
    value = _representable(evaluator.value(tree), expression)
    value = _readable(value, expression) if to is None else _convert(value, to, expression)
    return CalcResult(expression, value, tuple(evaluator.references))


class _Evaluator:
    """Walks the tree of one expression; records the catalog values it reads."""

    def __init__(self, text: str):
        self.text = text
        self.references: list[Reference] = []

    def value(self, node: Node) -> pint.Quantity:
        if isinstance(node, Number):
            return Quantity(node.value, "dimensionless")
        if isinstance(node, Unit):
            return Quantity(1.0, _unit_of(node, self.text))
        if isinstance(node, CatalogValue):
            self.references.append(_resolve(node))
            return self.references[-1].value
        if isinstance(node, BareId):
            ident = node.ident if node.ident in model_ids() else _hardware(node.ident)
            example = "total_params" if node.ident in model_ids() else "memory_bandwidth"
            raise UnitError(f"{node.ident!r} names a catalog entry, not a number; name one of its values, "
                            f"e.g. {ident}.{example}")
        if isinstance(node, Group):
            return self.value(node.inner)
        if isinstance(node, WithUnit):
            return self.combine("*", self.value(node.base), Quantity(1.0, _unit_of(node.unit, self.text)))
        if isinstance(node, Negate):
            return -self.value(node.operand)
        if isinstance(node, Power):
            return self.power(node)
        result = self.value(node.first)
        for op, operand in node.rest:
            result = self.combine(op, result, self.value(operand))
        return result

    def combine(self, op: str, a: pint.Quantity, b: pint.Quantity) -> pint.Quantity:
        try:
            result = _OPS[op](a, b)
        except pint.DimensionalityError as exc:
            raise UnitError(f"in {self.text!r}: {exc}") from None
        except ZeroDivisionError:
            raise UnitError(f"division by zero in {self.text!r}") from None
        except OverflowError:
            raise _too_large(self.text) from None
        return _finite(result, self.text, a.magnitude != 0 and b.magnitude != 0 and op in "*/")

    def power(self, node: Power) -> pint.Quantity:
        base, exponent = self.value(node.base), self.value(node.exponent)
        shown = self.text[node.exponent.start: node.exponent.end]
        if not exponent.dimensionless:
            raise UnitError(f"the exponent {shown!r} in {self.text!r} has a unit ({exponent.units:~P}); "
                            "an exponent must be a plain number")
        e = float(exponent.to("dimensionless").magnitude)
        if not abs(e) <= syntax.MAX_EXPONENT:
            raise UnitError(f"exponent {shown} = {e:g} in {self.text!r} is larger than {syntax.MAX_EXPONENT} "
                            "(in absolute value); compute in steps or use a unit prefix")
        if base.magnitude < 0 and not e.is_integer():
            raise UnitError(f"a negative number to the power {e:g} is not a real number, in {self.text!r}")
        if base.magnitude == 0 and e < 0:
            raise UnitError(f"division by zero in {self.text!r}: 0 to a negative power")
        try:
            result = base ** (int(e) if e.is_integer() else e)
        except OverflowError:
            raise _too_large(self.text) from None
        if not all(float(v).is_integer() for v in result.dimensionality.values()):
            raise UnitError(f"{base.units:~P} to the power {e:g} in {self.text!r} is no unit: a fractional power "
                            "must leave whole powers of each dimension ((1 GB**2) ** 0.5 is 1 GB)")
        return _finite(result, self.text, base.magnitude != 0)


_OPS = {"+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv}


def _finite(q: pint.Quantity, text: str, nonzero: bool) -> pint.Quantity:
    """``q``, or an error when float64 overflowed (inf) or a nonzero result underflowed to 0."""
    magnitude = float(q.magnitude)
    if not math.isfinite(magnitude):
        raise _too_large(text)
    if nonzero and magnitude == 0:
        raise _too_small(text)
    return q


def _too_large(text: str) -> UnitError:
    return UnitError(f"{text!r} is not a finite number: a value exceeds the float64 range "
                     "(about 1.8e308 in its unit or in SI units); use smaller numbers or a unit prefix")


def _too_small(text: str) -> UnitError:
    return UnitError(f"{text!r} underflows: a nonzero value is below the float64 range "
                     "(about 1e-308 in its unit or in SI units) and would read as 0")


def _representable(q: pint.Quantity, text: str) -> pint.Quantity:
    """``q`` if its dimension exponents are bounded and its SI value is a finite float64."""
    if any(abs(v) > syntax.MAX_EXPONENT for v in q.dimensionality.values()):
        raise UnitError(f"{text!r} has the dimension {q.dimensionality}; exponents beyond "
                        f"{syntax.MAX_EXPONENT} mean nothing physical")
    try:
        si = float(q.to_base_units().magnitude)
    except OverflowError:
        raise _too_large(text) from None
    _finite(Quantity(si, "dimensionless"), text, q.magnitude != 0)
    return q


def _readable(q: pint.Quantity, text: str) -> pint.Quantity:
    try:
        shown = readable(q)
    except OverflowError:
        raise _too_large(text) from None
    return _finite(shown, text, q.magnitude != 0)


@functools.lru_cache(maxsize=1024)
def _unit_named(name: str) -> pint.Unit | None:
    """The registry's unit called ``name`` (with prefixes: ``GB``, ``ktok``), or None."""
    try:
        return ureg.Unit(name)
    except (AttributeError, ValueError, TypeError):  # pint: UndefinedUnitError, or a name read as a number
        return None


#: Units that count whole things: a fraction of one (a millibit, a microtoken) is a misreading of
#: an upper-case prefix ("mb" for Mb or MB), not a quantity anyone means.
_COUNTED = {"bit": "bit", "byte": "byte", "token": "token", "request": "request", "flop": "FLOP"}
_SUB_UNIT = {"milli", "micro", "nano", "pico", "femto", "atto", "quecto", "centi"}


def _check_name(name: str, text: str) -> None:
    """Refuse unit spellings that read as something no one means (:data:`_COUNTED`, ``FLOPs``)."""
    if name == "to":
        before, _, after = text.partition(" to ")
        raise UnitError(f"'to' in {text!r} is not a unit: give the target unit with --to "
                        f"(inferlab calc {before.strip()!r} --to {after.strip() or 'UNIT'})")
    if name.endswith(("FLOPs", "OPs")):
        stem = name[:-1]
        raise UnitError(f"{name!r} in {text!r} is ambiguous: write {stem} for a count of operations or "
                        f"{stem}S ({stem}/s) for a rate")
    parsed = ureg.parse_unit_name(name)
    if len(parsed) == 1 and parsed[0][0] in _SUB_UNIT and parsed[0][1] in _COUNTED:
        prefix, base, _ = parsed[0]
        hint = "use a prefix of k, M, G, T or P"
        if name.startswith("m"):  # mega- written lower-case
            mega = "M" + name[1:]
            other = {"bit": " or 'MB' (megabytes)", "byte": " or 'Mb' (megabits)"}.get(base, "")
            hint = f"did you mean {mega!r}{other}?"
        raise UnitError(f"{name!r} in {text!r} reads as {prefix}{_COUNTED[base]}s, a fraction of a "
                        f"{_COUNTED[base]}; {hint}")


def _unit_of(node: Unit, text: str) -> pint.Unit:
    unit = ureg.Unit("dimensionless")
    for name, exponent in node.factors:
        _check_name(name, text)
        named = _unit_named(name)
        if named is None:
            raise UnitError(f"unknown unit {name!r} in {text!r}{_did_you_mean(name)}; {_UNIT_HINT}")
        unit = unit * named ** (int(exponent) if float(exponent).is_integer() else exponent)
    return unit


_UNIT_HINT = (
    "known units include B, b (bit), FLOP, FLOPS, OPS, s, ms, h, token (tok), request (req), USD ($), "
    "W, Hz, % with SI prefixes (k, M, G, T, P: '128 ktok') or binary ones (Ki, Mi, Gi, Ti)"
)
# (sub-unit prefixes only where a fraction of the unit means something: no millibytes to suggest)
_COMMON_UNITS = [p + u for u in ("B", "b", "FLOP", "FLOPS", "OPS", "s", "tok", "req", "W", "Hz", "J", "Wh", "bps")
                 for p in ("", "k", "M", "G", "T", "P", "Ki", "Mi", "Gi", "Ti", "m", "u", "n")
                 if p not in ("m", "u", "n") or u in ("s", "W", "Hz", "J", "Wh")] + [
    "min", "h", "hour", "day", "week", "token", "tokens", "request", "requests", "USD", "percent",
    "thousand", "million", "billion", "second", "byte", "bit", "flop", "watt", "hertz"]


def _did_you_mean(name: str) -> str:
    # the same letters in another case first ('gb': GB and Gb, bytes and bits), then near spellings
    same = [u for u in _COMMON_UNITS if u.lower() == name.lower()]
    close = same or difflib.get_close_matches(name, _COMMON_UNITS, n=3, cutoff=0.6)
    return " (did you mean " + " or ".join(repr(c) for c in close) + "?)" if close else ""


#: Dimensions of things counted, and the unit a count of them takes: a plain number (a batch,
#: ``total_params``, a token count written bare) has none, so a formula over one comes out a
#: power of the dimension away from the unit asked for.
_COUNT_UNITS = {"[compute]": "FLOP", "[token]": "token", "[request]": "request", "[information]": "B"}


def _missing_count(leftover: Any, expression: str) -> str:
    """A hint when the result is ``unit x dimension**n`` for one counted dimension: the count whose
    unit was left out, and the expression with it put back; "" otherwise."""
    if len(leftover) != 1:
        return ""
    (dimension, power), = leftover.items()
    unit = _COUNT_UNITS.get(dimension)
    if unit is None or not float(power).is_integer():
        return ""
    power = int(power)
    counted = unit if abs(power) == 1 else f"{unit}**{abs(power)}"
    if power < 0:
        return (f"; it lacks a factor of {counted} (a count such as total_params, or a plain number, has no unit): "
                f"multiply by 1 {counted}, `1 {counted} * ({expression})`")
    return (f"; it has a factor of {counted} too many (a count it is divided by, such as total_params, or a plain "
            f"number, has no unit): divide by 1 {counted}, `({expression}) / (1 {counted})`")


def _convert(q: pint.Quantity, unit: str, expression: str) -> pint.Quantity:
    target = _unit_of(syntax.parse_unit_text(unit), unit)
    if q.dimensionality != target.dimensionality:
        have = str(q.dimensionality) if q.dimensionality else "dimensionless"
        raise UnitError(f"{expression!r} is {have} ({q:~P}); it cannot be expressed in {unit}"
                        f"{_missing_count(q.dimensionality / target.dimensionality, expression)}")
    try:
        converted = q.to(target)
    except OverflowError:
        raise _too_large(expression) from None
    return _finite(converted, expression, q.magnitude != 0)
