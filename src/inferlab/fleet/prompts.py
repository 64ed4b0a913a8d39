"""Requests an engine refuses as too long, in a fleet.

An engine answers with an error a request longer (prompt plus output) than its
``max_model_len`` or the model's trained positions (unless the pool allows long context), and
one whose prompt is longer than its budget where it prefills prompts whole (TensorRT-LLM
without chunked prefill: :func:`~inferlab.engines.scheduler.prompt_cap`); it serves the
others, as :func:`~inferlab.serving.replica.taken` says for one replica. A fleet routes such a
request to a pool whose engine takes it, or ends it ``too long`` (a conversation's later turns
are then not sent). A fleet is refused whole only where no request could be served, or where a
pool's ``max_model_len`` is past the model's positions (a server refuses to start).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from ..checks import engine_context_within_model
from ..engines.scheduler import prompt_cap
from ..serving.replica import check_context, taken


def _model(pool: Any) -> Any:
    return pool.kind.model.dep.model


def _ranks(pool: Any) -> int:
    return pool.kind.model.dep.parallel.attention_groups


def serves(pools: Any, requests: Any) -> list[np.ndarray]:
    """Per pool, which requests ask for its model."""
    n = len(requests.isl)
    return [np.ones(n, bool) if requests.model is None or not p.model else
            (requests.model == p.model) | (requests.model == "") for p in pools]


def pool_takes(pools: Any, isl: Any, osl: Any) -> list[np.ndarray]:
    """Per pool, which requests its engine takes (:func:`~inferlab.serving.replica.taken`)."""
    return [taken(_model(p), p.kind.sched, isl, osl, p.allow_long_context, _ranks(p)) for p in pools]


def check_pools_take(pools: Any, requests: Any) -> None:
    """Refuse a pool whose ``max_model_len`` is past its model's positions, and a fleet where no
    request of some model is taken by a pool serving it (in that pool's words: past its
    ``max_model_len``, the model's positions or its unchunked budget), as ``serve`` refuses a
    run none of whose requests its engine takes."""
    isl, osl = np.asarray(requests.isl, float), np.asarray(requests.osl, float)
    for p in pools:
        engine_context_within_model(_model(p), p.kind.sched.max_model_len, allow_long_context=p.allow_long_context)
    mine = serves(pools, requests)
    taken_somewhere = np.zeros(len(isl), bool)
    for m, t in zip(mine, pool_takes(pools, isl, osl)):
        taken_somewhere |= m & t
    asked = [requests.model == name for name in np.unique(requests.model)] if requests.model is not None else \
        [np.ones(len(isl), bool)]
    for want in asked:  # each model's requests (a request naming none goes anywhere)
        if not want.any() or taken_somewhere[want].any():
            continue
        for p, m in zip(pools, mine):  # (raises: each of the pool's requests of that model is refused)
            if (m & want).any():
                check_context(_model(p), p.kind.sched, isl[m & want], osl[m & want],
                              allow_long_context=p.allow_long_context, ranks=_ranks(p))


def too_long_note(pools: Any, requests: Any, status: Any, too_long: int) -> tuple[str, ...]:
    """What the requests ended ``too long`` mean and what would take them."""
    ended = np.asarray(status) == too_long
    n = int(np.count_nonzero(ended))
    if not n:
        return ()
    isl, osl = np.asarray(requests.isl, float), np.asarray(requests.osl, float)
    context, prompt = np.zeros(len(isl), bool), np.zeros(len(isl), bool)
    for p, m in zip(pools, serves(pools, requests)):
        fits = taken(_model(p), replace(p.kind.sched, prompt_within_budget=False), isl, osl, p.allow_long_context, 1)
        cap = prompt_cap(p.kind.sched, _ranks(p))
        context |= m & ~fits
        if cap is not None:
            prompt |= m & (isl > cap)
    prompt &= ~context  # (each counted once: a request past both limits is said to be past the context)
    why = []
    if (k := int(np.count_nonzero(ended & context))):
        why.append(f"{k:,} longer (prompt plus output) than a pool's max_model_len or the model's positions (raise "
                   "max_model_len; past the positions only with RoPE scaling: allow_long_context)")
    if (k := int(np.count_nonzero(ended & prompt))):
        why.append(f"{k:,} with a prompt past an engine's token budget where it prefills prompts whole and refuses "
                   "longer ones (TensorRT-LLM without chunked prefill: give the pool chunked_prefill: true, "
                   "enable_chunked_prefill: true, or a larger max_num_batched_tokens)")
    later = "; a conversation's later turns are then not sent" if np.any(requests.next_turn >= 0) else ""
    return (f"{n:,} request(s) too long for every pool serving their model: {'; '.join(why)}{later}",)
