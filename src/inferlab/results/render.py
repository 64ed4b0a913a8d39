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


def share_text(x: float) -> str:
    """A share as a percentage, ``-`` when undefined (no request sent)."""
    return "-" if math.isnan(x) else f"{x:.1%}"
