"""Attention data parallelism in the fluid model: how many prompts share a prefill iteration and
how long a prompt is held for them.

Under attention DP each rank prefills its own prompts, and every rank's decodes wait for the
iteration (the routed experts' all-to-all joins them). Where the engine holds new prompts until
every rank has one (TensorRT-LLM's ``attention_dp_config`` balancing, as NVIDIA's DeepSeek-R1
recipes set it; :attr:`~inferlab.engines.scheduler.SchedulerConfig.balance_timeout_iters`: as many
prompts waiting as there are ranks, or the timeout's iterations), the ranks' prompts share one
iteration, and each stalls the decodes by its share of it, after a hold;
elsewhere each prompt's prefill runs in an iteration of its own: mixed with every rank's decodes
(vLLM, TensorRT-LLM without balancing), or on its rank before that rank's decodes while the other
ranks decode (SGLang: :mod:`.prefill_first`). The serving simulation runs them all
(:mod:`inferlab.serving.admission`, :mod:`inferlab.serving.iteration`).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import numpy as np
from scipy.special import gammaincc

from ..engines.scheduler import default_scheduler
from ..techniques.step import prefill
from .prefill_first import poisson_below
from .ttft_mix import TAIL_EDGES
from .scenario import Scenario


def prompts_together(sc: Scenario, dep: Any) -> int:
    """Prompts that share one prefill iteration under attention DP: one a rank where the engine
    holds new prompts until there is one for every rank (TensorRT-LLM's attention-DP balancing,
    ``balance_timeout_iters``), else 1 (each prompt's prefill in an iteration of its own beside the
    decodes; queued prompts do share iterations, which the simulation sizes)."""
    ranks = dep.parallel.attention_groups
    return ranks if ranks > 1 and default_scheduler(sc.engine).balance_timeout_iters > 0 else 1


def shared_prefill(dep: Any, together: int, isl: float) -> float:
    """A prompt's share of an iteration that prefills ``together`` prompts of ``isl`` tokens, over
    one prompt's prefill alone: ``1 / together`` of their batch's prefill (one a rank, the routed
    experts over all their tokens), 1 for one prompt."""
    if together == 1:
        return 1.0
    one, many = (float(np.ravel(prefill(dep, np.array(float(n)), np.array(float(isl))).time_s)[0])
                 for n in (1, together))
    return many / (together * one)


def depth_imbalance(dep: Any, ranks: int, isl: float) -> float:
    """How much longer ``ranks`` prompts' shared prefill lasts with the ranks at independent depths
    of their prompts (dealt round robin, unbalanced) than side by side (:func:`shared_prefill`'s):
    every iteration waits for its deepest rank's attention, and of ``n`` ranks at uniform depths
    the deepest is at ``n / (n + 1)`` of its prompt against the mean ``1 / 2``, so the attention
    share of the iteration grows ``2n / (n + 1)`` times (1.78 for eight ranks); the other ops (the
    routed experts over all ranks' tokens, the dense layers) do not depend on depth. (Prompts of
    one iteration each start together: the caller applies it to prompts that span chunks.)"""
    if ranks <= 1:
        return 1.0
    step = prefill(dep, np.array(float(ranks)), np.array(float(isl)))
    attention = sum(float(np.ravel(t.total_s)[0]) for t in step.times if t.op.kind == "attention")
    return 1.0 + attention * (2.0 * ranks / (ranks + 1) - 1.0) / float(np.ravel(step.time_s)[0])


#: Bisections of the balancing hold's quantiles (2^-40 of the timeout).
HOLD_BISECTIONS = 40


def balancing_hold_s(sc: Scenario, together: int, rate: np.ndarray, decode_step_s: np.ndarray) -> np.ndarray:
    """The hold of attention-DP balancing at :data:`TAIL_EDGES` (points x levels) [s]: a prompt
    waits for the arrivals that give every rank one, at most the engine's ``balance_timeout_iters``
    decode steps. The ``g`` prompts of a release arrive in turn: the ``j``-th of them waits for
    ``g - 1 - j`` more Poisson arrivals, an Erlang time, so the hold exceeds ``t`` with
    probability ``(1 / g) sum_{n < g} Q(n, lambda t)`` (``Q`` the regularized upper incomplete
    gamma function, 0 for ``n = 0``), whose quantiles are found by bisection. A uniform hold up to
    ``(g - 1) / lambda`` had the right mean and half the tail: DeepSeek-V3 over eight H200s at
    10 req/s, P99 TTFT 614 ms where the simulation reads 1.3 s."""
    if together == 1:
        return np.zeros((np.size(rate), TAIL_EDGES.size))
    lam = np.maximum(np.asarray(rate, float), 1e-12)[:, None]
    timeout = (default_scheduler(sc.engine).balance_timeout_iters * np.asarray(decode_step_s, float))[:, None]
    n = np.arange(1, together, dtype=float)
    tail = 1.0 - TAIL_EDGES[None, :]  # (a hold beyond the timeout is cut to it: the top levels sit there)
    lo, hi = np.zeros(np.broadcast_shapes(lam.shape, tail.shape)), np.broadcast_to(timeout, (lam.shape[0], tail.size))
    for _ in range(HOLD_BISECTIONS):
        mid = (lo + hi) / 2.0
        beyond = gammaincc(n, (lam * mid)[..., None]).sum(axis=-1) / together
        lo, hi = np.where(beyond > tail, mid, lo), np.where(beyond > tail, hi, mid)
    return hi


#: Prompts arriving during an iteration, the grid :func:`release_share` is tabulated on (16 a
#: decade, read between its points in log).
ARRIVALS_GRID = np.logspace(-6.0, 4.0, 161)


def release_share(mu: np.ndarray, ranks: int) -> np.ndarray:
    """Iterations that release held prompts, over the prompts, where ``mu`` arrive during an
    iteration on average and the engine releases them once ``ranks`` are waiting [1]: the share
    of a prefill iteration's fixed part each prompt pays. ``(1 - e^-mu) / mu`` for one rank (any
    prompt is released); ``1 / g`` while few arrive an iteration (every release is ``g`` of
    them); ``1 / mu`` where many do. Between, the waiting count at each iteration's start is a
    Markov chain on ``0 .. g - 1`` (Poisson arrivals added; ``g`` or more released, back to
    none), whose stationary release probability ``r`` gives ``r / mu`` (:func:`_release_table`,
    cached by ``ranks``). Taking ``min((1 - e^-mu) / mu, 1 / g)`` had released ``g`` at most:
    gpt-oss-120b over two B200s (TensorRT-LLM's PyTorch runtime, attention DP balanced), 200/200
    at 60 req/s, 1.5 prompts an iteration, releases of 2.6 on average where it read 2."""
    m = np.maximum(np.asarray(mu, float), 1e-300)
    if ranks <= 1:
        return np.minimum(-np.expm1(-m) / m, 1.0)
    # (read in log-log between the grid's points: monotone where the table is; below it 1 / g)
    share = np.interp(np.log(m), np.log(ARRIVALS_GRID), np.log(_release_table(int(ranks)) / ARRIVALS_GRID))
    return np.minimum(np.exp(share), 1.0)


@lru_cache(maxsize=16)
def _release_table(ranks: int) -> np.ndarray:
    """The stationary share of iterations that release prompts at each :data:`ARRIVALS_GRID` point."""
    pmf = poisson_below(ARRIVALS_GRID, ranks)  # P(A = n), n < g
    beyond = np.clip(1.0 - np.cumsum(pmf, axis=1), 0.0, 1.0)  # P(A > n)
    moves = np.zeros((ARRIVALS_GRID.size, ranks, ranks))
    for w in range(ranks):
        moves[:, w, w:] = pmf[:, : ranks - w]
        moves[:, w, 0] += beyond[:, ranks - 1 - w]  # g - w or more arrive: all released
    # the stationary distribution: pi (M - I) = 0 with its entries summing to one
    system = np.swapaxes(moves, 1, 2) - np.eye(ranks)
    system[:, -1, :] = 1.0
    rhs = np.zeros((ARRIVALS_GRID.size, ranks, 1))
    rhs[:, -1, 0] = 1.0
    pi = np.linalg.solve(system, rhs)[..., 0]
    return np.einsum("aw,aw->a", pi, beyond[:, ::-1])  # release from w: more than g - 1 - w arrive
