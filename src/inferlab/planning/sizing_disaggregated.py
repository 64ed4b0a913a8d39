"""Sizing a disaggregated configuration by simulating both pools.

The prefill pool is sized first, against a generous decode pool (twice the fluid model's),
then the decode pool against that prefill pool, each with the bracket-and-bisect search
of :func:`.probes.smallest_meeting`. The answer ``P:D`` meets the SLOs in simulation, and
so neither ``P:(D-1)`` nor ``(P-1):2D_seed`` does: fewer replicas in either pool miss.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ..errors import InferlabError
from .candidate import Candidate, Probe
from .probes import allowed_gpus, finish, prior_lifetime, simulated_headroom, smallest_meeting, steady_probe
from .scenario import Scenario
from .search import scenario_deployment


def size_disaggregated(sc: Scenario, cand: Candidate) -> Candidate:
    """``cand`` with the smallest prefill and decode pools the simulation shows meeting the SLOs."""
    seed_p, seed_d = cand.pools
    g_p, g_d = cand.pool_gpus_per_replica
    # the limits in GPUs (pools of two kinds differ in size), at least one pair: limits() rules it out after
    gpus = max(allowed_gpus(sc, cand), g_p + g_d)
    seen: dict[tuple[int, int, float], Probe] = {}

    def probe(n_p: int, n_d: int, growth: float) -> Probe:
        key = (n_p, n_d, growth)
        if key not in seen:
            seen[key] = _simulate(sc, cand, n_p, n_d, growth)
        return seen[key]

    try:
        wide_d = max(1, min(2 * seed_d, (gpus - g_p) // g_d))
        n_p, _ = smallest_meeting(lambda k: probe(k, wide_d, 0.0), seed_p, max((gpus - wide_d * g_d) // g_p, 1))
        n_d, _ = (None, None) if n_p is None else smallest_meeting(lambda k: probe(n_p, k, 0.0), seed_d,
                                                                   max((gpus - n_p * g_p) // g_d, 1))
        if n_p is None or n_d is None:
            worst = max(seen.values(), key=lambda p: p.replicas)
            return replace(cand, feasible=False, sized_by="simulation", probes=tuple(seen.values()),
                           reason=(f"misses the {worst.missed} objective in simulation even with {worst.pd} "
                                   f"(the max_gpus or budget limit)"))
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
