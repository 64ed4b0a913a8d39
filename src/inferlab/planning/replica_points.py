"""One replica's fluid operating points as its engine schedules prompts beside decodes.

Three ways, by the engine's scheduler (:mod:`inferlab.engines.scheduler`): prompts run before
the decodes, each rank's own (SGLang: :mod:`.prefill_first`); mixed into the decodes'
iterations, the prompts that arrive during one iteration prefilled together in the next
(vLLM, TensorRT-LLM: :func:`~.fluid.operating_points` with :func:`batched_prompts`); and under
TensorRT-LLM's attention-DP balancing, held until every rank has one (:mod:`.attention_dp`).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from ..engines.scheduler import default_scheduler
from .attention_dp import prompts_together, shared_prefill
from .curve import _BATCHES
from .fluid import OperatingPoints, batched_prompt_s, mixed_stall_s, operating_points, shared_per_prompt
from .prefill_first import prefill_first_points
from .scenario import Scenario

#: Rounds of the fixed point between the prompts an iteration batches and the rate (each
#: round's rate within a fraction of a percent of the last by the third).
BATCHING_ROUNDS = 3


def replica_points(sc: Scenario, est: Any, loads: np.ndarray, tpot: np.ndarray, isl: float, osl: float,
                   budget: float) -> tuple[OperatingPoints, np.ndarray, int, float]:
    """The operating points of one replica (one pipeline stage's batch) at the concurrencies
    ``loads``, the stall a prompt adds to the decodes at each [s] (a prefill iteration where the
    decodes sit prompts out), the prompts that share one prefill iteration under attention-DP
    balancing and a prompt's share of it (:func:`~.attention_dp.shared_prefill`)."""
    sched = default_scheduler(sc.engine)
    # attention DP with balancing: the ranks' prompts share one prefill iteration, each a share of
    # it (the routed experts see all their tokens: the iteration costs more than one prompt's)
    together = prompts_together(sc, est.deployment)
    share = shared_prefill(est.deployment, together, isl)
    ranks = est.deployment.parallel.attention_groups
    if together == 1 and not sched.mixed_prefill:
        # each rank runs its prompts before its decodes (under attention DP the others decode beside them)
        pts = prefill_first_points(loads, tpot, est.prefill_1_s, *_extra_prompt(est, ranks, isl), ranks, osl)
        return pts, pts.ttft_s, together, share  # (a prefill iteration: what a token's gap is made of)
    # where the engine mixes decodes into the prompts' iterations, each of those shares with the
    # decodes what neither adds to the other (the weights read; a mixture's experts both touch)
    shared_s = np.interp(loads, _BATCHES, est.shared_step_s)
    stall = mixed_stall_s(est.prefill_1_s, est.prefill_iterations, shared_s) if sched.mixed_prefill \
        else np.full(loads.shape, est.prefill_1_s)
    pts = operating_points(loads, tpot, est.prefill_1_s * share, isl, osl, budget, stall_s=stall * share)
    # (attention-DP balancing holds prompts until every rank has one, or for its timeout's iterations)
    hold = sched.balance_timeout_iters * tpot if together > 1 else 0.0
    pts, stall = batched_prompts(est, loads, tpot, pts, stall, isl, osl, budget, together, hold)
    # (balanced: a rank's share of a shared iteration)
    return replace(pts, prefill_share=pts.prefill_share * share), stall, together, share


def _extra_prompt(est: Any, ranks: int, isl: float) -> tuple[float, int]:
    """What each prompt beyond the first adds to a prefill iteration [s], and how many one takes:
    under attention DP one on each rank (their share of an iteration that prefills one a rank);
    else a token budget's worth, each adding what a second adds (:func:`~.curve.next_prompt_s`:
    nothing while the iteration's kernels take longer to issue than to run)."""
    if ranks > 1:
        one = est.prefill_1_s
        return one * (ranks * shared_prefill(est.deployment, ranks, isl) - 1.0) / (ranks - 1), ranks
    return est.next_prompt_s, max(int(est.batched_prompts), 1)


def batched_prompts(est: Any, loads: np.ndarray, tpot: np.ndarray, pts: OperatingPoints, stall: np.ndarray,
                    isl: float, osl: float, budget: float, ranks: int = 1, hold_s: np.ndarray | float = 0.0
                    ) -> tuple[OperatingPoints, np.ndarray]:
    """The operating points with the prompts that arrive during an iteration prefilled
    together in the next, each at its share (:func:`~.fluid.batched_prompt_s`), and the
    stall each adds to the decodes (the decode step a mixed iteration carries shared by its
    prompts): prompts per iteration ``lambda tau`` and the rate settle together, in a few rounds.
    Where attention-DP balancing holds prompts until each of the ``ranks`` has one or for
    ``hold_s``, an iteration with prompts carries no fewer than ``min(ranks, 1 + lambda hold)``."""
    alone, saved = est.prefill_1_s, est.prefill_1_s - stall  # (saved: the decode step a mixed iteration carries)
    for _ in range(BATCHING_ROUNDS):
        together = pts.rate * pts.tpot_s  # prompts arriving during one iteration (a token's time under load)
        least = np.minimum(ranks, 1.0 + pts.rate * hold_s)
        cost = batched_prompt_s(alone, est.batched_prefill_s, est.batched_prompts, together, least)
        # the decode step a mixed iteration carries, paid once an iteration
        stall_n = np.maximum(cost - saved * shared_per_prompt(together, est.batched_prompts, least), 0.0)
        pts = operating_points(loads, tpot, cost, isl, osl, budget, stall_s=stall_n)
    # the prompt queue's busy share as admission_wait_s reads it: theirs one by one (it takes them batched)
    return replace(pts, prefill_share=pts.rate * alone, stall_share=pts.stall), stall_n
