"""The planner: search a scenario's configurations, size the leaders by simulation, rank by cost.

1. *Search* (:mod:`.search`): every configuration is sized by the fluid model, a seed
   replica count and its cost.
2. *Size by simulation* (:mod:`.sizing`): in order of cost, leading configurations get the
   fewest replicas the request-level simulation shows meeting the SLOs, searched down as
   well as up from the seed, with simulated latencies and headroom.
3. *Rank*: feasible first, cheapest first, then the shorter TTFT.

Which configurations are simulated: in ranking order, the cheapest one not yet simulated,
while the leader is not a simulated one; once it is, further ones while fewer than
``scenario.verify`` have been simulated and the next could still beat the leader; at most
``3 x verify`` in all. A configuration *cannot beat* the leader when even
``ceil(seed / SEED_OVERESTIMATE)`` of its replicas cost at least as much. Across the
example and test scenarios the fluid seed (at the default ``target_utilization`` 0.8) is
0.7-1.5x the simulated count, and up to 3x for a mixture of experts at one to three
replicas (its prefill rides along decode iterations almost for free, which the fluid
model's time sharing does not see): hence 3.
"""

from __future__ import annotations

import functools
import math
from typing import Any

from ..cluster import check_client, map_units
from ..errors import InfeasibleError
from .candidate import Candidate, Probe
from .result import Plan
from .scenario import Scenario
from .curve import _BATCHES, _capacity_curve
from .search import candidates, evaluate, price_per_gpu_hour
from .sizing import size_by_simulation

__all__ = ["Candidate", "Plan", "Probe", "_BATCHES", "_capacity_curve", "candidates", "evaluate", "plan", "verify"]

#: The most the fluid seed over-estimates the simulated replica count (see the module docstring).
SEED_OVERESTIMATE = 3.0

#: Sizing one candidate by simulation (the name the planner's callers know).
verify = size_by_simulation


def _rank(c: Candidate) -> tuple:
    """Feasible first, cheapest first, then the shorter TTFT."""
    return (not c.feasible, c.usd_per_hour if c.feasible else math.inf, c.ttft_for_rank())


def _could_beat(sc: Scenario, c: Candidate, leader: Candidate) -> bool:
    """Whether ``c``'s fewest plausible replicas cost less than the simulated ``leader``."""
    fewest = max(1, math.ceil(c.seed_replicas / SEED_OVERESTIMATE))
    return fewest * c.gpus_per_replica * price_per_gpu_hour(sc, c.hardware) < leader.usd_per_hour


def _size_leaders(scenario: Scenario, results: list[Candidate]) -> list[Candidate]:
    """Size leading candidates by simulation (the rule of the module docstring), re-ranking after each."""
    simulated = 0
    while simulated < 3 * scenario.verify:
        top = next((i for i, c in enumerate(results) if c.feasible and not c.simulated), None)
        if top is None:
            break
        leader = results[0]
        if leader.feasible and leader.simulated and (simulated >= scenario.verify
                                                     or not _could_beat(scenario, results[top], leader)):
            break
        results[top] = size_by_simulation(scenario, results[top])
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
    result = Plan(scenario, tuple(results))
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
    err = InfeasibleError(f"no configuration of scenario '{scenario.name}' meets it ({len(results)} ruled out): "
                          f"{shown}; relax the SLOs, raise search.max_gpus or the budget, or add hardware, "
                          "precisions or TP sizes")
    err.plan = Plan(scenario, tuple(results))  # every reason, for callers that want them all
    return err
