"""A static batch's prefill run eagerly or in piecewise CUDA graphs.

An engine that captures CUDA graphs for decode batches only runs each prefill chunk eagerly: the
host issues its kernels one by one, so a chunk lasts at least their issue time
(:func:`~inferlab.core.timing.eager_floor`), and a prefill in ``n`` chunks issues ``n`` times the
kernels. Piecewise CUDA graphs (SGLang's ``--piecewise-cuda-graph-max-tokens``, TensorRT-LLM's
``capture_num_tokens``) replay the layers between the attention kernels for iterations of up to a
number of tokens; those chunks cost their GPU work alone. The serving simulation applies the same
rule per iteration (:class:`~inferlab.serving.stepmodel.StepModel`).

Two limits of the model, kept as they are: a static batch's prefill counts as graphed only where
its largest chunk (the token budget, or the whole batch's prompts) fits the limit, so a prefill
whose last, shorter chunk would fit pays the eager floor for every chunk (conservative; serve
graphs each iteration that fits). And under attention DP the limit is compared with the whole
replica's tokens in an iteration, not one rank's share of them, which an engine capturing per rank
would graph sooner (SGLang turns piecewise graphs off under DP attention unless enforced:
:mod:`~inferlab.engines.piecewise_graphs`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..core.timing import broadcast_sum, eager_floor, step_total
from .step import ResolvedDeployment, StepResult, prefill


def prefill_graphed(dep: ResolvedDeployment, tokens: Any, limit: int | None) -> np.ndarray:
    """Where a prefill iteration of ``tokens`` tokens [token] runs in piecewise CUDA graphs: at
    most ``limit`` tokens (None: nowhere), on a deployment that runs CUDA graphs at all."""
    if limit is None or not dep.cuda_graphs:
        return np.zeros(np.shape(tokens), bool)
    return np.asarray(tokens, float) <= limit


def _floor_terms(dep: ResolvedDeployment, pre: StepResult) -> tuple[np.ndarray, float, np.ndarray]:
    """The prefill step's GPU work [s], its eager floor [s], and the stages and micro-batches the
    step passes through, as :func:`~inferlab.techniques.step.run_step` counted them."""
    totals = [t.total_s for t in pre.times]
    stage = step_total(totals, pre.kernels, dep.profile, cuda_graphs=dep.cuda_graphs, phase="prefill")
    return broadcast_sum(totals), eager_floor(pre.kernels, dep.profile), pre.time_s / stage


def graphed_prefill(dep: ResolvedDeployment, pre: StepResult, graphed: Any) -> StepResult:
    """``pre`` with its time, where ``graphed`` (:func:`prefill_graphed`), its GPU work and step
    overhead without the eager floor [s]."""
    if not np.any(graphed) or not eager_floor(pre.kernels, dep.profile):
        return pre
    gpu, floor, passes = _floor_terms(dep, pre)
    time_s = np.where(graphed, pre.time_s - passes * (np.maximum(gpu, floor) - gpu), pre.time_s)
    return StepResult(pre.step, pre.ops, pre.times, time_s)


def chunked_prefill_s(dep: ResolvedDeployment, pre: StepResult, chunks: Any, graphed: Any = False,
                      budget: Any = None) -> np.ndarray:
    """A batch's prefill run in ``chunks`` iterations [s]: the one prefill step's time and a step
    overhead for each further chunk. An engine that prefills eagerly also issues every chunk's
    kernels, so the host's issue time grows with the chunks until it outlasts the GPU's work
    (:func:`~inferlab.core.timing.eager_floor`); where ``graphed`` (:func:`prefill_graphed`) the
    chunks replay piecewise CUDA graphs and the GPU's work alone counts. ``pre`` is the step as
    run eagerly.

    Each chunk is a step of its own, which reads the weights again: with an iteration's token
    ``budget`` [token] the prefill takes at least ``chunks - 1`` steps of a full budget (each
    attention-DP rank its share, made of the prompts' pieces, whole prompts where they are shorter,
    their attention over the piece alone: a lower bound). A small
    budget makes it weight-bound (Llama-3.1-70B FP8 on 4 H100s: an 8,192-token prompt in 32-token
    chunks is 256 reads of 18 GB a GPU, at least 1.4 s, not one step's 0.8 s)."""
    chunks = np.asarray(chunks, float)
    out = pre.time_s + (chunks - 1.0) * dep.profile.step_overhead_s
    if eager_floor(pre.kernels, dep.profile):
        gpu, floor, passes = _floor_terms(dep, pre)
        eager = out + passes * np.maximum(chunks * floor - np.maximum(gpu, floor), 0.0)
        out = np.where(graphed, out - passes * (np.maximum(gpu, floor) - gpu), eager) if np.any(graphed) else eager
    if budget is None or not np.any(chunks > 1.0) or dep.parallel.pp > 1:  # stages overlap the chunks
        return out
    g = dep.parallel.attention_groups
    share = np.maximum(np.asarray(budget, float) / g, 1.0)  # a rank's tokens an iteration
    piece = np.minimum(np.asarray(pre.step.new_tokens, float), share)  # a prompt's part of it, or all of it
    full = prefill(dep, g * share / piece, piece)  # those pieces, their attention over themselves alone
    return np.maximum(out, (chunks - 1.0) * graphed_prefill(dep, full, graphed).time_s)
