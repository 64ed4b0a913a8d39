"""Sizing a disaggregated configuration by simulating both pools.

The prefill pool is sized first, against a generous decode pool (twice the fluid model's),
then the decode pool against that prefill pool, each with the bracket-and-bisect search
of :func:`.probes.smallest_meeting`. The answer ``P:D`` meets the SLOs in simulation, and
so neither ``P:(D-1)`` nor ``(P-1):2D_seed`` does: fewer replicas in either pool miss.

A count whose pool receives more than its replicas complete with every request queued misses on
throughput before any run (:func:`saturated_rates`): Llama-3.1-8B FP8 on H100s at 4,000/500 and
100 req/s had been sized P7:D7 from a 2,500-request probe (P99 TTFT 0.62 s) although a decode
replica completes 13.1 req/s and each had 14.3 to serve; over 12,000 requests the time from
arrival to last token grew from 7.3 s (first tenth) to 12.8 s (last tenth).
"""

from __future__ import annotations

import functools
import math
from dataclasses import replace
from typing import Any

from ..errors import InferlabError
from .candidate import Candidate, Probe
from .probes import (MAX_REQUESTS, allowed_gpus, finish, prior_lifetime, simulated_headroom, smallest_meeting,
                     steady_probe)
from .scenario import Scenario
from .search import scenario_deployment


def size_disaggregated(sc: Scenario, cand: Candidate) -> Candidate:
    """``cand`` with the smallest prefill and decode pools the simulation shows meeting the SLOs."""
    seed_p, seed_d = cand.pools
    g_p, g_d = cand.pool_gpus_per_replica
    # the limits in GPUs (pools of two kinds differ in size), at least one pair: limits() rules it out after
    gpus = max(allowed_gpus(sc, cand), g_p + g_d)
    seen: dict[tuple[int, int, float], Probe] = {}

    most = functools.cache(lambda: saturated_rates(sc, cand))  # a replica of each pool's, measured once

    def probe(n_p: int, n_d: int, growth: float) -> Probe:
        key = (n_p, n_d, growth)
        if key not in seen:
            rate = sc.traffic.request_rate * (1.0 + growth)
            over = [side for side, n, mu in zip(("prefill", "decode"), (n_p, n_d), most()) if rate / n >= mu]
            # more arrives than the pool completes: its queue grows however long a probe would need to show it
            seen[key] = (Probe(n_p + n_d, growth, math.nan, math.nan, False, f"{' and '.join(over)} throughput",
                               pd=f"P{n_p}:D{n_d}") if over else _simulate(sc, cand, n_p, n_d, growth))
        return seen[key]

    try:
        wide_d = max(1, min(2 * seed_d, (gpus - g_p) // g_d))
        n_p, _ = smallest_meeting(lambda k: probe(k, wide_d, 0.0), seed_p, max((gpus - wide_d * g_d) // g_p, 1))
        n_d, _ = (None, None) if n_p is None else smallest_meeting(lambda k: probe(n_p, k, 0.0), seed_d,
                                                                   max((gpus - n_p * g_p) // g_d, 1))
        if n_p is None or n_d is None:
            worst = max(seen.values(), key=lambda p: p.replicas)
            what = (f"receives more than its {worst.missed.removesuffix(' throughput')} replicas complete"
                    if worst.missed.endswith("throughput") else f"misses the {worst.missed} objective in simulation")
            return replace(cand, feasible=False, sized_by="simulation", probes=tuple(seen.values()),
                           reason=f"{what} even with {worst.pd} (the max_gpus or budget limit)")
        growth, miss = simulated_headroom(lambda g: probe(n_p, n_d, g), None, None)
    except InferlabError as exc:
        return replace(cand, feasible=False, sized_by="simulation", reason=f"simulation: {exc}")
    return finish(sc, cand, n_p + n_d, seen[(n_p, n_d, 0.0)], list(seen.values()), growth, miss,
                  pd=f"P{n_p}:D{n_d}")


def _simulate(sc: Scenario, cand: Candidate, n_p: int, n_d: int, growth: float) -> Probe:
    """One simulation of both pools (the candidate's :class:`~inferlab.Deployment` at
    ``P<n_p>:D<n_d>``) at ``(1 + growth)`` x the scenario's rate."""
    from ..inputs.workload import Workload
    from ..serving.serve import serve

    tr = sc.traffic
    pd = f"P{n_p}:D{n_d}"
    dep = scenario_deployment(sc, replace(cand, pd=pd))
    rate, n = tr.request_rate * (1.0 + growth), n_p + n_d

    def run(k: int, seed: int) -> Any:
        return serve(dep, Workload(rate=rate, num_requests=k, isl=tr.isl, osl=tr.osl, seed=seed))

    return steady_probe(sc, run, rate, prior_lifetime(sc, cand), n, growth, pd)


def saturated_rates(sc: Scenario, cand: Candidate) -> tuple[float, float]:
    """Requests/s one prefill replica and one decode replica of ``cand`` complete with every
    request queued [request/s]: offline runs of ``P1:Dk`` and ``Pk:D1`` read in their steady
    middle (:func:`~inferlab.serving.goodput.steady_requests_per_s`), the other pool ``k``
    replicas wide (twice the fluid seeds' ratio, at least 2), widened while a run's rate comes
    within 10% of what the wide pool completes (then it, not the pool measured, set the pace).

    A decode pool completes somewhat less overloaded than at the edge of keeping up: every
    slot taken, its sequences outgrow the KV cache and are preempted (429 preemptions in the
    offline run of the 8B case of the module docstring, none in a stream it keeps up with).
    One decode replica there, behind two prefill ones, keeps up with 13.5 req/s and falls behind
    at 14.0 (served 13.6), where the offline run reads 13.1: the bound errs by that much
    towards one replica more, never towards a pool that falls behind."""
    from ..inputs.resolve import deployment
    from ..inputs.workload import Workload
    from ..serving.goodput import steady_requests_per_s
    from ..serving.serve import serve
    from .search import sequence_limit

    tr, (seed_p, seed_d) = sc.traffic, cand.pools
    decode = deployment(cand.model, cand.hardware, precision=None if cand.precision == "checkpoint" else cand.precision,
                        tp=cand.tp, ep=cand.ep, attention_dp=cand.attention_dp, engine=sc.engine, profile=sc.profile)
    slots = sequence_limit(sc, decode)  # (the engine's cap: the KV cache may hold fewer)

    def most(n_p: int, n_d: int) -> float:
        dep = scenario_deployment(sc, replace(cand, pd=f"P{n_p}:D{n_d}"))
        # a decode replica's slots filled four times over, at most what a probe simulates
        requests = int(min(max(2000, 4 * slots), MAX_REQUESTS))
        return steady_requests_per_s(serve(dep, Workload(offline=True, num_requests=requests, isl=tr.isl,
                                                         osl=tr.osl, seed=0)))

    wide_d, wide_p = max(2, math.ceil(2 * seed_d / seed_p)), max(2, math.ceil(2 * seed_p / seed_d))
    mu_p, mu_d = most(1, wide_d), most(wide_p, 1)
    for _ in range(3):
        if mu_p < 0.9 * wide_d * mu_d and mu_d < 0.9 * wide_p * mu_p:
            break
        if mu_p >= 0.9 * wide_d * mu_d:
            wide_d *= 2
            mu_p = most(1, wide_d)
        if mu_d >= 0.9 * wide_p * mu_p:
            wide_p *= 2
            mu_d = most(wide_p, 1)
    return mu_p, mu_d
