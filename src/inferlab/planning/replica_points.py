"""One replica's fluid operating points as its engine schedules prompts beside decodes.

Three ways, by the engine's scheduler (:mod:`inferlab.engines.scheduler`): prompts run before
the decodes, each rank's own (SGLang: :mod:`.prefill_first`); mixed into the decodes'
iterations, the prompts that arrive during one iteration prefilled together in the next
(vLLM, TensorRT-LLM: :func:`batched_prompts`); and under
TensorRT-LLM's attention-DP balancing, held until every rank has one (:mod:`.attention_dp`).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
from scipy.special import gammaincc

from ..engines.scheduler import default_scheduler
from .attention_dp import prompts_together, release_share, shared_prefill
from .curve import _BATCHES
from .fluid import OperatingPoints, mixed_stall_s
from .prefill_first import prefill_first_points, prefill_iterations
from .scenario import Scenario

#: Prompts an iteration carries on average, the grid each concurrency's steady state is read
#: off (8 a decade: neighbours 33% apart, read between them in log).
PROMPTS_GRID = np.logspace(-5.0, 4.0, 73)

#: Passes between the share of iterations that carry prompts and the rate they imply (the
#: balancing timeout, the chain of decode and prefill iterations), each halfway to the next
#: value: within 0.5% of the fixed point by the third (rate and TPOT over the answers of 2-300 tokens tried).
CHAIN_PASSES = 3


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
    # (attention-DP balancing holds prompts until every rank has one, or for its timeout's iterations)
    hold = sched.balance_timeout_iters * tpot if together > 1 else 0.0
    pts, stall = batched_prompts(est, loads, tpot, stall, isl, osl, budget, together, hold)
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


def batched_prompts(est: Any, loads: np.ndarray, tpot: np.ndarray, stall: np.ndarray,
                    isl: float, osl: float, budget: float, ranks: int = 1, hold_s: np.ndarray | float = 0.0
                    ) -> tuple[OperatingPoints, np.ndarray]:
    """The operating points with the prompts that arrive during an iteration prefilled
    together in the next, each at its share (:func:`_prompt_cost_s`), and the stall each adds
    to the decodes (the decode step a mixed iteration carries shared by its prompts); where
    attention-DP balancing holds prompts until each of the ``ranks`` has one or for ``hold_s``,
    released as :func:`_shared_paid` has it.

    Solved in the prompts an iteration carries, ``mu``: a prompt then stalls the decodes by
    ``e(mu)``, a token takes ``tau = d + mu e(mu)`` (the decode step and what its prompts add),
    the rate is ``mu / tau`` and Little's law gives the requests in flight, ``lambda (t_pf(mu) +
    (osl - 1) tau)`` (``t_pf`` the prompts' part of the iteration a prompt is prefilled in, not its
    share of it), which grow with ``mu``: each concurrency's ``mu`` is read off a grid of them
    (:data:`PROMPTS_GRID`). It is the steady state of :mod:`.fluid`'s quadratic with the cost
    and the stall at their own ``mu``; iterating the two (three rounds, the quadratic's share
    ``lambda t_pf`` below 1) stopped where every iteration carries prompts and its fixed part
    (an eager prefill's kernel issue) is shared by them all, there ``lambda t_pf`` reads 1 at
    every rate: gpt-oss-120b over two B200s
    (TensorRT-LLM's PyTorch runtime, attention DP balanced), 200/200, had a capacity of 94 req/s
    where the simulation keeps up at 200 (tests/test_planning_attention_dp.py)."""
    alone, most = est.prefill_1_s, est.batched_prompts
    col = lambda v: np.broadcast_to(np.asarray(v, float), np.shape(loads))[:, None]  # noqa: E731
    d, stalls, hold = col(tpot), col(stall), col(hold_s)

    def at(mu: np.ndarray) -> tuple[np.ndarray, ...]:
        rate = mu / d
        paid = _shared_paid(mu, rate * hold, ranks, most)
        for i in range(CHAIN_PASSES):  # (halfway each pass: the plain iteration can settle in a 2-cycle)
            # (the prompts' spread about their mean in the last pass: it moves the share little)
            each, spent = _prompt_cost_s(est, stalls, paid, ranks <= 1 and i == CHAIN_PASSES - 1)
            tau = d + mu * each
            rate = mu / tau
            paid = 0.5 * (paid + _shared_paid(mu, rate * hold, ranks, most, rate * d, rate * (d + each / paid)))
        return each, tau, rate, spent

    grid = np.broadcast_to(PROMPTS_GRID, (np.size(loads), PROMPTS_GRID.size))
    each, tau, rate, spent = at(grid)
    held = rate * (spent + max(osl - 1.0, 0.0) * tau)  # requests in flight at each mu, rising with it
    # each concurrency's point read off the grid between its neighbours, in log (the rates and
    # times are near powers of mu there), as the requests in flight meet it
    at_load = _reader(held, np.ravel(loads))
    each, tau, rate, spent = (at_load(v) for v in (each, tau, rate, spent))
    iterations = np.ceil(isl / np.maximum(budget - loads, 1.0))
    pts = OperatingPoints(np.asarray(loads, float), rate, tau, spent + iterations * np.ravel(d), rate * alone,
                          rate * each)
    # the prompt queue's busy share as admission_wait_s reads it: theirs one by one (it takes them batched)
    return pts, each


def _reader(held: np.ndarray, loads: np.ndarray) -> Any:
    """Reads a grid of values (rows x :data:`PROMPTS_GRID`) at each row's ``mu`` where the
    requests in flight ``held`` (rising along the grid) reach its load: between the two grid
    points about it, linear in log of both (the grid's ends beyond them)."""
    hi = np.clip((held < loads[:, None]).sum(axis=1), 1, PROMPTS_GRID.size - 1)
    rows = np.arange(loads.size)
    lo_h, hi_h = (np.log(np.maximum(held[rows, k], 1e-300)) for k in (hi - 1, hi))
    w = np.clip((np.log(np.maximum(loads, 1e-300)) - lo_h) / np.where(hi_h > lo_h, hi_h - lo_h, 1.0), 0.0, 1.0)

    def read(values: np.ndarray) -> np.ndarray:
        a, b = (np.log(np.maximum(values[rows, k], 1e-300)) for k in (hi - 1, hi))
        return np.where(values[rows, hi] > 0, np.exp(a + w * (b - a)), values[rows, hi - 1] * (1 - w))

    return read


def _shared_paid(mu: np.ndarray, timed_out: np.ndarray | float, ranks: int, most: int,
                 in_decode: np.ndarray | None = None, in_prefill: np.ndarray | None = None) -> np.ndarray:
    """The share of a prefill iteration each prompt pays (of its fixed part, of the decode step a
    mixed one carries): the iterations that carry prompts over the prompts, ``mu`` arriving during
    an iteration on average. With one rank any waiting prompt is prefilled in the next iteration:
    ``(1 - e^-mu) / mu`` (an iteration with any over the prompts), or, given the prompts arriving
    during a decode iteration and during a prefill one (``lambda d``, ``lambda p``), the two-state
    chain's share of prefill iterations (:func:`~.prefill_first.prefill_iterations`) over ``mu``:
    prompts arrive more often during the longer ones, and ``1 - e^-mu`` of the mean iteration had put
    prompts in 70% of Llama-3.1-8B's iterations at 60 req/s (TensorRT-LLM's PyTorch runtime on
    an H100, 200/200) where the simulation puts them in 59%. Under attention-DP balancing
    ``ranks`` of them or more at a time (:func:`~.attention_dp.release_share`), or the ``1 +
    timed_out`` that arrive within its timeout (``lambda x hold``) where that releases them
    first. At most a budget's worth an iteration on each rank."""
    least = 1.0 / max(int(most), ranks, 1)  # (np.minimum/np.maximum: np.clip costs twice as much here)
    if ranks <= 1:
        if in_decode is None or in_prefill is None:
            return np.maximum(release_share(mu, 1), least)
        prefills = prefill_iterations(in_decode, in_prefill)
        return np.minimum(np.maximum(prefills / np.maximum(mu, 1e-300), least), 1.0)
    return np.minimum(np.maximum(np.maximum(release_share(mu, ranks), 1.0 / (1.0 + timed_out)), least), 1.0)


def _beyond(gap: np.ndarray, slope: np.ndarray | float, m: np.ndarray) -> np.ndarray:
    """``E[(slope K - gap)+]`` for ``K`` Poisson of mean ``m``: what an iteration's work adds
    where it outlasts the rest (``K`` prompts beyond the first, each ``slope`` more of it than
    of the rest, ``gap`` the first's lead). With ``a = gap / slope`` and ``j = floor(a)``,
    ``E[(K - a)+] = m - a + a P(K <= j) - m P(K <= j - 1)``, ``P(K <= j)`` the regularized upper
    incomplete gamma function ``Q(j + 1, m)``."""
    slope = np.broadcast_to(np.asarray(slope, float), np.shape(gap))
    lead = (gap > 0.0) & (slope > 1e-12 * gap)  # (past 10^12 prompts: nothing)
    a = np.where(lead, gap / np.where(lead, slope, 1.0), 0.0)
    j = np.floor(a)
    below = a * gammaincc(j + 1.0, m) - m * np.where(j >= 1.0, gammaincc(np.maximum(j, 1.0), m), 0.0)
    tail = np.where(lead, slope * np.maximum(m - a + below, 0.0), 0.0)
    return np.where(gap > 0.0, tail, slope * m - gap)


def _prompt_cost_s(est: Any, stall: np.ndarray, paid: np.ndarray, spread: bool = False
                   ) -> tuple[np.ndarray, np.ndarray]:
    """A prompt's share of what the iterations that prefill prompts, ``1 / paid`` of them in
    each, add to the decodes' iterations, and its own prefill time (its iteration's) [s].

    Alone, a prompt's iteration lasts ``p_1`` and adds ``e = stall`` to the decodes' (its
    prefill less what it shares with them: :func:`~.fluid.mixed_stall_s`). ``c``, the slope of the
    line through ``p_1`` and a budget-filling batch of ``k`` prompts (``k p_k``,
    :func:`~.curve.batched_prefill_s`), is what a prompt's own work adds to an iteration; a further
    prompt adds ``m``: ``c`` where prefill is compute-bound (an iteration of ``n`` costs ``F + n c``,
    ``F`` shared: the weights read, the host's work; Poisson arrivals batched so had let a fluid
    Qwen3-30B-A3B FP8 on a B200 keep up at 75 req/s where one prompt an iteration stopped at 56,
    as the simulation, batching them, does), and nothing while the iteration's kernels take
    longer to issue than to run (:func:`~.curve.next_prompt_s`), but ``n`` of them no less than
    their work: ``max(p_1 + (n - 1) m, n c)`` and ``max(e + (n - 1) m, n c)``. Llama-3.1-8B FP8
    on an H100 (TensorRT-LLM's PyTorch runtime), 200-token prompts: 20.5 ms alone or four
    together beside 190 decodes (the simulation's iterations at 60 req/s), beside 826 decodes
    their 23.2 ms and 2.9 ms a prompt (at 120 req/s: the decodes' work is past the issue time,
    and each prompt adds its own); the line alone had charged the first 2.5 ms for every prompt
    beyond one. Where a prompt fills the token budget each further one is an iteration of its
    own (its own time that iteration's).

    With ``spread`` the prompts an iteration carries vary about ``n`` (one and a Poisson number
    more, :func:`_beyond`): the mean of the larger of two lines is more than the larger at the
    mean where the issue time and the work cross, and a prompt sits in a larger iteration than
    the mean one (size-biased). The same Llama-3.1-8B at 100 and 110 req/s: fluid TPOT 6% and 11%
    under the simulation's -> 3% and 7%."""
    alone, k, batched = est.prefill_1_s, max(int(est.batched_prompts), 1), est.batched_prefill_s
    n = 1.0 / paid
    if k == 1:
        return paid * (stall + (n - 1.0) * alone), np.full(np.shape(paid), float(alone))
    # (a batch of k costs no less than one alone; where it costs k alone, n prompts cost n alone)
    line = max((k * batched - alone) / (k - 1.0), 0.0)
    added = line if not np.isfinite(est.next_prompt_s) else min(float(est.next_prompt_s), line)
    if not spread:
        each = paid * np.maximum(stall + (n - 1.0) * added, n * line)
        return each, np.maximum(alone + (n - 1.0) * added, n * line)
    # 1 + K prompts, K Poisson of mean x = n - 1: an iteration costs max(a + added K, line (1 + K))
    # = a + added K + (slope K - (a - line))+; a prompt's own iteration is the size-biased one,
    # E[N h(N)] / E[N] = (E[h(1 + K)] + x E[h(2 + K)]) / (1 + x) (E[K f(K)] = x E[f(K + 1)])
    x, slope = np.maximum(n - 1.0, 0.0), line - added
    each = paid * (stall + added * x + _beyond(stall - line, slope, x))
    first = alone + added * x + _beyond(alone - line, slope, x)
    second = alone + added * (1.0 + x) + _beyond(alone + added - 2.0 * line, slope, x)
    return each, (first + x * second) / (1.0 + x)
