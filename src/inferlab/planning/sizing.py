"""Sizing by simulation: the fewest replicas the request-level simulation shows meeting the SLOs.

The fluid model (:mod:`.search`) gives each configuration a seed count; here the
request-level simulation (:func:`inferlab.serve`) decides. Each probe is one simulation
of one replica at the scenario's rate split over ``n`` replicas (both pools of a
disaggregated configuration at the whole rate); from the seed the search brackets the
answer (down while ``n`` meets, up while it misses, in steps that double), then bisects:
the answer ``n`` is a count that met with ``n - 1`` missing, both simulated, so the result
never relies on the outcome being monotone in ``n``.

The probes and the rules that keep their percentiles stable are in :mod:`.probes`.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import numpy as np

from ..errors import InferlabError
from ..serving.goodput import steady_requests_per_s
from .candidate import Candidate, Probe
from .probes import (finish, max_replicas, missed, prior_lifetime, simulated_headroom, smallest_meeting, steady_probe,
                     techniques)
from .scenario import Scenario
from .search import scenario_deployment


def size_by_simulation(sc: Scenario, cand: Candidate) -> Candidate:
    """``cand`` with the fewest replicas the simulation shows meeting the SLOs, its simulated
    latencies and headroom; infeasible (with the reason) when no count within the limits does."""
    if cand.disaggregated:
        from .sizing_disaggregated import size_disaggregated

        return size_disaggregated(sc, cand)
    simulate, grown = _probe_function(sc, cand), []

    def probe(n: int, growth: float) -> Probe:
        out = simulate(n, growth)
        if growth:
            grown.append(out)
        return out

    try:
        n, seen = smallest_meeting(lambda k: probe(k, 0.0), cand.seed_replicas, max_replicas(sc, cand))
    except InferlabError as exc:
        return replace(cand, feasible=False, sized_by="simulation", reason=f"simulation: {exc}")
    if n is None:
        return missed(cand, seen)
    at_n = seen[n]
    if sc.traffic.offline:
        # the job's duration scales with its requests: the deadline's slack is the headroom
        return finish(sc, cand, n, at_n, seen.values(), sc.traffic.deadline_h * 3600.0 / at_n.job_s - 1.0,
                      at_n, simulated_job_s=at_n.job_s)
    known_miss = n / (n - 1) - 1.0 if n > 1 else None
    try:
        growth, miss = simulated_headroom(lambda g: probe(n, g), known_miss, seen.get(n - 1))
    except InferlabError as exc:
        return replace(cand, feasible=False, sized_by="simulation", reason=f"simulation: {exc}")
    return finish(sc, cand, n, at_n, [*seen.values(), *grown], growth, miss)


def _probe_function(sc: Scenario, cand: Candidate) -> Callable[[int, float], Probe]:
    """``probe(n, growth)``: one simulation of ``cand`` (its :class:`~inferlab.Deployment`)
    with ``n`` replicas at ``(1 + growth)`` x the rate."""
    from ..inputs.workload import Workload
    from ..serving.serve import serve

    tr = sc.traffic
    kwargs, _ = techniques(sc, cand)
    dep = scenario_deployment(sc, cand)
    lifetime = prior_lifetime(sc, cand)
    lengths = {"isl": tr.isl, "osl": tr.osl, "seed": 0, **({"prefix": kwargs["prefix"]} if "prefix" in kwargs else {})}

    @functools.cache
    def most_per_s() -> float:
        """The most requests/s a replica completes: an offline run's (every request queued) in
        its steady middle (:func:`~inferlab.serving.goodput.steady_requests_per_s`), once a candidate."""
        slots = float(np.max(cand.curve.get("batch_size", [1.0])))
        done = serve(dep, Workload(offline=True, num_requests=int(max(2000, 4 * slots) * cand.pp), **lengths))
        return steady_requests_per_s(done)

    def online(n: int, growth: float) -> Probe:
        # pp batches in flight each get 1/pp of a replica's requests: k for each
        rate = tr.request_rate * (1.0 + growth) / n
        if rate >= most_per_s():  # more arrives than the replica completes: its queue grows without end,
            # however long a probe would need to show it (8B at 4,000/500 on an H100: 7.14 req/s against
            # 6.95 had read a steady P99 TTFT of 0.6 s over 6,000 requests, then 39 s over 12,000)
            return Probe(n, growth, math.nan, math.nan, False, "throughput")

        def run(k: int, seed: int) -> Any:
            return serve(dep, Workload(rate=rate, num_requests=k * cand.pp, **dict(lengths, seed=seed)))

        return steady_probe(sc, run, rate / cand.pp, lifetime, n, growth)

    def offline(n: int, growth: float) -> Probe:
        share = math.ceil(tr.requests * (1.0 + growth) / n)
        slots = float(np.max(cand.curve.get("batch_size", [1.0])))
        simulated = int(min(share, max(2000, 4 * slots) * cand.pp))
        result = serve(dep, Workload(offline=True, num_requests=simulated, **lengths))
        job_s = result.duration_s * share / simulated
        meets = job_s <= tr.deadline_h * 3600.0
        return Probe(n, growth, float("nan"), float("nan"), meets, "" if meets else "deadline", job_s=job_s)

    return offline if tr.offline else online
