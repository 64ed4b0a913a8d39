"""Sourced, dimensioned spec values: the building block of every spec file.

A *figure* is one number from a datasheet or config, with its unit and the id of the
source it was read from. In YAML it is written as a mapping::

    memory_bandwidth: {value: 3.35 TB/s, source: nv_h100_page}

with optional ``note`` (why this value, how it was derived) and ``alternatives`` (what
other sources say, each with its own ``source``). A bare number for a dimensioned field
is rejected, naming the unit expected.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

from ..errors import UnitError
from ..units import dimension_name, from_si, is_quantity, parse, parse_unit, to_si

if TYPE_CHECKING:
    import pint

_STRICT = ConfigDict(frozen=True, extra="forbid", strict=False)


class Alternative(BaseModel):
    """A value another source gives for the same field, kept for the record."""

    model_config = _STRICT

    value: str = Field(description="The value as that source states it, with its unit.")
    source: str = Field(min_length=1)
    note: str | None = None


class Figure(BaseModel):
    """One sourced value, stored as float64 in its canonical SI unit.

    Attributes
    ----------
    si : float
        The value in ``unit`` (canonical, e.g. byte/second).
    unit : str
        The canonical unit of ``si``.
    stated : str
        The value exactly as written in the spec (e.g. ``"80 GB"``), so GB vs GiB survives.
    source : str
        Id of the source, resolved in the file's ``sources`` map.
    """

    model_config = _STRICT

    si: float
    unit: str
    stated: str
    source: str = Field(min_length=1)
    note: str | None = None
    as_of: str | None = Field(default=None, description="Date the value refers to (prices).")
    alternatives: tuple[Alternative, ...] = ()

    @property
    def quantity(self) -> pint.Quantity:
        """The value as a pint quantity in the canonical unit."""
        return from_si(self.si, self.unit)

    @property
    def stated_quantity(self) -> pint.Quantity:
        """The value as a pint quantity in the unit the source used."""
        return parse(self.stated)

    def __str__(self) -> str:
        return self.stated


def _parse_figure(raw: Any, *, unit: str, minimum: float | None, integer: bool) -> Any:
    if isinstance(raw, Figure):
        return raw
    expected = dimension_name(unit)
    if not isinstance(raw, dict):
        raise UnitError(
            f"expected a mapping {{value: '<number> <unit>', source: <id>}} with a value in {expected} "
            f"(e.g. {unit}), got {type(raw).__name__} {raw!r}"
        )
    data = dict(raw)
    if "value" not in data:
        raise UnitError(f"missing 'value' (a quantity in {expected}, e.g. '1 {unit}')")
    value = data.pop("value")
    if is_quantity(value):
        value = f"{value.magnitude!r} {value.units:~}"
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise UnitError(f"value must be text like '1 {unit}', got {type(value).__name__} {value!r}")
    dimensionless = not parse_unit(unit).dimensionality
    if isinstance(value, (int, float)):
        if not dimensionless:
            raise UnitError(f"bare number {value!r} has no unit; expected {expected}, e.g. '{value} {unit}'")
        text = repr(value)
    else:
        text = value.strip()
    si = to_si(parse(text), unit)
    if minimum is not None and si < minimum:
        raise UnitError(f"{text} is below the allowed minimum ({minimum:g} {unit})")
    if integer and si != int(si):
        raise UnitError(f"{text} must be a whole number")
    alternatives = data.get("alternatives") or ()
    for alt in alternatives if isinstance(alternatives, (list, tuple)) else ():
        if isinstance(alt, dict) and isinstance(alt.get("value"), str):
            try:
                to_si(parse(alt["value"]), unit)
            except UnitError as exc:
                raise UnitError(f"alternative {alt['value']!r}: {exc}") from None
    return {"si": si, "unit": unit, "stated": text, **data}


def figure(unit: str, *, minimum: float | None = 0.0, integer: bool = False) -> Any:
    """Annotated :class:`Figure` type whose value must have the dimension of ``unit``.

    Parameters
    ----------
    unit : str
        Canonical unit, e.g. ``"byte/second"``; values are converted to it.
    minimum : float or None
        Smallest allowed value in ``unit`` (default 0: no negative figures).
    integer : bool
        Require a whole number (counts such as a domain size).
    """

    def validate(raw: Any) -> Any:
        return _parse_figure(raw, unit=unit, minimum=minimum, integer=integer)

    return Annotated[Figure, BeforeValidator(validate)]


Bytes = figure("byte")
Bandwidth = figure("byte/second")
FlopRate = figure("flop/second")
Power = figure("watt")
Frequency = figure("hertz")
Price = figure("USD/hour")
Count = figure("dimensionless", minimum=1.0, integer=True)
