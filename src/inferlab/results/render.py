"""Quantities as readable text, JSON-ready values, and the plain-text table every result prints."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from ..units import readable
from .table import text_table  # noqa: F401 - importable from here as before

if TYPE_CHECKING:
    import pint


def pretty(q: pint.Quantity, digits: int = 4) -> str:
    """A quantity with a readable prefix: ``41.79 ms``, ``3.35 TB/s``, ``295.2 FLOP/B``."""
    if not q.dimensionality:
        mag = float(q.to("dimensionless").magnitude)
        return f"{mag:,.0f}" if abs(mag) >= 1e4 and mag == int(mag) else f"{mag:.{digits}g}"
    shown = readable(q)
    return f"{shown.magnitude:.{digits}g} {shown.units:~P}"


def json_ready(value: Any) -> Any:
    """``value`` with every float JSON cannot hold (NaN, infinity) replaced by None, through
    dicts, lists and tuples: a number that does not exist is ``null`` in JSON, never ``NaN``."""
    if isinstance(value, dict):
        return {k: json_ready(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_ready(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def whole(value: Any) -> Any:
    """Counts (requests, tokens, waves, sequences) as JSON integers: a float that is a whole
    number as an ``int``, through nested lists; anything else as given (None, a fraction).

    >>> whole([[1.0, 8.0], [2048.0, None]]), whole(1.5), whole(float("nan")) != whole(float("nan"))
    ([[1, 8], [2048, None]], 1.5, True)
    """
    if isinstance(value, list):
        return [whole(v) for v in value]
    return int(value) if isinstance(value, float) and value.is_integer() else value


def share_text(x: float) -> str:
    """A share as a percentage, ``-`` when undefined (no request sent)."""
    return "-" if math.isnan(x) else f"{x:.1%}"


def significant(x: float, digits: int = 3) -> str:
    """``x`` to ``digits`` significant digits in plain notation, its whole part always kept and
    trailing zeros dropped; ``-`` when not finite.

    A small rate keeps its digits instead of rounding to ``0``; a large one prints whole, as
    ``f"{x:.0f}"`` does.

    >>> significant(0.3412, 2), significant(11.5741), significant(1564.4, 2), significant(5.0)
    ('0.34', '11.6', '1564', '5')
    """
    if not math.isfinite(x):
        return "-"
    if x == 0:
        return "0"
    text = f"{x:.{max(0, digits - 1 - math.floor(math.log10(abs(x))))}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def duration_text(seconds: float) -> str:
    """A duration in the unit that reads best: seconds under a minute, minutes under an hour,
    else hours, to three significant digits.

    >>> duration_text(45), duration_text(300), duration_text(5400), duration_text(86400)
    ('45 s', '5 min', '1.5 h', '24 h')
    """
    if seconds < 60.0:
        return f"{significant(seconds)} s"
    if seconds < 3600.0:
        return f"{significant(seconds / 60.0)} min"
    return f"{significant(seconds / 3600.0)} h"
