"""A fluid model of one replica under continuous batching, for fast search.

At a steady concurrency of ``b`` requests, a replica spends a share ``x`` of its time on
prefill (each request's prompt, ``t_pf``) and the rest on decode steps ``d(b)`` shared by
the ``b`` requests. With ``a = osl x d(b) / t_pf``, the request rate ``lambda = x / t_pf``
satisfies ``x = b / (1 + a / (1 - x))``, i.e. ``x^2 - (1 + a + b) x + b = 0``; under load
a token takes ``d(b) / (1 - x)``. TTFT is the prefill stretched over the iterations it
shares with decodes (``ceil(isl / chunk)`` of them) plus the wait for a slot, taken from an
M/M/1 queue at the planned utilization: ``P(W > t) = u e^{-(1-u) mu t}``.

This is the search's estimate; the planner re-checks its best candidates with the
request-level simulation (:func:`inferlab.serve`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import lambertw


@dataclass(frozen=True)
class OperatingPoints:
    """Per concurrency ``b`` (arrays): sustainable request rate and latencies under load [s]."""

    batch: np.ndarray
    rate: np.ndarray
    tpot_s: np.ndarray
    ttft_s: np.ndarray
    prefill_share: np.ndarray


def operating_points(batch: np.ndarray, decode_step_s: np.ndarray, prefill_s: float, isl: float, osl: float,
                     chunk_tokens: float) -> OperatingPoints:
    """Fluid steady state of a replica at each concurrency in ``batch``.

    Parameters
    ----------
    batch : array [request]
    decode_step_s : array [s]
        Mean decode step at each concurrency (no prefill mixed in).
    prefill_s : float [s]
        Prefill of one prompt.
    isl, osl : float [token]
    chunk_tokens : float [token]
        Prefill tokens an iteration may carry (the engine's token budget).
    """
    b = np.asarray(batch, float)
    d = np.asarray(decode_step_s, float)
    a = max(osl - 1.0, 0.0) * d / max(prefill_s, 1e-12)
    s = 1.0 + a + b
    x = (s - np.sqrt(np.maximum(s * s - 4.0 * b, 0.0))) / 2.0
    x = np.clip(x, 0.0, 0.999)
    rate = x / max(prefill_s, 1e-12)
    tpot = d / (1.0 - x)
    iterations = np.ceil(isl / np.maximum(chunk_tokens - b, 1.0))
    ttft = prefill_s + iterations * d
    return OperatingPoints(b, rate, tpot, ttft, x)


def queue_wait_s(rate: np.ndarray, utilization: np.ndarray | float, percentile: float) -> np.ndarray:
    """Wait for admission at ``percentile`` when a replica of capacity ``rate`` runs at ``utilization``.

    Notes
    -----
    M/M/1 waiting time: ``P(W > t) = u exp(-(1 - u) mu t)``, so
    ``t_p = ln(u / (1 - p)) / ((1 - u) mu)`` (zero when ``u <= 1 - p``; infinite at ``u = 0``
    is never asked: no load, no wait).
    """
    p = percentile / 100.0
    u = np.asarray(utilization, float)
    mu = np.asarray(rate, float)
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.log(np.maximum(u, 1e-300) / (1.0 - p)) / ((1.0 - u) * mu)
    return np.where(u > 1.0 - p, np.maximum(t, 0.0), 0.0)


def max_utilization(rate: np.ndarray, slack_s: np.ndarray, percentile: float, cap: float) -> np.ndarray:
    """Highest utilization (at most ``cap``) whose ``percentile`` queue wait fits in ``slack_s``;
    0 where the prefill alone already uses up the budget.

    Notes
    -----
    With ``q = 1 - p`` and ``c = slack x mu``, the wait of :func:`queue_wait_s` equals the
    slack where ``ln(u / q) = c (1 - u)``, i.e. ``c u exp(c u) = c q exp(c)``: ``u = W(c q e^c) / c``
    with ``W`` the principal branch of Lambert's function (one root: the wait is 0 up to
    ``u = q`` and grows after it, while the right side falls).
    """
    rate = np.asarray(rate, float)
    slack = np.asarray(slack_s, float)
    q = 1.0 - percentile / 100.0
    c = np.maximum(slack * rate, 1e-12)
    # W(x) for x = c q e^c; past c ~ 700 e^c overflows, and u is within 1e-300 of 1 anyway
    with np.errstate(over="ignore"):
        x = c * q * np.exp(np.minimum(c, 700.0))
    u = np.real(lambertw(x)) / c
    u = np.where(c > 700.0, 1.0, u)
    return np.where(slack > 0, np.minimum(u, cap), 0.0)
