"""SGLang's own sizing of what a launch leaves unset, by the GPU's memory: its prefill chunk, the
largest decode batch it captures in a CUDA graph and its request slots (sgl-project/sglang,
python/sglang/srt/server_args.py ``_handle_gpu_memory_settings`` and model_runner
``init_memory_pool``). Its memory share: :mod:`inferlab.engines.memory_share`.
"""

from __future__ import annotations


#: SGLang's ``chunked_prefill_size`` by the GPU's memory when it is not set: (below this many
#: bytes, tokens), then :data:`LARGE_MEMORY_BUDGET` (sgl-project/sglang,
#: python/sglang/srt/server_args.py, ``_handle_gpu_memory_settings``: 2,048 under 35 GiB (T4,
#: A10, RTX 4090), 4,096 under 60 GiB (A100 40GB, L40), 8,192 under 160 GiB (H100, H200, H20),
#: 16,384 above (B200, MI300)).
MEMORY_BUDGETS = ((35 * 2**30, 2048), (60 * 2**30, 4096), (160 * 2**30, 8192))
LARGE_MEMORY_BUDGET = 16384
#: SGLang's prefill budget without chunked prefill (``--chunked-prefill-size -1``): its
#: ``max_prefill_tokens`` default, not sized by memory.
UNCHUNKED_BUDGET = 16384


def memory_budget(memory_bytes: float) -> int:
    """The token budget SGLang sizes for a GPU of ``memory_bytes`` [B] of visible memory."""
    return next((tokens for below, tokens in MEMORY_BUDGETS if memory_bytes < below), LARGE_MEMORY_BUDGET)


#: SGLang's largest decode batch captured in a CUDA graph when ``--cuda-graph-max-bs`` is not
#: given, by the GPU's memory: (below this many bytes, tensor-parallel size below 4, from 4)
#: (sgl-project/sglang, server_args.py ``_handle_gpu_memory_settings``: T4 and RTX 4080 8;
#: A10, RTX 4090 24 and 80; A100 40GB, L40S 32 and 160; H100, A100 80GB, H200 256 and 512),
#: then :data:`LARGE_GRAPH_BATCH` (B200, MI300).
GRAPH_BATCHES = ((20 * 2**30, 8, 8), (35 * 2**30, 24, 80), (60 * 2**30, 32, 160), (160 * 2**30, 256, 512))
LARGE_GRAPH_BATCH = 512


def graph_batch_limit(memory_bytes: float, tp: int) -> int:
    """The largest decode batch SGLang captures in a CUDA graph on a GPU of ``memory_bytes`` [B]
    of visible memory at tensor-parallel size ``tp``."""
    row = next((r for r in GRAPH_BATCHES if memory_bytes < r[0]), None)
    if row is None:
        return LARGE_GRAPH_BATCH
    return row[1] if tp < 4 else row[2]


#: SGLang's request slots when ``--max-running-requests`` is not given: its request-to-token
#: pool holds ``KV tokens / context length x 512`` requests, clamped to 2,048..4,096
#: (sgl-project/sglang, model_runner ``init_memory_pool``, v0.4-v0.5.8), and the scheduler
#: runs at most that many and half the KV tokens (tp_worker: ``min(max_total_num_tokens // 2,
#: req_to_token_pool.size)``).
RUNNING_REQUESTS_PER_CONTEXT = 512
RUNNING_REQUESTS_RANGE = (2048, 4096)


def running_requests(kv_tokens: float, context_len: int) -> int:
    """The requests SGLang runs at most on one scheduler whose KV pool holds ``kv_tokens``
    tokens, for a model of ``context_len`` tokens, when ``--max-running-requests`` is not set."""
    low, high = RUNNING_REQUESTS_RANGE
    slots = min(max(int(kv_tokens / context_len * RUNNING_REQUESTS_PER_CONTEXT), low), high)
    return max(1, min(int(kv_tokens) // 2, slots))
