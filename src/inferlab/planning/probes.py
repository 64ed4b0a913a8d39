"""Probes of the simulated sizing (:mod:`.sizing`): one simulation of a candidate at a replica
count, read against the SLOs, and the search over counts and traffic growth.

Rules that keep a probe's percentile stable:

* requests per probe ``N = clip(ceil(20 / (1 - p)), 1000, 20000)`` for the SLO percentile
  ``p`` (2,000 at P99): at least 20 requests lie beyond the percentile, so it is not one
  request's latency;
* seed 0 at every count: the same prompt and output lengths and the same exponential gaps,
  scaled by the rate (common random numbers), so two counts differ by their load only.

An offline job (``traffic.offline``) over ``n`` replicas gives each ``ceil(requests / n)``
requests, of which at most ``max(2000, 4 x slots)`` are simulated (all queued at once) and
the duration scaled to the rest; the job meets its deadline or not.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import numpy as np

from ..inputs.prefixes import shared_by_hit_rate
from .candidate import Candidate, Probe
from .scenario import Scenario
from .search import price_per_gpu_hour, with_replicas

TAIL_REQUESTS = 20
MIN_REQUESTS = 1000
MAX_REQUESTS = 20000
#: Bisection steps on the traffic growth for the simulated headroom, and the largest growth tried.
HEADROOM_STEPS = 2
HEADROOM_MAX = 15.0


def probe_requests(percentile: float) -> int:
    """Requests one probe simulates for a stable ``percentile`` (see the module docstring)."""
    return int(min(max(math.ceil(TAIL_REQUESTS / (1.0 - percentile / 100.0)), MIN_REQUESTS), MAX_REQUESTS))


def techniques(sc: Scenario, cand: Candidate) -> tuple[dict[str, Any], tuple[str, ...]]:
    """The :func:`inferlab.serve` keywords of a candidate's techniques, and those it is simulated without.

    Every probe takes its speculation and prefix settings from here: the candidate's
    speculative decoding, and the scenario's ``traffic.prefix`` (or, given only a
    ``prefix_hit`` rate ``h``, one prefix of ``h x isl`` tokens that every prompt shares, so
    that the simulated cache finds about that share while it holds the prefix). The two-pool
    simulation of a disaggregated candidate has neither: it is simulated with plain decoding
    and full prefills, and says so (``simulated_without``).
    """
    tr, kwargs = sc.traffic, {}
    prefix = tr.prefix if tr.prefix is not None else shared_by_hit_rate(tr.prefix_hit, tr.isl.expected)
    if cand.speculative:
        kwargs["speculative"] = cand.speculative
    if prefix is not None:
        kwargs["prefix"] = prefix
    if not cand.disaggregated:
        return kwargs, ()
    names = {"speculative": "speculation", "prefix": "prefix cache"}
    return {}, tuple(names[k] for k in kwargs)


def finish(sc: Scenario, cand: Candidate, n: int, at_n: Probe, probes: Any, growth: float, miss: Probe | None,
           **changes: Any) -> Candidate:
    """The sized candidate: ``n`` replicas, the simulation's latencies, headroom and binding."""
    if sc.traffic.offline:
        binding = "deadline"
    else:
        binding = _binding(miss.missed) if miss is not None else f"none up to +{growth:.0%} traffic"
    return replace(with_replicas(sc, cand, n, **changes), sized_by="simulation", simulated_ttft_s=at_n.ttft_s,
                   simulated_tpot_s=at_n.tpot_s, headroom=growth, headroom_by="simulation", binding=binding,
                   probes=tuple(sorted(probes, key=lambda p: (p.growth, p.replicas))),
                   simulated_without=techniques(sc, cand)[1])


def _binding(missed: str) -> str:
    """What a probe missed, as the binding column says it: ``TPOT SLO``, ``TTFT+TPOT SLO``,
    ``deadline``, or ``throughput (queue grows)`` (no SLO: the replicas fall behind)."""
    parts = missed.split("+")
    slos = [m for m in parts if m in ("TTFT", "TPOT")]
    other = ["throughput (queue grows)" if m == "throughput" else m for m in parts if m not in ("TTFT", "TPOT")]
    return " and ".join(([f"{'+'.join(slos)} SLO"] if slos else []) + other)


def missed(cand: Candidate, seen: dict[int, Probe]) -> Candidate:
    top = max(seen)
    p = seen[top]
    if p.missed == "deadline":
        measured = f"the job takes {p.job_s / 3600.0:.2f} h"
    else:
        measured = f"TTFT {p.ttft_s * 1e3:.0f} ms, TPOT {p.tpot_s * 1e3:.1f} ms"
    return replace(cand, feasible=False, sized_by="simulation", probes=tuple(seen.values()),
                   reason=(f"misses the {_binding(p.missed)} in simulation even with {top} replicas (the max_gpus or "
                           f"budget limit): {measured}"))


def max_replicas(sc: Scenario, cand: Candidate) -> int:
    """The most replicas ``max_gpus`` and the budget allow (at least 1; a free GPU leaves the
    budget unbounded)."""
    gpr = cand.gpus_per_replica
    n = sc.search.max_gpus // gpr
    usd_per_replica_h = gpr * price_per_gpu_hour(sc, cand.hardware)
    if sc.budget_usd_per_hour is not None and usd_per_replica_h > 0:
        n = min(n, int(sc.budget_usd_per_hour // usd_per_replica_h))
    return max(n, 1)


def smallest_meeting(probe: Callable[[int], Probe], seed: int, n_max: int) -> tuple[int | None, dict[int, Probe]]:
    """The smallest count the search finds meeting, and every probe by count.

    Brackets from ``seed`` (steps 1, 2, 4, ... down while counts meet, up while they miss,
    at most ``n_max``), then bisects. The answer ``n`` met and ``n - 1`` missed (or
    ``n = 1``); ``None`` when ``n_max`` misses.
    """
    seen: dict[int, Probe] = {}

    def meets(n: int) -> bool:
        if n not in seen:
            seen[n] = probe(n)
        return seen[n].meets

    start, step = min(max(seed, 1), n_max), 1
    if meets(start):
        lo, hi = 0, start
        while hi - step >= 1 and meets(hi - step):
            hi, step = hi - step, 2 * step
        lo = max(hi - step, 0)
    else:
        lo = start
        while True:
            n = min(lo + step, n_max)
            if meets(n):
                hi = n
                break
            if n == n_max:
                return None, seen
            lo, step = n, 2 * step
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if meets(mid) else (mid, hi)
    return hi, seen


def simulated_headroom(probe: Callable[[float], Probe], known_miss: float | None,
                       miss_probe: Probe | None) -> tuple[float, Probe | None]:
    """Traffic growth still meeting the SLOs (a lower bound), and the first probe that missed.

    ``known_miss`` is a growth already seen missing (``n / (n - 1) - 1``: ``n - 1``
    replicas at the planned rate load each replica as ``n`` at that growth). Without one
    the growth doubles (``1, 3, 7, 15``) until a miss; then :data:`HEADROOM_STEPS` bisections.
    """
    lo, hi, miss = 0.0, known_miss, miss_probe
    if hi is None:
        g = 1.0
        while g <= HEADROOM_MAX:
            p = probe(g)
            if not p.meets:
                hi, miss = g, p
                break
            lo, g = g, 2.0 * g + 1.0
        if hi is None:
            return lo, None
    for _ in range(HEADROOM_STEPS):
        mid = (lo + hi) / 2.0
        p = probe(mid)
        if p.meets:
            lo = mid
        else:
            hi, miss = mid, p
    return lo, miss


def slo_probe(sc: Scenario, result: Any, n: int, growth: float, pd: str = "") -> Probe:
    """The SLO percentile of a simulation's TTFT and TPOT, and which objectives it misses."""
    slo = sc.slo
    ttft = float(np.percentile(result.ttft_s, slo.percentile))
    tpots = result.tpot_s
    tpot = float(np.nanpercentile(tpots, slo.percentile)) if np.any(~np.isnan(tpots)) else 0.0
    missed = [name for name, value, bound in (("TTFT", ttft, slo.ttft_ms), ("TPOT", tpot, slo.tpot_ms))
              if bound and value > bound / 1e3]
    if queue_grows(getattr(result, "trace", None)):
        missed.append("throughput")  # the queue diverges: no SLO holds over a longer run
    return Probe(n, growth, ttft, tpot, not missed, "+".join(missed), pd)


def queue_grows(trace: Any) -> bool:
    """Whether the replicas fall behind the arrivals: the backlog (arrived, not yet scheduled)
    at the last arrival exceeds 1.5x the backlog at the middle arrival, 1% of the requests and
    10 requests. A backlog that grows linearly doubles from the middle to the end; a stable
    one stays near its mean, which for an in-flight-batching engine is near zero until its
    sequence or KV limit binds. Without it a scenario with no TTFT objective would accept a replica
    count whose queue (and TTFT) grows for as long as the traffic lasts."""
    arrival = getattr(trace, "arrival", None)
    scheduled = getattr(trace, "first_scheduled", None)
    if arrival is None or scheduled is None or len(arrival) < 20:
        return False
    arrival, scheduled = np.asarray(arrival, float), np.asarray(scheduled, float)
    order = np.sort(arrival)

    def backlog(t: float) -> int:
        return int(np.count_nonzero((arrival <= t) & (scheduled > t)))

    end, mid = backlog(float(order[-1])), backlog(float(order[len(order) // 2]))
    return end > max(1.5 * mid, 0.01 * len(arrival), 10)
