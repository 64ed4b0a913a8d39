"""The inferlab unit registry and the helpers that cross the pint boundary.

inferlab owns one :class:`pint.UnitRegistry` (:mod:`inferlab.unit_registry`, imported on the
first call that needs it), loaded from ``units.txt``, in which information (bit, byte), compute (FLOP), tokens, requests, currency
(USD) and time are distinct dimensions, with SI prefixes (GB = 1e9 B) and IEC binary
prefixes (GiB = 2**30 B). ``Gb`` is a gigabit: no gilbert is defined.

Inside the core every quantity is a plain float64 in a *canonical* unit, one per
dimension (byte, second, FLOP, token, request, USD, watt, hertz); :func:`to_si` and
:func:`from_si` cross that boundary.

Examples
--------
>>> from inferlab import Q
>>> Q("400 Gb/s").to("GB/s")
<Quantity(50.0, 'gigabyte / second')>
>>> round((Q("140 GB") / Q("3.35 TB/s")).to("ms").magnitude, 1)
41.8
"""

from __future__ import annotations

import functools
import math
import re
from typing import Any

import sys
from typing import TYPE_CHECKING

import numpy as np

from .disk_cache import memo
from .errors import UnitError

if TYPE_CHECKING:
    import pint


def _registry():
    """The registry module, imported on first use (it imports pint)."""
    from . import unit_registry

    return unit_registry


def __getattr__(name: str) -> Any:
    if name in ("ureg", "Quantity", "DimensionError"):
        return getattr(_registry(), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def is_quantity(value: Any) -> bool:
    """Whether ``value`` is a pint quantity (without importing pint: none exists before it is)."""
    pint_module = sys.modules.get("pint")
    return pint_module is not None and isinstance(value, pint_module.Quantity)


#: Canonical unit per dimensionality: the unit a float inside the core is in.
CANONICAL: dict[str, str] = {
    "byte": "byte",
    "byte/token": "byte/token",
    "byte/second": "byte/second",
    "flop": "flop",
    "flop/second": "flop/second",
    "flop/byte": "flop/byte",
    "second": "second",
    "token": "token",
    "token/second": "token/second",
    "request": "request",
    "request/second": "request/second",
    "USD": "USD",
    "USD/hour": "USD/hour",
    "USD/token": "USD/token",
    "watt": "watt",
    "watt_hour": "watt_hour",
    "hertz": "hertz",
    "dimensionless": "dimensionless",
}

_DOLLAR_AMOUNT = re.compile(r"\$\s*([0-9][0-9,.]*(?:[eE][+-]?[0-9]+)?)")
_POWER = re.compile(r"(\*\*|\^)\s*\(?\s*[-+]?\s*([0-9][0-9.]*(?:[eE][+-]?[0-9]+)?)")
_CHAINED_POWER = re.compile(r"(\*\*|\^)[^*^+/()-]*(\*\*|\^)")
_MAX_EXPONENT = 64
#: An exponent: a number, bare or alone in parentheses (group 1: the opening one, 2: the closing one).
_EXPONENT = re.compile(r"\s*(\()?\s*[-+]?\s*[0-9][0-9.]*(?:[eE][+-]?[0-9]+)?\s*(\))?")
#: Longest quantity or unit text read [characters]; pint's preprocessing is quadratic in length.
_MAX_LENGTH = 1000
#: Most digits in one number; a float holds 17 significant digits (same bound as the calculator).
_MAX_DIGITS = 40
_DIGIT_RUN = re.compile(r"[0-9]{%d,}" % (_MAX_DIGITS + 1))


def Q(value: Any, unit: str | None = None) -> pint.Quantity:
    """Build a quantity in inferlab's registry.

    Parameters
    ----------
    value : str, number or pint.Quantity
        ``"3.35 TB/s"``, ``"$2.50/hour"`` or a number (then give ``unit``).
    unit : str, optional
        Unit for a numeric ``value``.

    Returns
    -------
    pint.Quantity
        A quantity of inferlab's registry.

    Raises
    ------
    UnitError
        If the text does not parse or names an unknown unit.

    Examples
    --------
    >>> Q("80 GiB").to("GB")
    <Quantity(85.8993459, 'gigabyte')>
    >>> Q(2, "TB/s")
    <Quantity(2, 'terabyte / second')>
    """
    ureg, Quantity = _registry().ureg, _registry().Quantity
    if is_quantity(value):
        if value._REGISTRY is not ureg:
            return parse(f"{value.magnitude!r} {value.units:~}" if unit is None else str(value))
        return value if unit is None else value.to(unit)
    if isinstance(value, str):
        if unit is not None:
            raise UnitError(f"give either a text like '3.35 TB/s' or a number and a unit, not both ({value!r}, {unit!r})")
        return parse(value)
    if isinstance(value, np.ndarray) and value.dtype.kind in "iuf":
        return Quantity(value.astype(float), parse_unit(unit if unit is not None else "dimensionless"))
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise UnitError(f"cannot make a quantity from {type(value).__name__} {value!r}; give a text like '3.35 TB/s'")
    return Quantity(value, parse_unit(unit if unit is not None else "dimensionless"))


#: A number whose digits are grouped in thousands by commas (``1,000``, ``12,345.5``).
_THOUSANDS = re.compile(r"(?<![\d,.])\d{1,3}(?:,\d{3})+(?![\d,])")


def parse(text: str, values: dict[str, pint.Quantity] | None = None, *, label: str | None = None) -> pint.Quantity:
    """Parse ``"<number> <unit>"`` (or an expression of such) in inferlab's registry.

    Parameters
    ----------
    text : str
        E.g. ``"3.35 TB/s"``, ``"$2.50/hour"``, ``"140 GB / (3.35 TB/s)"``.
    values : dict, optional
        Quantities to substitute for names in ``text`` (the calculator's catalog values).
    label : str, optional
        The text to quote in error messages (the expression before substitution).

    Raises
    ------
    UnitError
        If the text is empty, malformed, names an unknown unit, mixes dimensions, or
        is not a finite number.
    """
    if not isinstance(text, str) or not text.strip():
        raise UnitError(f"expected a quantity such as '3.35 TB/s', got {text!r}")
    cleaned = _DOLLAR_AMOUNT.sub(r"\1 USD", text.strip()).replace("$", " USD ")
    shown = label if label is not None else text
    if "," in _THOUSANDS.sub("", cleaned):  # pint drops every comma: "1,2,3" had read as 123
        raise UnitError(f"{shown!r} is not a quantity: a comma only groups thousands ('1,000 tok'); give one "
                        "value, or a list of values where a list is taken")
    _check_size(cleaned, shown, "quantity")
    _check_powers(cleaned, shown)
    registry = _registry()
    try:
        q = None if values else _simple_quantity(cleaned)
        if q is None:
            q = registry.ureg.parse_expression(cleaned, **(values or {}))
    except registry.pint.UndefinedUnitError as exc:
        raise UnitError(f"unknown unit {_names(exc)} in {shown!r}; {_UNIT_HINT}") from None
    except registry.DimensionError as exc:
        raise UnitError(f"in {shown!r}: {exc}") from None
    except Exception as exc:  # pint raises several types (tokenize, Syntax, Attribute) on malformed text
        raise UnitError(f"cannot read {shown!r} as a quantity ({type(exc).__name__}); write e.g. '3.35 TB/s'") from None
    if not is_quantity(q):
        q = registry.Quantity(q, "dimensionless")
    try:
        finite = math.isfinite(float(q.magnitude))
    except (OverflowError, TypeError, ValueError):
        finite = False
    if not finite:
        raise UnitError(f"{shown!r} is not a finite number")
    return q


#: ``<number> <unit>`` or ``<number> <unit>/<unit>``, the form of nearly every spec figure.
_SIMPLE = re.compile(r"([0-9]+(\.[0-9]*)?([eE][-+]?[0-9]+)?)\s*([A-Za-z_]+)(\s*/\s*[A-Za-z_]+)?")


@functools.lru_cache(maxsize=512)
def _unit(text: str) -> pint.Unit:
    return _registry().ureg.Unit(text)


def _simple_quantity(cleaned: str) -> pint.Quantity | None:
    """The quantity :meth:`pint.UnitRegistry.parse_expression` builds from a simple text, without
    its tokenizer, which dominated loading the catalogs; None for anything else.

    ``parse_expression`` reads ``80 GB/s`` as ``80 * (1 GB) / (1 s)``: the number as ``int`` when
    it is written as one (else ``float``), times ``1``, divided by ``1`` when there is a ``/``.
    The same arithmetic here gives the same magnitude, of the same type, in the same unit.
    """
    match = _SIMPLE.fullmatch(cleaned)
    if match is None:
        return None
    number, fraction, exponent, unit, per = match.groups()
    try:
        units = _unit(unit + per.replace(" ", "") if per else unit)
    except Exception:  # not one unit: the full parser reads it, or says what is wrong
        return None
    magnitude: Any = int(number) if fraction is None and exponent is None else float(number)
    magnitude = magnitude * 1
    if per:
        magnitude = magnitude / 1
    return _registry().Quantity(magnitude, units)


def _check_size(cleaned: str, text: str, what: str) -> None:
    """Refuse text too long, or numbers with too many digits, to read in bounded time."""
    if len(cleaned) > _MAX_LENGTH:
        raise UnitError(f"the {what} text is {len(cleaned):,} characters long; at most {_MAX_LENGTH:,} are read")
    if _DIGIT_RUN.search(cleaned):
        raise UnitError(f"a number in {text[:60]!r} has more than {_MAX_DIGITS} digits; "
                        "write it with an exponent, e.g. 1.5e40")


def _check_powers(cleaned: str, text: str) -> None:
    """Refuse exponents that would make the parser compute for ever (``9**9**9``, ``9**(9**9)``):
    an exponent is a number, bare or in parentheses, of at most :data:`_MAX_EXPONENT`."""
    if _CHAINED_POWER.search(cleaned):
        raise UnitError(f"chained powers are not allowed in {text!r}; add parentheses or compute in steps")
    for op in re.finditer(r"\*\*|\^", cleaned):
        exponent = _EXPONENT.match(cleaned, op.end())
        if exponent is None or exponent.group(1) and not exponent.group(2):
            raise UnitError(f"the exponent after {op.group()!r} in {text!r} must be a number, e.g. s**2 or 10**(-3)")
    for match in _POWER.finditer(cleaned):
        try:
            big = abs(float(match.group(2))) > _MAX_EXPONENT
        except ValueError:
            big = True
        if big:
            raise UnitError(f"exponent {match.group(2)} in {text!r} is larger than {_MAX_EXPONENT}")


def parse_unit(unit: str) -> pint.Unit:
    """Parse a unit name such as ``"GB/s"`` into a unit of inferlab's registry."""
    if isinstance(unit, str):
        _check_size(unit, unit, "unit")
        _check_powers(unit, unit)
    pint_errors = _registry().pint
    try:
        return _unit(unit)
    except pint_errors.UndefinedUnitError as exc:
        raise UnitError(f"unknown unit {_names(exc)} in {unit!r}; {_UNIT_HINT}") from None
    except Exception as exc:
        raise UnitError(f"cannot read {unit!r} as a unit ({type(exc).__name__}); {_UNIT_HINT}") from None


_UNIT_HINT = (
    "known units include B, b (bit), FLOP, FLOPS, OPS, s, ms, h, token (tok), request (req), USD ($), "
    "W, Hz with SI prefixes (k, M, G, T, P: '128 ktok') or binary ones (Ki, Mi, Gi, Ti)"
)


def _names(exc: Exception) -> str:
    """The unknown unit names of pint's error, quoted and joined ('foo', or 'foo', 'bar')."""
    names = getattr(exc, "unit_names", ()) or ()
    names = (names,) if isinstance(names, str) else tuple(names)
    return ", ".join(repr(str(n)) for n in names) or "(unnamed)"


def dimension_name(unit: str | pint.Unit) -> str:
    """Human name of a unit's dimensionality, e.g. ``"[information] / [time]"``."""
    dim = parse_unit(unit).dimensionality if isinstance(unit, str) else unit.dimensionality
    return str(dim) if dim else "dimensionless"


def to_si(q: pint.Quantity | str, unit: str) -> float:
    """Magnitude of ``q`` in the canonical ``unit``, as float64.

    Parameters
    ----------
    q : pint.Quantity or str
        The quantity, e.g. ``Q("3.35 TB/s")`` or ``"3.35 TB/s"``.
    unit : str
        The canonical unit to express it in, e.g. ``"byte/second"``.

    Raises
    ------
    UnitError
        If ``q`` has no unit or a dimensionality other than ``unit``'s.

    Examples
    --------
    >>> to_si("3.35 TB/s", "byte/second")
    3350000000000.0
    """
    q = parse(q) if isinstance(q, str) else Q(q)
    target = parse_unit(unit)
    if q.dimensionality != target.dimensionality:
        if not q.dimensionality:
            raise UnitError(
                f"bare number {q.magnitude!r} has no unit; expected {dimension_name(target)} "
                f"such as '{q.magnitude} {unit}'"
            )
        raise UnitError(
            f"{q:~P} is {dimension_name(q.units)}, expected {dimension_name(target)} (e.g. in {unit})"
        )
    return float(q.to(target).magnitude)


def to_si_array(value: Any, unit: str, what: str) -> np.ndarray:
    """``value`` as a float64 array in the canonical ``unit``: quantities are converted,
    plain numbers are taken as already in ``unit``.

    Raises
    ------
    UnitError
        If ``value`` has the wrong dimension or is not numeric, naming ``what``.
    """
    if is_quantity(value):
        q = Q(value)
        target = parse_unit(unit)
        if q.dimensionality != target.dimensionality:
            raise UnitError(f"{what} must be in {dimension_name(target)} (e.g. {unit}), got {q:~P}")
        value = q.to(target).magnitude
    try:
        arr = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise UnitError(f"{what} must be numbers in {unit}, got {value!r}") from None
    return arr


def readable(q: pint.Quantity) -> pint.Quantity:
    """The quantity in a unit a person reads at a glance.

    Canonical unit for its dimension, then: an SI prefix for bytes, FLOP/s and the like
    (3.35 TB/s), minutes/hours/days for long times, none for money and intensities.
    """
    for unit in CANONICAL.values():
        target = parse_unit(unit)
        if q.dimensionality != target.dimensionality:
            continue
        q = q.to(target)
        if unit == "second" and abs(q.magnitude) >= 60:
            for name, size in (("day", 86400), ("hour", 3600), ("minute", 60)):
                if abs(q.magnitude) >= size:
                    return q.to(name)
        if unit == "USD/token":
            return q.to("USD/Mtok")
        if unit in ("dimensionless", "flop/byte") or unit.startswith("USD"):
            return q
        if unit == "watt_hour" and abs(q.magnitude) < 1:  # below a watt-hour, joules (3 J, not 833 uWh)
            return q.to("joule").to_compact()
        if unit in ("byte", "flop", "token", "request") and abs(q.magnitude) < 1:
            return q  # a fraction of a byte, not millibytes (a prefix the calculator does not read back)
        return q.to_compact()
    return q.to_reduced_units()


def conversion_factor(src: str, dst: str) -> float:
    """The factor pint multiplies a magnitude in ``src`` by to express it in ``dst``, so that
    ``value * conversion_factor(src, dst)`` is exactly ``Q(value, src).to(dst).magnitude``
    (pint converts a multiplicative unit by that one multiplication).

    Kept in the on-disk memo (:mod:`inferlab.disk_cache`): the catalog listings convert
    figures for display without importing pint.

    Raises
    ------
    UnitError
        If either name is not a unit or their dimensions differ.
    """
    return memo("unit-factor", f"{src}\n{dst}", lambda: _factor(src, dst))


def _factor(src: str, dst: str) -> float:
    one = _registry().Quantity(1.0, parse_unit(src))
    target = parse_unit(dst)
    if one.dimensionality != target.dimensionality:
        raise UnitError(f"cannot express {src} in {dst}: {dimension_name(src)} is not {dimension_name(target)}")
    return float(one.to(target).magnitude)


def from_si(value: float, unit: str) -> pint.Quantity:
    """Wrap a canonical float back into a quantity of ``unit``."""
    return _registry().Quantity(value, parse_unit(unit))


