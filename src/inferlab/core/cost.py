"""What serving costs: GPU-hours turned into dollars per token and per request."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from ..results.record import array_record


@array_record
@dataclass(frozen=True)
class Cost:
    """Dollar figures of a static batch; NaN when no price is known.

    Notes
    -----
    GPU time is split between the phases as an API prices tokens: prefill time is charged to
    the input tokens, decode time to the ``osl`` output tokens a request is billed for, so
    that ``isl x input + osl x output`` is the request's cost (the first output token comes
    with the prefill: charging the decode time to the ``osl - 1`` tokens the decode steps make
    had billed 10% more than the request cost at two output tokens). A one-token output runs no
    decode step: its ``usd_per_million_output`` is NaN, the input tokens carry the request. A
    GPU busy a share ``utilization`` of the time costs ``1 / utilization`` times more per token.
    """

    usd_per_gpu_hour: float
    utilization: float
    usd_per_million_input: np.ndarray
    usd_per_million_output: np.ndarray
    usd_per_request: np.ndarray


def cost_of(usd_per_gpu_hour: float | None, num_gpus: int, utilization: float, *, batch: np.ndarray,
            isl: np.ndarray, osl: np.ndarray, prefill_s: np.ndarray, total_s: np.ndarray) -> Cost:
    """Cost of ``batch`` requests that took ``total_s`` on ``num_gpus`` GPUs."""
    price = np.nan if usd_per_gpu_hour is None else float(usd_per_gpu_hour)
    usd_per_s = price / 3600.0 * num_gpus / utilization
    decode_s = total_s - prefill_s
    osl = np.asarray(osl, float)  # every billed output token; a one-token output has no decode to price: NaN
    per_output = usd_per_s * decode_s / (batch * np.where(osl > 1, osl, np.nan)) * 1e6
    return Cost(
        usd_per_gpu_hour=price,
        utilization=utilization,
        usd_per_million_input=usd_per_s * prefill_s / (batch * isl) * 1e6,
        usd_per_million_output=per_output,
        usd_per_request=usd_per_s * total_s / batch,
    )
