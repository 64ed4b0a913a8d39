"""A case's measurement in its metric's unit: the unit a case file states, read through the
unit registry (ms for times; tokens/s of the system, per GPU or per user for rates)."""

from __future__ import annotations

from typing import Any

from ..errors import InferlabError

#: The metrics a case may measure.
METRICS = ("output_tokens_per_s", "output_tokens_per_s_per_gpu", "output_tokens_per_s_per_user", "ttft_ms",
           "itl_ms", "tpot_ms", "tpot_p50_ms")
#: The unit each rate metric is kept in (the public files' spelling).
RATE_UNIT = {"output_tokens_per_s": "tokens/s", "output_tokens_per_s_per_gpu": "tokens/s/gpu",
             "output_tokens_per_s_per_user": "tokens/s/user"}
#: What a rate metric's unit may say after ``tokens/s``: who the rate is of.
_RATE_OF = {"output_tokens_per_s": "", "output_tokens_per_s_per_gpu": "/gpu", "output_tokens_per_s_per_user": "/user"}


def measured_in(metric: str, unit: str, value: float) -> float:
    """``value`` given in ``unit`` as the metric's own unit (ms, or tokens/s of the system, per
    GPU or per user), through the unit registry.

    Raises
    ------
    ValueError
        A unit the registry does not know, or of another kind than the metric.
    """
    from ..units import Q

    text, target = unit.strip(), "ms" if metric.endswith("_ms") else "tokens/s"
    if metric in ("tpot_ms", "tpot_p50_ms", "itl_ms"):  # a time per output token may say so: ms/token
        for tail in ("/token", "/tok", "/tokens"):
            if text.lower().endswith(tail):
                text = text[:-len(tail)]
                break
    if target == "tokens/s":
        of = _RATE_OF[metric]
        for tail in ("/gpu", "/user"):
            if text.lower().endswith(tail):
                if tail != of:
                    raise ValueError(f"unit {unit!r} is a rate {tail[1:] == 'gpu' and 'per GPU' or 'per user'}, "
                                     f"but {metric} is {('per ' + of[1:]) if of else 'of the whole system'}")
                text = text[:-len(tail)]
    try:
        q = Q(1.0, text)
        factor = float(q.to(target).magnitude)
    except InferlabError as exc:
        raise ValueError(f"unit {unit!r} of {metric}: {exc}") from None
    except Exception:  # another dimension than the metric's (pint's DimensionalityError)
        raise ValueError(f"unit {unit!r} is not a unit of {metric} ({target}, or one convertible to it such "
                         f"as {'s' if target == 'ms' else 'tokens/min'})") from None
    return value * factor


def number_as_written(value: Any) -> Any:
    """A case's number as written: ``true`` (which would read as 1) and quoted text ("1500")
    are refused, for a field validator to say so."""
    if isinstance(value, (bool, str)):
        raise ValueError(f"expected a number, got {type(value).__name__} {value!r:.20}")
    return value
