"""An offline job's duration by the fluid model, and the replicas that finish it in time.

A job of ``N`` requests on ``R`` replicas that each sustain ``lambda`` requests/s takes
``N / (R lambda)`` at steady state; a job small against a replica's batch is bound instead by
one request's decode at the batch a replica holds (``min(N / R, b)``): 10 requests of 500
tokens take at least 500 decode steps, whatever the rate at a full batch.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np


def offline_job_s(requests: float, replicas: int, rate: float, curve: dict, batch: float, osl: float) -> float:
    """An offline job's fluid duration [s]: its requests at the replicas' steady rate, and never
    less than one request's decode at the batch a replica holds (the job's share of it when the
    job is smaller than one batch: 10 requests of 500 tokens take at least 500 steps)."""
    held = min(requests / replicas, batch)
    if "batch_size" not in curve or not len(curve["batch_size"]):
        return requests / (replicas * rate)
    per_user = float(np.interp(held, curve["batch_size"], curve["output_tokens_per_s_per_user"]))
    return max(requests / (replicas * rate), osl / per_user if per_user > 0 else math.inf)


def offline_replicas(traffic: Any, replicas: int, rate: float, batches: np.ndarray, tpot_s: np.ndarray,
                     batch: float, osl: float) -> tuple[int, str]:
    """The fewest replicas from ``replicas`` up whose :func:`offline_job_s` is within the
    deadline (a job smaller than the replicas' batches is bound by one request's decode, which
    fewer requests a replica shortens), and ``""``; or why none is (one request a replica is too slow)."""
    requests, deadline_s = traffic.requests, traffic.deadline_h * 3600.0
    curve = {"batch_size": batches, "output_tokens_per_s_per_user": 1.0 / tpot_s}

    def fits(n: int) -> bool:
        return offline_job_s(requests, n, rate, curve, batch, osl) <= deadline_s

    low, high = replicas, max(replicas, math.ceil(requests))
    if fits(low):
        return low, ""
    if not fits(high):
        return replicas, (f"one request alone decodes {osl:.0f} tokens in {osl * float(tpot_s[0]):.3g} s, past the "
                          f"deadline ({deadline_s:.3g} s)")
    while high - low > 1:  # fits(low) is False, fits(high) is True
        mid = (low + high) // 2
        low, high = (low, mid) if fits(mid) else (mid, high)
    return high, ""
