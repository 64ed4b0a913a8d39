"""A replica's KV pool: what the weights, workspace and reserve leave a GPU, in the tokens the
serving simulation counts, and what a running request holds there beside its own tokens (a
hybrid model's state, its windowed layers' tokens), as each engine keeps them
(:mod:`~inferlab.engines.state_pool`, :mod:`~inferlab.engines.window_pool`)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..core.memory import plan_memory, recurrent_state_per_gpu, require_weights_fit, window_pool_need
from ..engines.memory_share import memory_keywords
from ..engines.scheduler import SchedulerConfig, for_hardware
from ..engines.state_pool import running_requests, separate_pool, state_page_tokens, state_pool_bytes
from ..engines.window_pool import held_windows, pool_token_share, window_tokens
from ..errors import InfeasibleError, option
from .speculation import DrafterMemory


def kv_capacity_tokens(dep: Any, sched: SchedulerConfig, drafter: DrafterMemory | None = None,
                       context: float | None = None) -> float:
    """Tokens the replica's KV pool holds: memory left after weights, workspace and reserve
    (and a speculative ``drafter``'s weights; its KV per token added to the target's), sized
    the way the engine sizes it (see :class:`SchedulerConfig`), less a hybrid model's pool of
    states where it has one; tokens of the layers that keep every token (requests of ``context``
    tokens where every layer's window is freed: :mod:`~inferlab.engines.window_pool`). ``sched``
    is the engine's as set (each rank's limits where they are a rank's), not :func:`scheduler_for`'s."""
    budget, plan = _pools(dep, sched, drafter)
    if separate_pool(dep.model, sched):  # the states' pool takes ratio / (1 + ratio) of it, or its pinned slots
        states = float(state_pool_bytes(budget, recurrent_state_per_gpu(dep.model, dep.parallel), sched,
                                        dep.parallel.attention_groups))
        per_rank = (sched.state_pool_slots or 0) // dep.parallel.attention_groups
        if sched.state_pool_slots is not None and per_rank < sched.state_slots:
            raise InfeasibleError(f"a state pool of {sched.state_pool_slots:,} slots holds {per_rank} a rank, fewer than "
                                  f"the {sched.state_slots} one running request takes: no request runs; give at least "
                                  f"{sched.state_slots * dep.parallel.attention_groups} slots (--max-mamba-cache-size)")
        if states >= budget:
            raise InfeasibleError(f"a state pool of {sched.state_pool_slots:,} slots takes {states / 1e9:.1f} GB a GPU "
                                  f"of the {budget / 1e9:.1f} GB the weights leave on {dep.hardware.id}: no KV pool is "
                                  "left; give fewer slots (--max-mamba-cache-size) or more GPUs")
        budget -= states
    return budget / _pool_token(dep, sched, plan, drafter, context) * dep.parallel.attention_groups


def _pool_token(dep: Any, sched: SchedulerConfig, plan: Any, drafter: DrafterMemory | None,
                context: float | None) -> float:
    """Bytes a GPU holds for one token of the pool the simulation counts (and a drafter's KV)."""
    return plan.kv_per_token * pool_token_share(dep.model, sched, context) + (drafter.kv_bytes_per_token
                                                                              if drafter else 0.0)


def _plan(dep: Any, sched: SchedulerConfig, drafter: DrafterMemory | None,
          context: float) -> tuple[Any, dict, SchedulerConfig]:
    """The memory plan of one GPU holding one sequence of ``context`` tokens, sized as the engine
    sizes its pools, the keywords it was sized with and the scheduler as set for the GPU."""
    sched = for_hardware(sched, dep.hardware)
    # the iteration's tokens over the replica: plan_memory gives each attention-DP rank its share
    memory = memory_keywords(sched, dep.hardware, dep.parallel, float(sched.max_num_batched_tokens),
                             drafter=drafter.method if drafter else "", model=dep.model)
    plan = plan_memory(dep.model, dep.hardware, dep.precision, parallel=dep.parallel, batch=np.array(1.0),
                       context=np.array(float(context)), kv_block_size=sched.kv_block_size,
                       extra_weight_bytes=drafter.weight_bytes if drafter else 0.0, **memory)
    return plan, memory, sched


def require_request_fits(dep: Any, sched: SchedulerConfig, prompt: float, output: float,
                         drafter: DrafterMemory | None = None) -> None:
    """Refuse a deployment where the workload's longest request (``prompt + output`` tokens) does
    not fit next to the weights, with the bytes and the smallest layout or narrower weights that
    hold it (:func:`~inferlab.core.memory.require_weights_fit`, as ``estimate`` says it)."""
    plan = _plan(dep, sched, drafter, max(float(prompt + output), 1.0))[0]
    try:
        require_weights_fit(plan, dep.model, dep.hardware, dep.parallel, dep.precision)
    except InfeasibleError as exc:
        raise InfeasibleError(f"the longest request ({prompt:,.0f} + {output:,.0f} tokens): {exc}",
                              needed_bytes=exc.needed_bytes, available_bytes=exc.available_bytes,
                              suggestion=exc.suggestion) from None


def _pools(dep: Any, sched: SchedulerConfig, drafter: DrafterMemory | None = None) -> tuple[float, Any]:
    """What the weights (and a ``drafter``'s), workspace and reserve leave a GPU for its pools [B],
    and the memory plan that says so; refused when nothing is left."""
    plan, memory, sched = _plan(dep, sched, drafter, 1.0)
    budget = float(plan.kv_budget)
    if budget <= 0:
        # the weights alone do not fit: the bytes and the smallest layout that holds them, as estimate says
        require_weights_fit(plan, dep.model, dep.hardware, dep.parallel, dep.precision)
        what = f"weights{' and drafter' if drafter and drafter.weight_bytes else ''}"
        raise InfeasibleError(f"{dep.model.id or dep.model.name} leaves no memory for a KV cache on {dep.hardware.id} "
                              f"as {dep.parallel}: {_taken(plan, what, sched.memory_sizing, memory)}; raise it, or use "
                              "more GPUs (tp) or narrower weights")
    return budget, plan


def state_tokens(dep: Any, sched: SchedulerConfig, drafter: DrafterMemory | None = None,
                 context: float | None = None) -> float:
    """KV-pool tokens a running request holds beside its own [token]: its windowed layers' in one
    pool (:func:`~inferlab.engines.window_pool.window_tokens` at ``context`` tokens, None: their
    most), and its linear-attention state where one pool holds both: its bytes over a pool token's
    (the target's KV a token and a ``drafter``'s), or with pages sized to a layer's state
    (``state_pages``) a page of that many tokens a linear layer, in tokens of all the KV layers."""
    model = dep.model
    windows = window_tokens(model, sched, context)
    hybrid = model.linear_attention is not None and not separate_pool(model, sched)
    if not windows and not hybrid:
        return 0.0
    plan = _pools(dep, sched, drafter)[1]
    token = _pool_token(dep, sched, plan, drafter, context)
    held = windows * plan.kv_per_token * model.kv_share_held_whole(held_windows(model, sched)[0])  # the windows' bytes
    if hybrid and sched.state_pages:  # pages in tokens of all the KV layers
        held += plan.kv_per_token * model.num_linear_layers * state_page_tokens(dep) / (model.num_hidden_layers
                                                                                        - model.num_linear_layers)
        token -= drafter.kv_bytes_per_token if drafter else 0.0
    elif hybrid:
        held += recurrent_state_per_gpu(model, dep.parallel)
    return held / token


def state_slots(dep: Any, sched: SchedulerConfig) -> int | None:
    """Running requests a hybrid model's state pool holds, over the replica's attention-DP ranks
    (the states' own pool: SGLang's), ``state_slots`` slots each; None where nothing but the KV
    pool limits them."""
    if not separate_pool(dep.model, sched):
        return None
    budget = _pools(dep, sched)[0]
    state = recurrent_state_per_gpu(dep.model, dep.parallel)
    held = running_requests(state_pool_bytes(budget, state, sched, dep.parallel.attention_groups), state, sched)
    return max(int(held), 0) * dep.parallel.attention_groups


def window_slots(dep: Any, sched: SchedulerConfig) -> int | None:
    """Running requests a windowed layers' pool of its own holds (SGLang's, ``window_pool_ratio``
    tokens for each of the KV pool's), each past its window holding
    :func:`~inferlab.core.memory.window_pool_need` tokens there; None where there is no such pool."""
    freed, ratio = held_windows(dep.model, sched)
    if ratio is None or not 0.0 < dep.model.kv_share_held_whole(freed) < 1.0:
        return None
    need = window_pool_need(dep.model, freed, sched.kv_block_size)
    return max(int(ratio * kv_capacity_tokens(dep, sched) / need), 1)


def hybrid_sequences(dep: Any, sched: SchedulerConfig, context: float) -> float | None:
    """Sequences of ``context`` tokens a replica holds where a hybrid model's states have a pool of
    their own: the fewer of the KV pool's and the state pool's (:func:`state_slots`); None where
    one pool holds both (the memory plan's per-sequence bytes count the state)."""
    slots = state_slots(dep, sched)
    return None if slots is None else min(float(slots), kv_capacity_tokens(dep, sched, context=context) / max(context, 1.0))


def _taken(plan: Any, what: str, sizing: str, memory: dict) -> str:
    """What took the memory a KV pool would have had, in the words of the engine's sizing."""
    gb, share = 1e9, memory["gpu_memory_utilization"]
    given = option("gpu_memory_utilization", share)
    if sizing == "static":
        return (f"{what} take {plan.weights / gb:.1f} GB of the {plan.capacity * share / gb:.1f} GB its share for "
                f"weights and KV cache, {share:.3f} of {plan.capacity / gb:.1f} GB, gives (the engine reserves the "
                "rest; gpu_memory_utilization, SGLang's --mem-fraction-static, sets the share)")
    used = plan.weights + plan.reserve + float(plan.workspace)
    if sizing == "free":
        return f"{what}, workspace and reserve take {used / gb:.1f} GB of {plan.capacity / gb:.1f} GB"
    return (f"{what}, workspace and reserve take {used / gb:.1f} GB of the {plan.capacity * share / gb:.1f} GB that "
            f"{given} gives of {plan.capacity / gb:.1f} GB")
