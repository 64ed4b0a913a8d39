"""Where an engine keeps a hybrid model's linear-attention states, as arithmetic on a GPU's bytes.

A hybrid model (Gated DeltaNet layers beside attention: Qwen3-Next, Qwen3.5) holds a fixed-size
state per running sequence. SGLang keeps the states in a pool of their own, ``state_pool_ratio``
times its KV pool, the two splitting what the weights leave, and a running request takes
``state_slots`` of its slots (:class:`~inferlab.engines.scheduler.SchedulerConfig`); the other
engines hold them in their KV pool. Used by the serving simulation, the planner and the static
batch alike.
"""

from __future__ import annotations

from typing import Any

import numpy as np

#: The format an engine keeps a linear-attention state in when the model's config does not name
#: one: SGLang FP32 (``--mamba-ssm-dtype``, "The default setting is float32", its Qwen3-Next
#: docs); vLLM the model's dtype (``--mamba-ssm-cache-dtype auto``: BF16 for Qwen3-Next, vLLM PR
#: #34489), as the other engines here.
ENGINE_STATE_FORMATS = {"sglang": "fp32"}


def separate_pool(model: Any, sched: Any) -> bool:
    """Whether ``model``'s linear-attention states have a pool of their own under ``sched``."""
    return model.linear_attention is not None and sched.state_pool_ratio is not None


def kv_share_of_rest(sched: Any) -> float:
    """The share of what the weights leave that the KV pool takes beside a state pool: ``1 / (1 + r)``."""
    return 1.0 / (1.0 + float(sched.state_pool_ratio))


def state_pool_bytes(rest: Any, state_bytes: float, sched: Any, ranks: int = 1) -> Any:
    """What a GPU's state pool takes of the ``rest`` the weights leave [B]: ``state_pool_slots``
    states (a rank's share of them, ``// ranks``) where the pool is pinned (SGLang's
    ``--max-mamba-cache-size``), else ``r / (1 + r)`` of it."""
    if sched.state_pool_slots is not None:
        return np.full(np.shape(rest), (sched.state_pool_slots // max(ranks, 1)) * state_bytes)
    return np.asarray(rest, float) * (1.0 - kv_share_of_rest(sched))


def running_requests(state_pool_bytes: Any, state_bytes: float, sched: Any) -> Any:
    """Running requests a state pool of ``state_pool_bytes`` holds on one GPU, ``state_bytes`` a
    slot and ``state_slots`` slots a request (whole slots, whole requests)."""
    return np.floor(np.floor(np.asarray(state_pool_bytes, float) / state_bytes) / sched.state_slots)


def state_pool_limits(dep: Any, engine: str, plan: Any) -> tuple[np.ndarray, np.ndarray] | None:
    """Where an engine keeps a hybrid model's states in a pool of their own (SGLang's:
    :mod:`~inferlab.engines.state_pool`), the requests a replica runs at once by each of its two
    pools: the state pool's running requests and the sequences its KV pool (``1 / (1 + r)`` of what
    the weights leave) holds, at its default share; None elsewhere."""
    from ..core.memory import recurrent_state_per_gpu
    from .scheduler import default_scheduler

    sched = default_scheduler(engine)
    if not separate_pool(dep.model, sched):
        return None
    state, groups = recurrent_state_per_gpu(dep.model, dep.parallel), dep.parallel.attention_groups
    rest = np.maximum(plan.kv_budget, 0.0)
    pool = np.minimum(state_pool_bytes(rest, state, sched, groups), rest)
    kv = np.floor((rest - pool) / np.maximum(plan.kv_per_sequence - state, 1.0))
    return running_requests(pool, state, sched) * groups, kv * groups


def state_page_tokens(dep: Any) -> int:
    """Tokens of one layer's KV that fill a page holding one layer's linear-attention state on one
    GPU, in multiples of 16 (vLLM's alignment of its attention block to the state's page)."""
    from ..core.memory import kv_share
    from ..core.parallelism import state_share
    from ..precision import number_format

    model = dep.model
    state = model.recurrent_state_bytes() / model.num_linear_layers * state_share(model, dep.parallel.head_split)
    kv = model.kv_elements_per_token_per_layer() * number_format(dep.precision.kv_cache).bytes_per_element * \
        kv_share(model, dep.parallel.head_split)
    return 16 * int(np.ceil(state / (16.0 * kv)))


def overlap_off(model: Any, sched: Any) -> bool:
    """Whether ``sched``'s engine turns its overlap scheduler off for ``model`` (a hybrid model under
    SGLang's no_buffer strategy: ``hybrid_overlap`` False)."""
    return model.linear_attention is not None and not sched.hybrid_overlap


def page_tokens(dep: Any, sched: Any, block: int) -> int:
    """The KV page of ``sched``'s engine [token]: ``block``, or where one pool holds a hybrid model's
    states in pages sized to a layer's state (``state_pages``: vLLM's), at least
    :func:`state_page_tokens`."""
    if dep.model.linear_attention is None or not sched.state_pages or separate_pool(dep.model, sched):
        return block
    return max(block, state_page_tokens(dep))
