"""Prompts an engine refuses past its unchunked token budget, in a fleet.

An engine that prefills prompts whole and refuses one longer than its budget (TensorRT-LLM
without chunked prefill: :func:`~inferlab.engines.scheduler.prompt_cap`) answers such a request
with an error: a fleet routes it to a pool whose engine takes it, or ends it ``too long``
(a conversation's later turns are then not sent). A fleet is refused whole only where no request
could be served.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from ..engines.scheduler import prompt_cap
from ..serving.replica import check_context, check_lengths


def pool_caps(pools: Any) -> list[int | None]:
    """The longest prompt each pool's engine takes (None: any)."""
    return [prompt_cap(p.kind.sched, p.kind.model.dep.parallel.attention_groups) for p in pools]


def check_pools_take(pools: Any, models: Any, requests: Any) -> None:
    """Refuse what each pool's engine refuses for every request (past its ``max_model_len`` or
    the model's positions, :func:`~inferlab.serving.replica.check_context`), and a fleet whose
    every prompt is past the unchunked budget of every pool serving its model."""
    isl, osl = np.asarray(requests.isl, float), np.asarray(requests.osl, float)
    servable, capped = np.zeros(len(isl), bool), []
    for pool, (model, long_ok), cap in zip(pools, models, pool_caps(pools)):
        mine = np.ones(len(isl), bool) if requests.model is None or not pool.model else \
            (requests.model == pool.model) | (requests.model == "")
        check_context(model, replace(pool.kind.sched, prompt_within_budget=False), isl[mine], osl[mine],
                      allow_long_context=long_ok)
        servable |= mine if cap is None else mine & (isl <= cap)
        capped += [(pool, mine)] if cap is not None and mine.any() else []
    if len(isl) and not servable.any() and capped:  # (raises: each of that pool's prompts is past its budget)
        pool, mine = capped[0]
        check_lengths(pool.kind.sched, isl[mine], osl[mine], pool.kind.model.dep.parallel.attention_groups)


def too_long_note(status: Any, too_long: int, turns: bool) -> tuple[str, ...]:
    """What the requests ended ``too long`` mean and what would take them."""
    n = int(np.count_nonzero(np.asarray(status) == too_long))
    later = "; a conversation's later turns are then not sent" if turns else ""
    return (f"{n:,} request(s) too long: the engines serving them prefill prompts whole and refuse one longer than "
            "their token budget (TensorRT-LLM without chunked prefill); give the pool chunked_prefill: true (a "
            f"deployment's or pool's limits; enable_chunked_prefill: true) or a larger max_num_batched_tokens{later}",) \
        if n else ()
