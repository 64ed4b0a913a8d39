"""Probes of the simulated sizing (:mod:`.sizing`): one simulation of a candidate at a replica
count, read against the SLOs, and the search over counts and traffic growth.

Rules that keep a probe's percentile stable:

* the percentiles are read over ``N = clip(ceil(20 / (1 - p)), 1000, 20000)`` requests for
  the SLO percentile ``p`` (2,000 at P99), times the weight of the lengths' tail
  (:func:`tail_weight`): at least 20 requests lie beyond the percentile, so it is not one
  request's latency;
* in steady state (:func:`steady_run`): a replica starts empty, and its requests in flight
  (and the KV cache they hold) grow for as long as the longest requests live, so the
  requests that arrive in the first lifetime (the P99 of the simulated arrival-to-last-token
  times) and in the last (which decode while arrivals have stopped) are simulated but not
  read. A lifetime of 100 s at 6.7 requests/s is 670 requests a side: 1,000 requests read
  from the start had met a TPOT objective that 3,000 miss by 40% (the KV pool fills up
  after the first 1,000 and the queue grows). A probe that misses on all its requests
  misses (its warm-up only lightened the load); one that meets is rerun with enough requests
  for the window (at most :data:`MAX_STEADY_REQUESTS`);
* seed 0 at every count: the same prompt and output lengths and exponential gaps, scaled by
  the rate (a longer run extends a shorter one: :meth:`~inferlab.Workload.draw`);
* near an objective, more seeds: a P99 TPOT rides on the few long prompts a run happens to
  draw (Llama-3.1-70B FP8 on one B200 at 5 req/s, the chat example's lengths: 46-60 ms over
  six seeds of 2,000-10,000 requests read, against a 50 ms objective; a single seed read
  8-12% under the long-run value in five configurations of a user's hunt), so a probe within
  :data:`NOISE_BAND` of an objective is pooled with the same run of seeds 1 and 2 (a
  replication each), and decided on the pooled percentile.

An offline job (``traffic.offline``) over ``n`` replicas gives each ``ceil(requests / n)``
requests, of which at most ``max(2000, 4 x slots)`` are simulated (all queued at once) and
the duration scaled to the rest; the job meets its deadline or not.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from ..inputs.limits import MAX_SPAN_S
from ..inputs.prefixes import shared_by_hit_rate
from ..serving.goodput import queue_grows
from .candidate import Candidate, Probe
from .scenario import Scenario
from .limits import BUDGET_SLACK
from .search import price_per_gpu_hour, with_replicas

TAIL_REQUESTS = 20
MIN_REQUESTS = 1000
MAX_REQUESTS = 20000
#: Requests one steady-state probe simulates at most (warm-up, window and drain together).
MAX_STEADY_REQUESTS = 40000
#: The most :func:`tail_weight` multiplies the requests read by.
MAX_TAIL_WEIGHT = 4.0
#: Lifetime that sets the warm-up: this percentile of the simulated arrival-to-last-token times.
LIFETIME_PERCENTILE = 99.0
#: Simulations one probe runs at most to find a window in steady state.
STEADY_RUNS = 3
#: A probe whose percentile lies within this share of an objective is pooled with other seeds'.
NOISE_BAND = 0.20
#: Seeds a probe pools at most.
REPLICATIONS = 3
#: Consecutive sections each seed's read window is cut into for a percentile's standard error.
SECTIONS = 5
#: Bisection steps on the traffic growth for the simulated headroom (at most), and the largest
#: growth tried; the bisection stops once the bracket is within :data:`HEADROOM_RESOLUTION`.
HEADROOM_STEPS = 4
HEADROOM_MAX = 15.0
#: Width of the headroom's bracket the bisection settles for: 10 points of traffic growth, or a
#: quarter of the growth found (``+0%`` had been reported for a bracket of 0-25%).
HEADROOM_RESOLUTION = (0.10, 0.25)


def probe_requests(percentile: float, traffic: Any = None) -> int:
    """Requests one probe reads for a stable ``percentile`` (see the module docstring), times
    the heavier tail of the ``traffic``'s lengths (:func:`tail_weight`), at most
    :data:`MAX_REQUESTS`."""
    n = max(math.ceil(TAIL_REQUESTS / (1.0 - percentile / 100.0)), MIN_REQUESTS)
    return int(min(math.ceil(n * (tail_weight(traffic) if traffic is not None else 1.0)), MAX_REQUESTS))


def tail_weight(traffic: Any) -> float:
    """How many times the requests a probe reads for lengths of one size: ``E[X^2] / E[X]^2`` of
    the heavier of prompt and output lengths, at most :data:`MAX_TAIL_WEIGHT`. A tail is set by
    the rare longest prompts (a 30,000-token one in 1,000 of mean 1,500 at sigma 1.2 stalls a
    replica for seconds): the heavier the lengths' tail, the more requests before its
    percentile settles (lognormal sigma 0.6: 1.43x; 1.2: 4x, capped)."""
    weight = max(traffic.isl.second_moment_ratio, traffic.osl.second_moment_ratio)
    return float(min(max(weight, 1.0), MAX_TAIL_WEIGHT))


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
                   simulated_tpot_s=at_n.tpot_s, simulated_ttft_se_s=at_n.ttft_se_s,
                   simulated_tpot_se_s=at_n.tpot_se_s, headroom=growth, headroom_by="simulation", binding=binding,
                   probes=tuple(sorted(probes, key=lambda p: (p.growth, p.replicas))),
                   simulated_without=techniques(sc, cand)[1])


def _binding(missed: str) -> str:
    """What a probe missed, as the binding column says it: ``TPOT SLO``, ``TTFT+TPOT SLO``,
    ``deadline``, or ``throughput (queue grows)`` (no SLO: the replicas fall behind)."""
    parts = missed.split("+")
    slos = [m for m in parts if m in ("TTFT", "TPOT")]
    other = [f"{m} (queue grows)" if m.endswith("throughput") else m for m in parts if m not in ("TTFT", "TPOT")]
    return " and ".join(([f"{'+'.join(slos)} SLO"] if slos else []) + other)


def missed(cand: Candidate, seen: dict[int, Probe]) -> Candidate:
    top = max(seen)
    p = seen[top]
    if p.missed == "deadline":
        measured = f"the job takes {p.job_s / 3600.0:.3g} h" + (f" ({p.job_s:.3g} s)" if p.job_s < 360.0 else "")
    else:
        measured = f"TTFT {p.ttft_s * 1e3:.0f} ms, TPOT {p.tpot_s * 1e3:.1f} ms"
    return replace(cand, feasible=False, sized_by="simulation", probes=tuple(seen.values()),
                   reason=(f"misses the {_binding(p.missed)} in simulation even with {top} replicas (the max_gpus or "
                           f"budget limit): {measured}"))


def allowed_gpus(sc: Scenario, cand: Candidate) -> int:
    """The most GPUs of ``cand``'s type that ``max_gpus`` and the budget allow (a free GPU
    leaves the budget unbounded)."""
    n = sc.search.max_gpus
    price = price_per_gpu_hour(sc, cand.hardware)
    if sc.budget_usd_per_hour is not None and price > 0:
        n = min(n, math.floor(sc.budget_usd_per_hour * (1.0 + BUDGET_SLACK) / price))
    return n


def allowed_replicas(sc: Scenario, cand: Candidate) -> int:
    """The most replicas ``max_gpus`` and the budget allow (0 when not even one; separate pools
    are bounded in GPUs, :func:`allowed_gpus`, by :mod:`.sizing_disaggregated`)."""
    return allowed_gpus(sc, cand) // cand.gpus_per_replica


def max_replicas(sc: Scenario, cand: Candidate) -> int:
    """The most replicas the limits allow, at least 1 (the count a simulated search may reach)."""
    return max(allowed_replicas(sc, cand), 1)


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
    the growth doubles (``1, 3, 7, 15``) until a miss; then bisections until the bracket is
    within :data:`HEADROOM_RESOLUTION` (at most :data:`HEADROOM_STEPS`).
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
        if hi - lo <= max(HEADROOM_RESOLUTION[0], HEADROOM_RESOLUTION[1] * lo):
            break
        mid = (lo + hi) / 2.0
        p = probe(mid)
        if p.meets:
            lo = mid
        else:
            hi, miss = mid, p
    return lo, miss


def prior_lifetime(sc: Scenario, cand: Candidate) -> float:
    """The fluid model's lifetime of a long request [s]: its TTFT and the P99 output length
    at its TPOT (0 where the fluid model has none); :func:`steady_run`'s first warm-up."""
    life = cand.fluid_ttft_s + float(sc.traffic.osl.quantiles(np.array([0.99]))[0]) * cand.fluid_tpot_s
    return life if math.isfinite(life) and life > 0 else 0.0


def steady_run(run: Callable[[int], Any], per_s: float, n_tail: int, lifetime_s: float = 0.0,
               meets: Callable[[Any], bool] | None = None) -> tuple[Any, float]:
    """A simulation whose read window is in steady state, and its lifetime [s] (the window:
    :func:`steady_window`; 0 reads every request).

    ``run(k)`` simulates ``k`` requests arriving ``per_s`` per second; ``n_tail`` is how many
    the window must hold (each run aims 5% above it, so that a request or two at its edges
    does not cost a rerun); ``lifetime_s`` a prior of the warm-up (0: none). The window drops
    the requests arriving within one lifetime of the first arrival and of the last (see the
    module docstring); the lifetime is the simulated one (the larger of it and the prior).
    A run that ``meets(result)`` says misses on all its requests is returned as it is.
    """
    life, n = max(lifetime_s, 0.0), 0
    # at most what arrives within the span a simulation can hold (a slow trickle: fewer requests)
    cap = int(max(min(MAX_STEADY_REQUESTS, math.floor(0.99 * per_s * MAX_SPAN_S)), 1))
    for _ in range(STEADY_RUNS):
        n = int(min(math.ceil(1.05 * n_tail + 2.0 * per_s * life), cap))  # 5%: the edges
        result = run(n)
        arrival = np.asarray(result.trace.arrival, float)
        if meets is not None and not meets(result):
            return result, 0.0
        life = max(life, float(np.percentile(result.e2e_s, LIFETIME_PERCENTILE)))
        if len(arrival) > 1 and arrival.max() > arrival.min():
            per_s = (len(arrival) - 1) / (arrival.max() - arrival.min())
        if np.count_nonzero(steady_window(arrival, life)) >= n_tail or n >= cap:
            break
        life *= 1.1  # the next run's load is steadier, and its long requests live longer
    # capped: at most a third of the run is dropped at each end, the middle third is read
    return result, min(life, float(arrival.max() - arrival.min()) / 3.0)


def steady_window(arrival: np.ndarray, lifetime_s: float) -> np.ndarray:
    """The requests a probe reads: those that arrived more than ``lifetime_s`` after the first
    arrival and before the last (a mask; every request when ``lifetime_s`` is 0)."""
    arrival = np.asarray(arrival, float)
    if lifetime_s <= 0.0:
        return np.ones(arrival.shape, bool)
    window = (arrival >= arrival.min() + lifetime_s) & (arrival <= arrival.max() - lifetime_s)
    return window if window.any() else arrival >= np.median(arrival)


def slo_probe(sc: Scenario, result: Any, n: int, growth: float, pd: str = "", lifetime_s: float = 0.0,
              more: Sequence[tuple[Any, float]] = ()) -> Probe:
    """The SLO percentile of a simulation's TTFT and TPOT (over its :func:`steady_window` for
    ``lifetime_s``; every request by default; pooled with the windows of ``more`` simulations,
    ``(result, lifetime_s)`` pairs of other seeds), and which objectives it misses."""
    slo = sc.slo
    runs = [(result, lifetime_s), *more]
    ttfts, tpots = [], []
    for r, life in runs:
        trace = getattr(r, "trace", None)  # (a result without one is read in its own order)
        arrival = np.asarray(trace.arrival if trace is not None else np.arange(len(r.ttft_s)), float)
        keep = steady_window(arrival, life) if life > 0 else np.ones(arrival.shape, bool)
        order = np.argsort(arrival[keep], kind="stable")  # arrival order, for the sections
        ttfts.append(np.asarray(r.ttft_s, float)[keep][order])
        tpots.append(np.asarray(r.tpot_s, float)[keep][order])
    ttft = float(np.percentile(np.concatenate(ttfts), slo.percentile))
    every_tpot = np.concatenate(tpots)
    tpot = float(np.nanpercentile(every_tpot, slo.percentile)) if np.any(~np.isnan(every_tpot)) else 0.0
    missed = [name for name, value, bound in (("TTFT", ttft, slo.ttft_ms), ("TPOT", tpot, slo.tpot_ms))
              if bound and value > bound / 1e3]
    if any(queue_grows(getattr(r, "trace", None)) for r, _ in runs):
        missed.append("throughput")  # the queue diverges: no SLO holds over a longer run
    requests = sum(int(getattr(getattr(r, "workload", None), "num_requests", 0)) for r, _ in runs)
    return Probe(n, growth, ttft, tpot, not missed, "+".join(missed), pd, requests=requests, lifetime_s=lifetime_s,
                 seeds=len(runs), ttft_se_s=percentile_se(ttfts, slo.percentile),
                 tpot_se_s=percentile_se(tpots, slo.percentile))


def percentile_se(windows: Sequence[np.ndarray], percentile: float) -> float:
    """Standard error of the ``percentile`` pooled over ``windows`` (each seed's read values in
    arrival order), by batch means: each window is cut into up to :data:`SECTIONS` consecutive
    sections of at least ``2 / (1 - p)`` values (two beyond the percentile), and the error is the
    standard deviation of the sections' percentiles over the square root of their number.
    Consecutive sections of one run share its queue at their edges, so this is a lower bound
    when sections are short against a request's lifetime. With two seeds or more the spread of
    the seeds' own percentiles bounds it too (independent runs share no queue: a heavy-tailed
    workload's seeds differ more than one run's sections show), and the larger is taken.
    NaN below two sections."""
    need = 2.0 / (1.0 - percentile / 100.0)
    estimates, per_seed = [], []
    for values in windows:
        values = values[~np.isnan(values)]
        k = int(min(SECTIONS, len(values) // need))
        estimates += [float(np.percentile(part, percentile)) for part in np.array_split(values, k)] if k else []
        if len(values) >= need:
            per_seed.append(float(np.percentile(values, percentile)))
    if len(estimates) < 2:
        return float("nan")
    sections = float(np.std(estimates, ddof=1) / math.sqrt(len(estimates)))
    seeds = float(np.std(per_seed, ddof=1) / math.sqrt(len(per_seed))) if len(per_seed) >= 2 else 0.0
    return max(sections, seeds)


def steady_probe(sc: Scenario, run: Callable[[int, int], Any], per_s: float, lifetime_s: float, n: int,
                 growth: float, pd: str = "") -> Probe:
    """A probe in steady state (:func:`steady_run` of ``run(k, seed)``, ``k`` requests of a seed);
    where its percentile lies within :data:`NOISE_BAND` of an objective, pooled with the same
    number of requests of further seeds, up to :data:`REPLICATIONS` (see the module docstring)."""
    n_tail, asked = probe_requests(sc.slo.percentile, sc.traffic), []

    def first(k: int) -> Any:
        asked.append(k)  # the run's own count (a replica's workload may hold pp times it)
        return run(k, 0)

    result, life = steady_run(first, per_s, n_tail, lifetime_s, lambda r: slo_probe(sc, r, n, growth, pd).meets)
    probe, more = slo_probe(sc, result, n, growth, pd, life), []
    for seed in range(1, REPLICATIONS):
        if not (life > 0 and _near(sc, probe)):
            break
        more.append((run(asked[-1], seed), life))
        probe = slo_probe(sc, result, n, growth, pd, life, more)
    return probe


def _near(sc: Scenario, probe: Probe) -> bool:
    """Whether a probe's percentile lies within :data:`NOISE_BAND` of an objective, or within
    two of its standard errors (and its queue does not grow: that is decided)."""
    if "throughput" in probe.missed:
        return False
    return any(bound and (abs(value / (bound / 1e3) - 1.0) < NOISE_BAND or abs(value - bound / 1e3) < 2.0 * se)
               for value, se, bound in ((probe.ttft_s, probe.ttft_se_s, sc.slo.ttft_ms),
                                        (probe.tpot_s, probe.tpot_se_s, sc.slo.tpot_ms)))
