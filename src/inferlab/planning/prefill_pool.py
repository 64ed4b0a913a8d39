"""The prefill pool of a disaggregated configuration: its TTFT percentile and the utilization
that keeps it within the objective.

A prefill replica runs prompts one token budget after another: a single server whose
admission wait is M/M/1's scaled by Kingman's variability (:func:`queue_wait_s`), mixed
with each prompt length's own time as :func:`~.ttft_mix.ttft_percentile_s` mixes them
(:func:`prefill_pool_ttft_s`). The search bisects on the utilization
(:func:`max_prefill_utilization`); what does not depend on it is computed once for all the
bisection's evaluations (:func:`_pool_ttft`), the same arithmetic as a call of each function.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from .ttft_mix import TAIL_EDGES, mixture_quantile, own_time_s


def queue_wait_s(rate: np.ndarray, utilization: np.ndarray | float, percentile: float,
                 variability: float = 1.0) -> np.ndarray:
    """Wait at ``percentile`` for a single server of capacity ``rate`` at ``utilization`` [s]
    (a prefill-only replica, which runs prompts one token budget after another).

    Notes
    -----
    M/M/1 waiting time: ``P(W > t) = u exp(-(1 - u) mu t)``, so
    ``t_p = ln(u / (1 - p)) / ((1 - u) mu)`` (zero when ``u <= 1 - p``; infinite at ``u = 0``
    is never asked: no load, no wait). Other arrivals and service times scale it by
    ``variability = (c_a^2 + c_s^2) / 2``, their squared coefficients of variation (Kingman's
    G/G/1 mean, the tail kept exponential): 1 for M/M/1; a router that deals Poisson arrivals
    round robin over ``n`` replicas gives each Erlang-``n`` gaps (``c_a^2 = 1 / n``), and
    prompts of one length a constant prefill (``c_s^2 = 0``) (:func:`prefill_variability`).
    """
    p = percentile / 100.0
    u = np.asarray(utilization, float)
    mu = np.asarray(rate, float)
    with np.errstate(divide="ignore", invalid="ignore"):
        t = variability * np.log(np.maximum(u, 1e-300) / (1.0 - p)) / ((1.0 - u) * mu)
    return np.where(u > 1.0 - p, np.maximum(t, 0.0), 0.0)


def prefill_variability(replicas: int, prefill_spread: float) -> float:
    """Kingman's ``(c_a^2 + c_s^2) / 2`` of one of ``replicas`` prefill replicas that a router
    deals Poisson arrivals round robin (``c_a^2 = 1 / replicas``), prompts whose prefill times
    have ``E[P^2] / E[P]^2 = prefill_spread`` (``c_s^2 = prefill_spread - 1``)."""
    return (1.0 / max(replicas, 1) + max(prefill_spread - 1.0, 0.0)) / 2.0


def prefill_pool_ttft_s(alone_s: np.ndarray, isl: np.ndarray, rate: float, utilization: float, replicas: int,
                        prefill_spread: float, percentile: float) -> float:
    """The ``percentile`` TTFT of a disaggregated prefill pool [s]: each prompt length's time
    alone (``alone_s`` at the lengths ``isl``, the traffic's quantiles at :data:`~.ttft_mix.TAIL_EDGES`:
    its prefill, the exposed KV transfer, a decode step) mixed with the G/G/1 wait of one of
    ``replicas`` prefill replicas at ``utilization`` (:func:`queue_wait_s` at every level)."""
    return _pool_ttft(alone_s, isl, rate, replicas, prefill_spread, percentile)(utilization)


def _pool_ttft(alone_s: np.ndarray, isl: np.ndarray, rate: float, replicas: int, prefill_spread: float,
               percentile: float) -> Callable[[float], float]:
    """:func:`prefill_pool_ttft_s` as a function of the utilization: the prompts' own times (one
    point of :func:`~.ttft_mix.own_time_s`, no decodes to share iterations with) computed once,
    each call :func:`queue_wait_s` and :func:`~.ttft_mix.mixture_quantile` on them."""
    own = own_time_s(np.zeros(1), np.ones(1), alone_s, isl, np.inf)  # (1, lengths)
    variability, mu, levels = prefill_variability(replicas, prefill_spread), np.asarray(rate, float), 100.0 * TAIL_EDGES

    def ttft(utilization: float) -> float:
        waits = queue_wait_s(mu, utilization, levels, variability)
        return float(mixture_quantile((own[:, :, None] + waits[None, None, :]).reshape(1, -1), percentile)[0])

    return ttft


def max_prefill_utilization(alone_s: np.ndarray, isl: np.ndarray, rate: float, replicas: int,
                            prefill_spread: float, percentile: float, ttft_slo_s: float, cap: float) -> float:
    """Highest utilization (at most ``cap``) of a prefill replica whose :func:`prefill_pool_ttft_s`
    stays within ``ttft_slo_s``; 0 where the prompts alone already miss it (bisection: the
    percentile grows with the utilization)."""
    ttft = _pool_ttft(alone_s, isl, rate, replicas, prefill_spread, percentile)
    if ttft(0.0) > ttft_slo_s:
        return 0.0
    if ttft(cap) <= ttft_slo_s:
        return cap
    lo, hi = 0.0, cap
    for _ in range(40):
        mid = (lo + hi) / 2.0
        lo, hi = (mid, hi) if ttft(mid) <= ttft_slo_s else (lo, mid)
    return lo
