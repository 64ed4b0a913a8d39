"""Notes under an estimate's table: what its numbers assume that a reader could misread.

Each function returns one line or none for the grid's points that run: a batch that leaves
data-parallel replicas idle, prompts the engine would prefill whole, a batch run in waves.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

import numpy as np

from ..engines.scheduler import default_scheduler, prompt_cap

if TYPE_CHECKING:
    from .result import Estimate


def _running(est: Estimate, values: Any) -> np.ndarray:
    """``values`` at the grid's points that run, flat."""
    shape = np.shape(est.ttft_s)
    runs = np.ravel(np.broadcast_to(est.feasible, shape))
    return np.ravel(np.broadcast_to(np.asarray(values, float), shape))[runs]


def idle_notes(est: Estimate) -> list[str]:
    """Where the grid's smallest batch that runs leaves data-parallel replicas or attention ranks
    without a sequence (priced all the same): one line, or none."""
    par = est.deployment.parallel
    ranks = par.dp * (par.attention_groups if par.attention_dp else 1)
    batch = _running(est, est.batch_size)
    if ranks <= 1 or not batch.size or batch.min() >= ranks:
        return []
    what = "attention data-parallel ranks" if par.attention_dp else "data-parallel replicas"
    least = float(batch.min())
    return [f"idle capacity: a batch of {least:,.0f} over {ranks:,} {what} leaves {ranks - least:,.0f} of them without "
            f"a sequence; the cost counts all {est.deployment.num_gpus:,} GPUs (fewer {what.split()[-1]} serve it for less)"]


def whole_prompt_notes(est: Estimate, isl: Any = None) -> list[str]:
    """Where the engine prefills prompts whole and refuses one past its budget (TensorRT-LLM,
    :func:`~inferlab.engines.scheduler.prompt_cap`) while the estimate chunks the grid's longer
    prompts (or the prompt length ``isl``, one point's): one line naming them, or none."""
    sched = est.scheduler or default_scheduler(est.engine)
    cap = prompt_cap(sched if est.max_num_tokens is None else replace(sched, max_num_batched_tokens=est.max_num_tokens))
    if isl is None:  # the grid's points that run
        isl = _running(est, est.isl)
    isl = np.ravel(np.asarray(isl, float))
    longer = sorted({float(x) for x in isl[isl > cap]}) if cap is not None else []
    if not longer:
        return []
    named = ", ".join(f"{x:,.0f}" for x in longer) if len(longer) <= 4 else f"{longer[0]:,.0f} to {longer[-1]:,.0f}"
    return [f"whole prompts: {est.engine} prefills each prompt whole unless chunked prefill is on "
            f"(enable_chunked_prefill) and refuses one longer than its max_num_tokens ({cap:,}); this estimate "
            f"prefills the {named}-token prompts in chunks of it, as with chunking "
            "on (serve refuses them without chunked_prefill=True or a budget that holds them)"]


def wave_notes(est: Estimate) -> list[str]:
    """Where a batch runs in waves (the engine holds fewer sequences at once than it has): one
    line saying how, that the TPOT is then the mean over waves of at most that many (lower as
    the engine holds fewer: a smaller wave decodes faster) and the TTFT includes the wait for
    the earlier waves; the total time and throughput count every wave."""
    waves, batch, held = (_running(est, v) for v in (est.waves, est.batch_size, est.wave_batch))
    many = np.flatnonzero(waves > 1)
    if not many.size:
        return []
    j = many[0]
    at = f"a batch of {batch[j]:,.0f} runs in {waves[j]:,.0f} waves of up to {held[j]:,.0f}" + (
        f" (and {many.size - 1} more grid point(s) in waves)" if many.size > 1 else "")
    return [f"waves: {at}, all the engine holds at once (its KV cache, state slots or sequence limit); the TPOT is "
            "the mean over those waves, lower when fewer are held (a smaller wave decodes faster), and the TTFT "
            "includes the wait for the earlier waves: compare deployments by tok/s or total time"]


#: Grid points an estimate's table shows (in the text and in Jupyter); to_frame() and to_dict() hold them all.
SHOWN_ROWS = 200


def estimate_tail(est: Any) -> list[str]:
    """The lines under an estimate's table: the points past :data:`SHOWN_ROWS`, those that do not run, notes."""
    n = int(np.size(est.ttft_s))
    more = [f"... {n - SHOWN_ROWS:,} more points (to_frame() and to_dict() hold them all)"] if n > SHOWN_ROWS else []
    return more + est.infeasible_lines(SHOWN_ROWS) + est.notes
