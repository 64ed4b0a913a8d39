"""How much of a GPU's memory an engine gives its KV pool, sized the way the engine sizes it.

An engine's memory setting means one of three things (:attr:`SchedulerConfig.memory_sizing`):

* ``"all"`` (vLLM's ``--gpu-memory-utilization``, the generic engine): the engine takes that
  share of all memory; weights, activations and the runtime's reserve come out of it and the
  KV pool is the rest.
* ``"free"`` (TensorRT-LLM's ``free_gpu_memory_fraction``, LMDeploy's
  ``--cache-max-entry-count``): the KV pool is that share of what weights, activations and
  the reserve leave of all memory.
* ``"static"`` (SGLang's ``--mem-fraction-static``): the share holds the weights and the KV
  pool; the rest of memory is SGLang's reservation for activations, CUDA graphs and metadata.

Defaults (:data:`~inferlab.engines.scheduler.ENGINE_SCHEDULERS`): vLLM 0.92 of all memory
(vllm-project/vllm PR #38284, 2026-04, "default value of 0.92" in ``vllm serve --help``: vLLM
0.22 and later, 0.9 before), TensorRT-LLM 0.9 of the free memory (LLM API
``KvCacheConfig.free_gpu_memory_fraction``),
LMDeploy 0.8 of it (``lmdeploy serve api_server --cache-max-entry-count``, "the percentage of free
gpu memory occupied by the k/v cache"), and SGLang's own sizing by the GPU and the launch when
``--mem-fraction-static`` is not given (:func:`sglang_static_share`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from .scheduler import SIZINGS, SchedulerConfig
from .sglang_sizing import graph_batch_limit
from .window_pool import held_windows

if TYPE_CHECKING:
    from ..core.parallelism import Parallelism
    from ..specs.hardware import HardwareSpec

__all__ = ["SIZINGS", "iteration_tokens", "memory_keywords", "prefill_chunks", "sglang_static_share", "share_words"]

#: SGLang's reservation outside ``--mem-fraction-static`` when it sizes the share itself [MiB]
#: (sgl-project/sglang python/sglang/srt/server_args.py ``_handle_gpu_memory_settings``, PRs
#: #10975 and #11076, 2025-09, SGLang 0.5.3 on): constant metadata, activations of the
#: largest prefill per token of its chunk (at least 2,048 tokens), per request of the largest
#: CUDA-graph batch, per GPU of ``tp x pp``, per request and attention-DP rank, at least 10 GiB
#: on a GPU of more than 60 GiB, and a drafter's weights and graphs on top.
SGLANG_RESERVED_MIB = 512.0
SGLANG_MIB_PER_CHUNK_TOKEN = 1.5
SGLANG_MIN_CHUNK = 2048
SGLANG_MIB_PER_GRAPH_REQUEST = 2.0
SGLANG_MIB_PER_GPU = 1024.0 / 8
SGLANG_MIB_PER_DP_GRAPH_REQUEST = 3.0
#: With attention DP and a CUDA-graph batch above 300, another 1.5 MiB per request and rank.
SGLANG_LARGE_DP_GRAPH = (300, 1.5)
SGLANG_LARGE_GPU = (60 * 1024.0, 10 * 1024.0)
SGLANG_DRAFTER_MIB = {"draft": 6 * 1024.0, "eagle": 2 * 1024.0, "mtp": 2 * 1024.0}
#: A device too small for the reservation still gets a share (SGLang would compute one below
#: zero and fail to start; the weights then do not fit, which is the message a user needs).
SGLANG_LEAST_SHARE = 0.01


def sglang_static_share(memory_bytes: float, chunk_tokens: float, graph_max_batch: float, tp: int, pp: int = 1,
                        attention_dp: int = 1, drafter: str = "") -> float:
    """SGLang's ``--mem-fraction-static`` when it is not given: ``(memory - reserved) / memory``
    on a GPU of ``memory_bytes`` [B] of visible memory, rounded to three decimals as SGLang rounds
    it, for a launch whose prefill chunk is ``chunk_tokens`` (``--chunked-prefill-size``, else
    ``--max-prefill-tokens``), whose largest CUDA-graph batch is ``graph_max_batch``, on ``tp x pp``
    GPUs with ``attention_dp`` attention data-parallel ranks and a ``drafter`` (a speculative
    method: ``"draft"``, ``"eagle"``, ``"mtp"``; others reserve nothing).

    One H100 (81,559 MiB) at ``tp`` 1, chunk 8,192 and graphs up to 256 reserves 13,440 MiB:
    0.835. sgl-project/sglang issue #29092 (2026-06) read 0.828 from a Qwen3-32B server on an
    H100: later releases also reserve 8 MiB per captured size of piecewise CUDA graphs (about
    570 MiB there), not modelled."""
    gpu = memory_bytes / 2**20
    reserved = (SGLANG_RESERVED_MIB + max(chunk_tokens, SGLANG_MIN_CHUNK) * SGLANG_MIB_PER_CHUNK_TOKEN
                + graph_max_batch * SGLANG_MIB_PER_GRAPH_REQUEST + tp * pp * SGLANG_MIB_PER_GPU)
    if attention_dp > 1:
        reserved += graph_max_batch * attention_dp * SGLANG_MIB_PER_DP_GRAPH_REQUEST
        above, per = SGLANG_LARGE_DP_GRAPH
        if graph_max_batch > above:
            reserved += graph_max_batch * attention_dp * per
    large, least = SGLANG_LARGE_GPU
    if gpu > large:
        reserved = max(reserved, least)
    reserved += SGLANG_DRAFTER_MIB.get(drafter, 0.0)
    return max(round((gpu - reserved) / gpu, 3), SGLANG_LEAST_SHARE)


def memory_keywords(sched: SchedulerConfig, hw: HardwareSpec, parallel: Parallelism, tokens: float, *,
                    share: float | None = None, graph_max_batch: float | None = None,
                    drafter: str = "", model: Any) -> dict[str, Any]:
    """:func:`~inferlab.core.memory.plan_memory` keywords of an engine that runs ``tokens`` per
    iteration (its budget) on ``hw`` as ``parallel``: the replica's iteration tokens (each
    attention-DP rank runs the budget where the limits are a rank's), how it sizes its KV pool
    and the share of memory it takes: ``share`` when given, else the engine's
    (``sched.gpu_memory_utilization``; SGLang's :func:`sglang_static_share` where that is None,
    with ``graph_max_batch`` its CUDA-graph limit, None for its default by the GPU); the windowed
    layers' KV as the engine keeps it for ``model`` (:func:`~.window_pool.held_windows`)."""
    if share is None:
        share = sched.gpu_memory_utilization
    if share is None:
        graphs = graph_max_batch
        if graphs is None:
            graphs = sched.graph_max_batch if sched.graph_max_batch is not None else \
                graph_batch_limit(hw.usable_memory_capacity.si, parallel.tp)
        share = sglang_static_share(hw.usable_memory_capacity.si, tokens, graphs, parallel.tp, parallel.pp,
                                    parallel.attention_groups if parallel.attention_dp else 1, drafter)
    window_kv, ratio = held_windows(model, sched)
    return {"gpu_memory_utilization": float(share), "sizing": sched.memory_sizing,
            "step_tokens": iteration_tokens(sched, parallel, tokens), "window_pool_ratio": ratio,
            "window_kv": window_kv}


def iteration_tokens(sched: SchedulerConfig, parallel: Parallelism, tokens: float) -> float:
    """The replica's tokens in one iteration of an engine whose budget is ``tokens``: each
    attention-DP rank runs the budget where the limits are a rank's, else the replica does."""
    return tokens * (parallel.attention_groups if sched.limits_per_rank else 1)


def prefill_chunks(prompts: Any, tokens: Any, parallel: Parallelism, replica_tokens: float) -> np.ndarray:
    """Iterations that prefill ``prompts`` prompts of ``tokens`` tokens each, taken together, in
    iterations of ``replica_tokens`` (:func:`iteration_tokens`): each attention-DP rank its share
    of the prompts, in chunks of its share of the budget (SGLang's ``--enable-dp-attention``:
    ``chunked_prefill_size // dp_size`` a rank; the others' budgets are a rank's already)."""
    g = parallel.attention_groups
    return np.ceil(np.ceil(np.asarray(prompts, float) / g) * np.asarray(tokens, float) * g / replica_tokens)


def share_words(sched: SchedulerConfig) -> str:
    """How the engine's memory share reads, for messages."""
    return {"all": "of all memory", "free": "of the memory weights and activations leave",
            "static": "of all memory for weights and the KV pool"}[sched.memory_sizing]
