"""Shared by the economics modules: quantities to canonical floats with checks that say
which argument is wrong, what is allowed and how to fix it; numbers for text tables."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import SpecError
from ..results.render import text_table
from ..units import Q, to_si_array

#: Slack when a ratio that should be a whole number lands a rounding error above it
#: (0.3 / 0.1 = 3.0000000000000004 must need 3 replicas, not 4).
CEIL_SLACK = 1e-9


def as_si(value: Any, unit: str, name: str) -> np.ndarray:
    """``value`` (number, array, quantity or text such as ``"2 GB/s"``) as finite float64 in ``unit``.

    Raises
    ------
    UnitError
        If the quantity has another dimension than ``unit``.
    SpecError
        If it is empty, NaN or infinite.
    """
    if isinstance(value, (bool, np.bool_)) or isinstance(value, np.ndarray) and value.dtype == bool \
            or isinstance(value, (list, tuple)) and any(isinstance(v, (bool, np.bool_)) for v in value):
        raise SpecError(f"{name} must be a number in {unit}, got {value!r:.60}")  # True is no 1.0
    arr = to_si_array(Q(value) if isinstance(value, str) else value, unit, name)
    if arr.size == 0:
        raise SpecError(f"{name} is empty; give at least one value in {unit}")
    if not np.all(np.isfinite(arr)):
        raise SpecError(f"{name} must be finite numbers in {unit}, got {value!r}")
    return arr


def non_negative(value: Any, unit: str, name: str, hint: str) -> np.ndarray:
    """``as_si`` that also refuses negative values; ``hint`` says what the argument is."""
    arr = as_si(value, unit, name)
    if np.any(arr < 0):
        raise SpecError(f"{name} must be >= 0 {unit} ({hint}), got {_shown(arr)}")
    return arr


def positive(value: Any, unit: str, name: str, hint: str) -> np.ndarray:
    """``as_si`` that also refuses zero and negative values."""
    arr = as_si(value, unit, name)
    if np.any(arr <= 0):
        raise SpecError(f"{name} must be > 0 {unit} ({hint}), got {_shown(arr)}")
    return arr


def share(value: Any, name: str, hint: str, *, allow_zero: bool = False) -> np.ndarray:
    """A share of time or capacity: in (0, 1], or [0, 1] with ``allow_zero``."""
    arr = as_si(value, "dimensionless", name)
    low_ok = arr >= 0 if allow_zero else arr > 0
    if not np.all(low_ok & (arr <= 1)):
        interval = "[0, 1]" if allow_zero else "(0, 1]"
        raise SpecError(f"{name} must be in {interval} ({hint}), got {_shown(arr)}; "
                        "give a fraction, e.g. 0.6 for 60%")
    return arr


def whole(arr: np.ndarray) -> np.ndarray:
    """Smallest whole number >= ``arr`` (>= 0), tolerant of rounding just above an integer."""
    return np.maximum(np.ceil(arr - CEIL_SLACK), 0.0)


def scalar_or_array(arr: np.ndarray) -> np.ndarray | float:
    """A 0-d result as a float, anything else as the array."""
    arr = np.asarray(arr, dtype=float)
    return float(arr) if arr.ndim == 0 else arr


def jsonable(value: Any) -> Any:
    """Arrays to floats or nested lists, for ``to_dict``; NaN and infinities (never, none) to None,
    which JSON can hold."""
    if isinstance(value, np.ndarray):
        return jsonable(value.item()) if value.ndim == 0 else [jsonable(v) for v in value.tolist()]
    if isinstance(value, list):
        return [jsonable(v) for v in value]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not np.isfinite(value):
        return None
    return value


def fmt(value: float, digits: int = 4) -> str:
    """A number for a text table: ``inf`` and ``nan`` spelled out, otherwise ``digits`` significant
    (a whole number with thousands separators from ``10 ** digits`` up: ``720,800``, not ``7.208e+05``)."""
    if np.isnan(value):
        return "-"
    if np.isinf(value):
        return "never" if value > 0 else "-inf"
    return f"{value:.{digits}g}" if abs(value) < 10**digits else f"{value:,.0f}"


def _shown(arr: np.ndarray) -> str:
    """The offending values, short."""
    bad = arr.ravel()
    return repr(float(bad[0])) if bad.size == 1 else f"an array with min {float(bad.min())!r}"


def table(title: str, columns: dict[str, Any], *, max_rows: int = 200) -> str:
    """``title`` over a text table with one row per broadcast point of ``columns``.

    Values are numbers (formatted by :func:`fmt`) or strings; arrays broadcast together.
    """
    names = list(columns)
    arrays = np.broadcast_arrays(*(np.asarray(columns[n]) for n in names))
    flat = [a.ravel() for a in arrays]
    n = flat[0].size if flat else 0
    rows = [[v if isinstance(v, str) else fmt(float(v)) for v in (col[i] for col in flat)]
            for i in range(min(n, max_rows))]
    text = text_table(names, rows, right=set(range(len(names))))
    more = f"\n... {n - max_rows} more rows" if n > max_rows else ""
    return f"{title}\n{text}{more}"


def shapes_agree(func: Any) -> Any:
    """Decorator: arrays that do not broadcast together are a :class:`SpecError` naming the
    function and each array argument's shape (numpy's own error names neither)."""
    import functools
    import inspect

    signature = inspect.signature(func)

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except ValueError as exc:
            if "broadcast" not in str(exc):
                raise
            bound = signature.bind_partial(*args, **kwargs).arguments
            shapes = ", ".join(f"{name} {np.shape(value)}" for name, value in bound.items()
                               if not isinstance(value, str) and np.ndim(value) > 0)
            raise SpecError(f"{func.__name__}: the arrays given do not go together ({shapes}); give arrays of one "
                            "length (or broadcastable shapes), or single values") from None
    return wrapper
