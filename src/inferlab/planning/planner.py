"""The planner: search a scenario's configurations, size the leaders by simulation, rank by cost.

1. *Search* (:mod:`.search`): every configuration is sized by the fluid model, a seed
   replica count and its cost.
2. *Size by simulation* (:mod:`.sizing`): in order of cost, leading configurations get the
   fewest replicas the request-level simulation shows meeting the SLOs, searched down as
   well as up from the seed, with simulated latencies and headroom.
3. *Rank*: feasible first, cheapest first, then the shorter TTFT.

Which configurations are simulated: in ranking order, the cheapest one not yet simulated,
while the leader is not a simulated one; once it is, further ones while fewer than
``scenario.verify`` have been simulated, the cheapest of those that could still beat the
leader; at most ``3 x verify`` in all. A
configuration *cannot beat* the leader when even ``ceil(seed / SEED_OVERESTIMATE)`` of its
replicas, or the fewer that carry the rate at the most a replica sustains by the fluid model
at any batch (its SLOs aside), cost at least as much (separate pools: ``ceil(seed /
SEED_OVERESTIMATE)`` of each, at least one; an offline job: its cost per token over
``SEED_OVERESTIMATE``). One that the fluid count puts over
``search.max_gpus`` or the budget is sized too when that many replicas fit the limits and it
could beat the leader (or none is feasible): the limits bound the simulation's count, not the
fluid model's.

Cost ranks them: online, at the scenario's rate, dollars per hour; an offline job, dollars per
output token of the whole job (its GPU-hours: replicas are let go when it is done, so a faster,
dearer GPU that finishes sooner may cost less). Over 159 simulated candidates of 42
scenarios (four models, five GPUs, three engines, 0.5-400 req/s) the fluid seed (at the
default ``target_utilization`` 0.8) was 0.5-1.56x the simulated count for dense models and
up to 3x for a mixture of experts at one to three replicas, but 4x (8 against 2) for
Qwen3-30B-A3B's 200-token prompts at a 25 ms TPOT on an H100, where the fluid P99 TPOT (41 ms)
was far above the simulated one (24 ms): it charged each prompt mixed into the decodes' iterations
the experts' weights again (:func:`~.curve.shared_step_s` since; now 3 against 2). Over 67
simulated candidates of 40 further scenarios (P99 SLOs, 20 and 150 req/s) the seed is 1-2x the
simulated count, median 1.0 for a mixture of experts and 1.2 for dense models, within 0.8-1.25x
for 85% and 75% of them (60% and 66% before that and the prompts' Poisson batching,
:func:`~.replica_points.batched_prompts`), with 0.25 once (gpt-oss-120b over eight B200s with attention DP
under SGLang: 1 against 4). With SGLang's prefill-first ranks (:mod:`.prefill_first`), attention
DP's chunk on one rank and TensorRT-LLM's balancing modelled, over 63 candidates of those
scenarios: within 0.8-1.25x for 83% (MoE) and 89% (dense), all within 0.75-2x, the extremes
one-replica answers (2 against 1); 83% and 93% since the profile's refit of 2026-12-07
(Llama-3.1-70B over two B200s under SGLang simulates 3 replicas, not 4, beside a seed of 3).
Over 29 candidates of 20 of those scenarios under TensorRT-LLM's PyTorch runtime (eager prefill
iterations that the prompts arriving during one share, :func:`~.replica_points.batched_prompts`):
within 0.8-1.25x for 73% (MoE) and 86% (dense), all within 1-2x (53% and 53%, up to 4x,
before). Hence 3, and the throughput bound beside it, which no SLO inflates.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np

from dataclasses import replace

from ..cluster import check_client, map_units
from ..errors import CombinationError, InfeasibleError
from .candidate import Candidate, Probe
from .result import Plan
from .scenario import Scenario
from .curve import _BATCHES, _capacity_curve
from .probes import allowed_gpus
from .limits import SEED_OVERESTIMATE, limits
from .search import candidates, evaluate
from .sizing import size_by_simulation

__all__ = ["Candidate", "Plan", "Probe", "_BATCHES", "_capacity_curve", "candidates", "evaluate", "plan", "verify"]


#: Sizing one candidate by simulation (the name the planner's callers know).
verify = size_by_simulation


def _rank(c: Candidate) -> tuple:
    """Feasible first, cheapest per output token first (online, at one rate, the cheapest per
    hour; an offline job, the fewest GPU-hours), then the shorter TTFT."""
    return (not c.feasible, c.usd_per_million_output if c.feasible else math.inf, c.ttft_for_rank())


def _fewest_gpus(c: Candidate, rate: float = math.nan) -> int:
    """The fewest GPUs ``c`` plausibly needs: its fluid seed over :data:`SEED_OVERESTIMATE`, or
    the replicas that carry ``rate`` [request/s] at the most a replica sustains by the fluid
    model at any batch that fits, its SLOs aside, whichever is fewer (where the fluid model's
    percentiles make the SLOs bind far too early, a mixture of experts' short prompts at a tight
    TPOT, its count had been 4x the simulated one); separate pools each by their own kind, at
    least one replica of each."""
    if not c.disaggregated:
        seeded = math.ceil(c.seed_replicas / SEED_OVERESTIMATE)
        most = float(np.max(c.curve["rate"])) if len(c.curve.get("rate", ())) else math.nan
        if most > 0.0 and math.isfinite(rate):
            seeded = min(seeded, math.ceil(rate / most))
        return max(1, seeded) * c.gpus_per_replica
    g_p, g_d = c.pool_gpus_per_replica
    return sum(max(1, math.ceil(n / SEED_OVERESTIMATE)) * g for n, g in zip(c.pools, (g_p, g_d)))


def _fewest_cost(sc: Scenario, c: Candidate) -> float:
    """What ``c`` costs per million output tokens at best: on :func:`_fewest_gpus` online; an
    offline job's cost over the seed's capacity, that much too low."""
    if sc.traffic.offline:
        return c.usd_per_million_output / SEED_OVERESTIMATE
    return c.usd_per_million_output * _fewest_gpus(c, sc.traffic.request_rate) / max(c.gpus, 1)


def _could_beat(sc: Scenario, c: Candidate, leader: Candidate) -> bool:
    """Whether ``c`` at its fewest plausible GPUs costs less than the simulated ``leader``."""
    return _fewest_cost(sc, c) < leader.usd_per_million_output


def _within_reach(sc: Scenario, c: Candidate) -> bool:
    """Ruled out only by a limit on the fluid model's count, with its fewest plausible count
    within the limits: the simulation decides."""
    return c.over_limits and not c.simulated and _fewest_gpus(c, sc.traffic.request_rate) <= allowed_gpus(sc, c)


def _next(sc: Scenario, results: list[Candidate], simulated: int) -> int | None:
    """The candidate to size next (the rule of the module docstring), or None to stop."""
    leader = results[0]
    settled = leader.feasible and leader.simulated
    open_ = [i for i, c in enumerate(results) if c.feasible and not c.simulated]
    if settled:  # the challengers that could still beat it, in ranking order
        open_ = [i for i in open_ if _could_beat(sc, results[i], leader)]
    top = open_[0] if open_ else None
    if top is not None and not (settled and simulated >= sc.verify):
        return top
    # then one ruled out by a limit at its fluid count that may fit it (the only hope when none is feasible)
    reach = [i for i, c in enumerate(results) if _within_reach(sc, c)
             and (not settled or simulated < sc.verify and _could_beat(sc, c, leader))]
    return min(reach, key=lambda i: _fewest_cost(sc, results[i]), default=None)


def _size_leaders(scenario: Scenario, results: list[Candidate]) -> list[Candidate]:
    """Size leading candidates by simulation (the rule of the module docstring), re-ranking after each."""
    simulated = 0
    while simulated < 3 * scenario.verify:
        top = _next(scenario, results, simulated)
        if top is None:
            break
        cand = results[top]
        if cand.over_limits:  # sized within the limits (probes.max_replicas), or ruled out by the simulation
            cand = replace(cand, feasible=True, over_limits=False, reason="")
        # the limits hold for the simulated count too (a disaggregated pair has at least two replicas)
        results[top] = limits(scenario, size_by_simulation(scenario, cand))
        simulated += 1
        results.sort(key=_rank)
    return results


def plan(scenario: Scenario | str | dict, client: Any = None) -> Plan:
    """Search, size and rank: the configurations that serve the scenario, cheapest first.

    ``scenario`` is a :class:`Scenario`, a YAML path or a mapping of its fields.

    ``client``, a ``dask.distributed.Client``, evaluates the configurations on its workers
    (:mod:`inferlab.cluster`); sizing the leaders by simulation, one decision after another,
    stays here. The plan is the same as without it.

    Raises
    ------
    InfeasibleError
        When no configuration meets the scenario, naming each one's reason.
    """
    from ..serving.progress import Progress
    from .scenario import load_scenario

    scenario = load_scenario(scenario)
    configs = candidates(scenario)
    if check_client(client) is not None:
        evaluated = map_units(functools.partial(evaluate, scenario), configs, client)
    else:
        evaluated = []
        with Progress(len(configs), "configurations") as bar:
            for config in configs:
                evaluated.append(evaluate(scenario, config))
                bar.step()
    results = sorted(evaluated, key=_rank)
    if scenario.verify > 0:
        results = _size_leaders(scenario, results)
    best = next((c for c in results if c.feasible), None)
    unsettled = tuple(c.label for c in results if best is not None and best.simulated and c.feasible
                      and not c.simulated and _could_beat(scenario, c, best))
    result = Plan(scenario, tuple(results), unsettled)
    if result.best is None:
        raise _nothing_feasible(scenario, results)
    return result


def _nothing_feasible(scenario: Scenario, results: list[Candidate]) -> InfeasibleError:
    """One line naming every configuration's reason (the first few in full), and what to change."""
    groups: dict[str, list[Candidate]] = {}
    for c in results:
        groups.setdefault(c.reason, []).append(c)
    said = [f"{same[0].label}: {reason}" if len(same) == 1 else f"{reason} ({len(same)}x)"
            for reason, same in groups.items()]
    shown = "; ".join(said[:4]) + (f"; and {len(said) - 4} other reasons" if len(said) > 4 else "")
    advice = (f"relax the {'deadline' if scenario.traffic.offline else 'SLOs'}, raise search.max_gpus or the "
              "budget, or add hardware, precisions, TP sizes (search.tp) or pipeline stages (search.pp)")
    wider = {tuple(sorted(c.fits_as.items())) for c in results}
    adds = {k: sorted({dict(w).get(k, 1) for w in wider} - set(getattr(scenario.search, k))) for k in ("tp", "pp")}
    if results and all(c.fits_as for c in results) and any(adds.values()):  # memory alone: the layouts that would
        listed = " and ".join(f"search.{k} {v}" for k, v in adds.items() if v)
        gpus = min(dict(w).get("tp", 1) * dict(w).get("pp", 1) for w in wider)
        cap = scenario.search.max_gpus
        more = f" with search.max_gpus >= {gpus}" if cap < gpus else ""
        advice = (f"the weights fit none of the layouts searched; add {listed}{more} (the smallest layouts that "
                  f"hold them), a precision with fewer bytes, or hardware with more memory")
    priced = [c for c in results if "over the budget" in c.reason]  # sized, and only too dear
    if priced:
        least = min(priced, key=lambda c: c.usd_per_hour)
        sized = "" if least.simulated else " by the fluid model's count (the simulation may need fewer)"
        advice = f"the cheapest, {least.label}, needs a budget of ${least.usd_per_hour:,.2f}/h{sized}; " + advice
    if results and all(c.ruled_by_input for c in results):  # nothing was weighed: the scenario's values rule all out
        # (a price's reason says its fix, as a prompt past the model's positions does)
        layout = any(not c.reason.startswith("no price for") and "max_position_embeddings" not in c.reason
                     for c in results)
        fix = "; give search.tp, search.pp and search.precisions values the model takes" if layout else ""
        bad = CombinationError(f"no configuration of scenario '{scenario.name}' can be weighed ({len(results)} ruled "
                               f"out by its own values): {shown}{fix}")
        bad.plan = Plan(scenario, tuple(results))  # type: ignore[attr-defined]
        return bad
    err = InfeasibleError(f"no configuration of scenario '{scenario.name}' meets it ({len(results)} ruled out): "
                          f"{shown}; {advice}")
    err.plan = Plan(scenario, tuple(results))  # every reason, for callers that want them all
    return err
