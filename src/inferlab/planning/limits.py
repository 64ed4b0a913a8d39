"""The scenario's limits on a sized candidate (its GPU count, its budget, a price to rank it by),
and how far a fluid count may be off (:data:`SEED_OVERESTIMATE`)."""

from __future__ import annotations

import math
from dataclasses import replace

from .candidate import Candidate
from .scenario import Scenario

#: Relative rounding slack of a cost against the budget (:func:`over_budget`).
BUDGET_SLACK = 1e-9
#: The most the fluid seed over-estimates the simulated replica count (see :mod:`.planner`): how
#: far below its fluid cost a configuration may still come once simulated.
SEED_OVERESTIMATE = 3.0


def limits(sc: Scenario, cand: Candidate) -> Candidate:
    """Rule out a sized candidate that breaks the GPU count, the budget or has no price."""
    if not cand.feasible:
        return cand
    gpus, usd_h = cand.gpus, cand.usd_per_hour
    if math.isnan(usd_h):  # first: a configuration without a price is out whatever its count
        return replace(cand, feasible=False, over_limits=False, reason=f"no price for {cand.hardware}: add it under prices",
                       ruled_by_input=True)
    if gpus > sc.search.max_gpus:
        return replace(cand, feasible=False, over_limits=True,
                       reason=f"needs {gpus} GPUs > max_gpus {sc.search.max_gpus}")
    if over_budget(sc, usd_h):
        return replace(cand, feasible=False, over_limits=True,
                       reason=f"${usd_h:,.2f}/h over the budget ${sc.budget_usd_per_hour:,.2f}/h")
    return replace(cand, over_limits=False)


def over_budget(sc: Scenario, usd_per_hour: float) -> bool:
    """Whether ``usd_per_hour`` breaks the scenario's budget, up to :data:`BUDGET_SLACK` (three
    GPUs at $2.95 cost ``8.850000000000001`` in floating point, within a budget of $8.85)."""
    return sc.budget_usd_per_hour is not None and usd_per_hour > sc.budget_usd_per_hour * (1.0 + BUDGET_SLACK)
