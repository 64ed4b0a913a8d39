"""Input checks at the boundary of every public entry point.

Every function here takes the user's value and the name it was given under, and returns
the value in the form the physics wants (a Python int, a finite float, a float64 array)
or raises :class:`~inferlab.errors.SpecError` saying what was wrong, where, and what is
allowed. They run before any physics, so that a bad input is one clear line, never a
numpy warning, a foreign exception or a silent wrong number.
"""

from __future__ import annotations

import math
import numbers
from typing import Any

import numpy as np

from .errors import SpecError

#: Largest count of anything (requests, tokens, GPUs, layers) an input may ask for; far past
#: any real deployment, small enough that float64 arithmetic on it stays exact and finite.
MAX_COUNT = 10**12
#: Most memory one call's grid may take [B]: a few GB, so that a grid too big for the machine
#: is refused in one line before it is evaluated, not killed by the OS part-way (a
#: 10^4 x 10^4 sweep was, on a 24 GiB machine).
MAX_GRID_BYTES = 4 * 2**30
#: Peak memory of one point of a grid evaluated at once (``estimate``, ``estimate_disaggregated``)
#: [B]: tracemalloc's peak over a 316 x 316 batch x ISL grid divided by its 99,856 points was
#: 3,050 for DeepSeek-V3 on 8x B200, 1,060-1,260 for Llama-3.1-8B and Qwen3-30B-A3B on an
#: H100, 1,060 for a disaggregated Llama-3.1-70B. ``inferlab.sweep`` evaluates in chunks and
#: takes less (:data:`inferlab.phases.sweep.BYTES_PER_POINT`).
GRID_BYTES_PER_POINT = 3_000
#: Most values one array input (a sweep axis, a trace) may have: 80 MB of float64, and more
#: than any grid within :data:`MAX_GRID_BYTES` holds.
MAX_GRID_POINTS = 10**7
#: Smallest price above zero [USD] (per GPU-hour or per million tokens): a nano-dollar.
MIN_PRICE = 1e-9
#: Largest price [USD] (per GPU-hour or per million tokens): a billion dollars, far above any real
#: one, far below where costs multiplied by hours and tokens overflow float64.
MAX_PRICE = 1e9


def _is_real(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def real(name: str, value: Any, *, minimum: float = -math.inf, maximum: float = math.inf,
         include_minimum: bool = True, include_maximum: bool = True, unit: str = "") -> float:
    """A finite real number in a range (open or closed at each end), in ``unit`` when it has
    one. A pint quantity is converted to ``unit`` (``Q(1, "h")`` for a time in ``s`` is 3600)
    and refused in another dimension; without a unit only a dimensionless one is a number."""
    value = in_unit(name, value, unit)
    if not _is_real(value):
        raise SpecError(f"{name} must be a number{' [' + unit + ']' if unit else ''}, got {value!r}")
    x = float(value)
    low_ok = x >= minimum if include_minimum else x > minimum
    high_ok = x <= maximum if include_maximum else x < maximum
    if not math.isfinite(x) or not (low_ok and high_ok):
        lo = "[" if include_minimum else "("
        hi = "]" if include_maximum else ")"
        raise SpecError(f"{name} must be a finite number in {lo}{minimum:g}, {maximum:g}{hi}"
                        f"{' [' + unit + ']' if unit else ''}, got {value!r}")
    return x


def in_unit(name: str, value: Any, unit: str = "") -> Any:
    """A scalar pint quantity as its magnitude in ``unit`` (dimensionless without one), a
    :class:`~inferlab.errors.UnitError` in another dimension; any other value as it is, for
    the caller's own check."""
    if _is_real(value) or not (hasattr(value, "dimensionality") and hasattr(value, "magnitude")):
        return value
    from .units import is_quantity, to_si_array

    if not is_quantity(value):
        return value
    arr = to_si_array(value, unit or "dimensionless", name)
    return float(arr) if arr.ndim == 0 else value  # an array is refused by the caller as not a number


def fraction(name: str, value: Any, *, allow_zero: bool = False) -> float:
    """A share in ``(0, 1]`` (``[0, 1]`` with ``allow_zero``)."""
    return real(name, value, minimum=0.0, maximum=1.0, include_minimum=allow_zero)


def price(name: str, value: Any, unit: str = "USD/hour") -> float:
    """A price in ``unit``: finite and >= 0 (a negative price would rank a plan as earning
    money), and 0 or at least :data:`MIN_PRICE`. A pint quantity, or a text with its unit
    (``"$2.50/h"``), is converted to ``unit`` (``Q(0.05, "USD/minute")`` is 3 USD/hour) and
    refused in another dimension; a bare number is taken in ``unit``."""
    from .units import is_quantity

    if isinstance(value, str) and any(c.isalpha() or c == "$" for c in value):  # "3 USD/hour", "$2.50/h"
        from .errors import UnitError
        from .units import Q

        try:
            value = Q(value)
        except UnitError as exc:
            raise UnitError(f"{name}: {exc}") from None
    if is_quantity(value):
        from .units import to_si_array

        arr = to_si_array(value, unit, name)
        if arr.ndim:
            raise SpecError(f"{name} must be one price [{unit}], got {value!r:.80}")
        value = float(arr)
    x = real(name, value, minimum=0.0, maximum=MAX_PRICE, unit=unit)
    return nonzero_price(name, x)


def nonzero_price(name: str, x: float) -> float:
    """``x``, unless it is above 0 but below :data:`MIN_PRICE` (far below any currency's
    resolution, and tokens per dollar divided by it overflow float64) or above :data:`MAX_PRICE`."""
    if 0.0 < x < MIN_PRICE:
        raise SpecError(f"{name} must be 0 (free) or at least {MIN_PRICE:g} USD, got {x!r}")
    if x > MAX_PRICE:
        raise SpecError(f"{name} must be at most {MAX_PRICE:g} USD, got {x!r}")
    return x


def count_array(name: str, value: Any, *, minimum: float = 1, maximum: float = MAX_COUNT,
                unit: str = "") -> np.ndarray:
    """A count or an array of counts (a sweep axis), as float64; each value whole and in range.
    A pint quantity is converted to ``unit`` (``token``: 2 ktok is 2,000) and refused in any
    other dimension; a dimensionless one is a plain count."""
    value = _count_magnitude(name, value, unit)
    if type(value) is int or type(value) is float:  # the common scalar, without numpy's per-call cost
        x = float(value) if abs(value) < 1e308 else math.inf
        if not (math.isfinite(x) and minimum <= x <= maximum and x == round(x)):
            raise _not_whole(name, minimum, maximum, value)
        return np.asarray(x)
    if isinstance(value, (str, bytes)) or value is None or isinstance(value, (bool, np.bool_)) \
            or isinstance(value, np.ndarray) and value.dtype == bool \
            or isinstance(value, (list, tuple)) and any(isinstance(v, (bool, np.bool_)) for v in value):
        raise SpecError(f"{name} must be a number or an array of numbers, got {value!r}")
    try:
        arr = np.asarray(value, dtype=float)
    except (TypeError, ValueError, OverflowError):
        raise SpecError(f"{name} must be a number or an array of numbers, got {value!r:.80}") from None
    if arr.size == 0:
        raise SpecError(f"{name} is empty: give at least one value")
    if arr.size > MAX_GRID_POINTS:
        raise SpecError(f"{name} has {arr.size:,} values; at most {MAX_GRID_POINTS:,} per call, as a grid of more "
                        f"points takes more than the {MAX_GRID_BYTES / 2**30:g} GiB a call may use: give fewer values")
    with np.errstate(invalid="ignore"):
        bad = ~np.isfinite(arr) | (arr < minimum) | (arr > maximum) | (arr != np.round(arr))
    if np.any(bad):
        raise _not_whole(name, minimum, maximum, arr[bad].ravel()[0])
    return arr


def _count_magnitude(name: str, value: Any, unit: str = "") -> Any:
    """A pint quantity as a count: a dimensionless one's magnitude as it is (``Q(4)`` is the int
    4), one in ``unit``'s dimension converted to ``unit`` (``token``: 2 ktok is 2,000.0); in
    another dimension a :class:`~inferlab.errors.UnitError` (4 GB is no batch size). Any other
    value as it is, for the caller's own check."""
    from .units import is_quantity

    if not is_quantity(value):
        return value
    if value.dimensionless:
        return value.to("").magnitude
    if not unit:
        from .errors import UnitError

        raise UnitError(f"{name} is a count: give a plain number (or a dimensionless quantity), got {value:~P}")
    from .units import to_si_array

    return to_si_array(value, unit, name)


def _not_whole(name: str, minimum: float, maximum: float, got: Any) -> SpecError:
    got = got.item() if isinstance(got, np.generic) else got  # 0, not np.float64(0.0)
    whole = lambda v: int(v) if isinstance(v, float) and v.is_integer() else v  # noqa: E731 (0, not 0.0)
    got = [whole(v) for v in got.ravel().tolist()] if isinstance(got, np.ndarray) else whole(got)
    return SpecError(f"{name} must hold whole numbers between {minimum:g} and {maximum:,.0f}, got {got!r:.80}")


#: What to do with a grid too big for memory (:func:`grid`'s default advice).
GRID_FIX = "give fewer values, or use inferlab.sweep for a batch x ISL x OSL grid (it evaluates in chunks)"


def grid(fix: str = GRID_FIX, **axes: np.ndarray) -> tuple[np.ndarray, ...]:
    """Broadcast sweep axes together, or say which shapes do not fit (and, for a grid too big
    for memory, ``fix``: what to do instead)."""
    try:
        shape = np.broadcast_shapes(*(np.shape(a) for a in axes.values()))
    except ValueError:
        shapes = ", ".join(f"{k} {np.shape(v)}" for k, v in axes.items())
        raise SpecError(f"these inputs do not broadcast into one grid: {shapes}; give scalars, equal shapes, or "
                        "shapes that broadcast (e.g. a column and a row)") from None
    within_memory("the grid", math.prod(shape), GRID_BYTES_PER_POINT, fix)
    arrays = [np.asarray(a, float) for a in axes.values()]
    return tuple(a if a.shape == shape else np.broadcast_to(a, shape) for a in arrays)


def within_memory(what: str, points: int, bytes_per_point: int, fix: str) -> None:
    """Refuse a grid of ``points`` points at ``bytes_per_point`` [B] each whose memory is beyond
    :data:`MAX_GRID_BYTES`, saying how much it would take and ``fix``, what to do instead."""
    limit = MAX_GRID_BYTES // bytes_per_point
    if points > limit:
        raise SpecError(f"{what} has {points:,} points, which would take about {points * bytes_per_point / 2**30:,.1f} GiB "
                        f"of memory ({bytes_per_point:,} B a point); at most {limit:,} points "
                        f"({MAX_GRID_BYTES / 2**30:g} GiB) per call: {fix}")


def repeated(values: Any) -> Any:
    """The first value ``values`` holds a second time, None where each is there once (a grid's
    or a search's points: a repeat is a typo or a repeated row).

    >>> repeated([1, 8, 1]), repeated(["bf16", "fp8"])
    (1, None)
    """
    seen: list = []
    for value in values:
        if value in seen:
            return value
        seen.append(value)
    return None


def boolean(name: str, value: Any) -> bool:
    """``True`` or ``False`` (numpy booleans too); numbers, strings and None are refused
    (``"false"`` would read as true, ``1`` as a count)."""
    if not isinstance(value, (bool, np.bool_)):
        raise SpecError(f"{name} must be true or false, got {value!r:.80}")
    return bool(value)


def longest_tokens(lengths: Any) -> float:
    """The longest token count a length input can hold [token]: a number, an array, or a
    distribution with ``kind`` (fixed ``value``, uniform ``high``, empirical ``values``,
    lognormal ``mean``: its draws have no upper bound, so the mean stands for it). A value that
    is none of these counts as 0: the entry point's own checks say what is wrong with it."""
    kind = getattr(lengths, "kind", None)
    try:
        if kind is not None:
            return float({"fixed": getattr(lengths, "value", 0), "uniform": getattr(lengths, "high", 0),
                          "empirical": max(getattr(lengths, "values", ()) or (0,)),
                          "lognormal": getattr(lengths, "mean", 0.0)}.get(kind, 0))
        arr = np.asarray(lengths, float)
    except (TypeError, ValueError, OverflowError):
        return 0.0
    finite = arr[np.isfinite(arr)]
    return float(np.max(finite)) if finite.size else 0.0


def _longest_pair(isl: Any, osl: Any) -> float:
    """The longest prompt plus output [token]: of each request where both are per-request
    arrays (the longest prompt and the longest output are seldom one request's), else the
    longest of each added."""
    if getattr(isl, "kind", None) is None and getattr(osl, "kind", None) is None:
        try:
            both = np.asarray(isl, float) + np.asarray(osl, float)
        except (TypeError, ValueError, OverflowError):
            both = None
        if both is not None:
            finite = both[np.isfinite(both)]
            if finite.size:
                return float(np.max(finite))
    return longest_tokens(isl) + longest_tokens(osl)


def context_within_model(model: Any, isl: Any, osl: Any, *, allow_long_context: bool = False,
                         turns: int = 1) -> bool:
    """Refuse a prompt plus output longer than the model's ``max_position_embeddings``.

    A model attends past its trained length only with RoPE scaling (YaRN, dynamic NTK), which
    a deployment must configure and which changes quality; the cost model itself is the same.
    With ``allow_long_context`` the context is accepted; the return value says whether it
    exceeds the trained length, for ``explain()`` to say so. A conversation of ``turns``
    turns ends with a prompt holding every turn before it: ``turns x (isl + osl)`` tokens.

    Returns
    -------
    bool
        True when ``isl + osl`` exceeds ``max_position_embeddings`` (and was allowed).
    """
    from .errors import option

    boolean("allow_long_context", allow_long_context)
    limit = int(getattr(model, "max_position_embeddings", 0) or 0)
    longest = _longest_pair(isl, osl) * turns
    if limit <= 0 or longest <= limit:
        return False
    if not allow_long_context:
        name = getattr(model, "id", None) or getattr(model, "name", "the model")
        what = "isl + osl" if turns == 1 else f"the last turn of a {turns}-turn conversation, {turns} x (isl + osl)"
        raise SpecError(f"{what} = {longest:,.0f} tokens exceeds the {limit:,} positions {name} was trained for "
                        f"(max_position_embeddings); shorten the prompt or output, or pass "
                        f"{option('allow_long_context', True)} if the deployment uses RoPE scaling (YaRN, dynamic NTK)")
    return True


def engine_context_within_model(model: Any, max_model_len: int | None, *, allow_long_context: bool = False) -> None:
    """Refuse an engine ``max_model_len`` beyond the model's ``max_position_embeddings``, as
    vLLM and SGLang do unless told (``VLLM_ALLOW_LONG_MAX_MODEL_LEN=1``,
    ``SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1``); ``allow_long_context`` accepts it."""
    from .errors import option

    limit = int(getattr(model, "max_position_embeddings", 0) or 0)
    if max_model_len is None or limit <= 0 or max_model_len <= limit or boolean("allow_long_context",
                                                                                allow_long_context):
        return
    name = getattr(model, "id", None) or getattr(model, "name", "the model")
    raise SpecError(f"max_model_len={max_model_len:,} exceeds the {limit:,} positions {name} was trained for "
                    "(max_position_embeddings): the engines refuse it unless told; lower it, or pass "
                    f"{option('allow_long_context', True)} if the deployment uses RoPE scaling (YaRN, dynamic NTK)")


def integer(name: str, value: Any, *, minimum: int = 1, maximum: int = MAX_COUNT, what: str = "",
            whole_floats: bool = False, unit: str = "") -> int:
    """An integer ``minimum <= value <= maximum`` (numpy integers too), as a Python ``int``.

    A float is refused even when whole (a count typed as ``10.0`` usually comes from
    arithmetic gone wrong), unless ``whole_floats``: then ``2.0`` is 2, as a JSON or YAML
    number written with a decimal point. ``what`` names what is counted, for the message. A
    dimensionless pint quantity is its magnitude (``Q(4)`` is 4), one in ``unit`` (``request``:
    ``Q(100, "request")`` is 100) converted, as :func:`count_array` takes them; one with another
    unit is refused.
    """
    from .units import is_quantity

    quantity = is_quantity(value)
    value = _count_magnitude(name, value, unit)
    if quantity and unit:  # converted to a float (an array of one): whole is all it must be
        value = float(np.asarray(value).reshape(-1)[0]) if np.size(value) == 1 else value
        whole_floats = True
    whole_float = (whole_floats and isinstance(value, (float, np.floating)) and math.isfinite(value)
                   and value == int(value))
    if not whole_float and (isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral)):
        why = f" (it counts {what})" if what else ""
        raise SpecError(f"{name} must be an integer{why}, got {value!r:.80}")
    if not minimum <= value <= maximum:
        raise SpecError(f"{name} must be between {minimum:,} and {maximum:,}, got {value!r}")
    return int(value)


def real_array(name: str, value: Any, *, minimum: float = -math.inf, maximum: float = math.inf,
               max_size: int = MAX_GRID_POINTS, unit: str = "") -> np.ndarray:
    """A one-dimensional sequence of finite reals in ``[minimum, maximum]``, as float64."""
    if not isinstance(value, (list, tuple, np.ndarray)) or isinstance(value, np.ndarray) and value.ndim != 1:
        raise SpecError(f"{name} must be a flat list of numbers, got {value!r:.80}")
    if len(value) > max_size:
        raise SpecError(f"{name} has {len(value):,} values; at most {max_size:,}")
    if any(isinstance(v, (bool, np.bool_)) or not isinstance(v, (numbers.Real, np.floating, np.integer))
           for v in value):
        raise SpecError(f"{name} must hold numbers only, got {value!r:.80}")
    arr = np.asarray(value, dtype=float)
    with np.errstate(invalid="ignore"):
        bad = ~np.isfinite(arr) | (arr < minimum) | (arr > maximum)
    if arr.size == 0 or np.any(bad):
        got = "no values" if arr.size == 0 else repr(float(arr[bad][0]))
        raise SpecError(f"{name} must hold finite numbers in [{minimum:g}, {maximum:g}]"
                        f"{' [' + unit + ']' if unit else ''}, got {got}")
    return arr


def is_default(value: Any, default: Any) -> bool:
    """Whether an argument was left at ``default``: the same object, or an equal plain value
    of the same kind (``True`` is not ``1``; an array never counts as a default)."""
    if value is default:
        return True
    if isinstance(value, bool) or isinstance(default, bool):
        return type(value) is type(default) and value == default
    plain = (int, float, str)
    return isinstance(value, plain) and isinstance(default, plain) and value == default


def from_fields(cls: Any, value: Any, what: str, required: tuple[str, ...] = ()) -> Any:
    """``cls(**value)`` for a mapping of a dataclass's fields, or one :class:`SpecError` naming
    ``what``: an unknown field (with the closest known one), a missing ``required`` one, or a
    field ``cls`` refuses."""
    from .errors import did_you_mean

    allowed = tuple(cls.__dataclass_fields__)
    unknown = sorted(str(k) for k in value if k not in allowed)
    if unknown:
        raise SpecError(f"{what}: unknown field {unknown[0]!r}{did_you_mean(unknown[0], allowed)}; "
                        f"allowed: {', '.join(allowed)}")
    missing = [k for k in required if k not in value]
    if missing:
        raise SpecError(f"{what}: a mapping needs {' and '.join(repr(k) for k in required)}; {missing[0]!r} is missing")
    try:
        return cls(**value)
    except TypeError as exc:
        raise SpecError(f"{what}: {exc}") from None


def percentile(value: Any) -> float:
    """A percentile as a float in (1, 100], or :class:`SpecError` (0.99 is refused: a fraction
    written for P99 would check the 0.99th percentile, near the fastest request)."""
    from .errors import option_name

    checked = real(option_name("percentile"), value, minimum=0.0, maximum=100.0, include_minimum=False)
    if checked <= 1.0:
        raise SpecError(f"{option_name('percentile')} {checked:g} is the {checked:g}th percentile; a percentile is "
                        "out of 100 (99 for P99)")
    return checked
