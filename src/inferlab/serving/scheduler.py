"""The scheduler of an in-flight-batching engine, as data.

Each iteration runs one decode token for every running request plus up to a token
budget of prefill (``max_num_batched_tokens``, like vLLM's setting and TensorRT-LLM's
``max_num_tokens``): with chunked prefill a long prompt is split over iterations and
mixed with decodes; without it a prompt is prefilled whole in an iteration that runs
no decodes. Requests are admitted first come, first served while a sequence slot
(``max_num_seqs``) and KV blocks for the prompt are free; when the growing KV cache
no longer fits, the most recently admitted request is preempted and recomputed later.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..checks import boolean, fraction, integer

#: Bounds far past any engine's setting: sequences in one batch, tokens in one iteration,
#: tokens in one KV page.
MAX_SEQS = 10**6
MAX_TOKENS = 10**8
MAX_BLOCK = 2**20


@dataclass(frozen=True)
class SchedulerConfig:
    """Engine scheduling limits.

    Attributes
    ----------
    max_num_seqs : int
        Running requests at most (vLLM default 256).
    max_num_batched_tokens : int
        Tokens per iteration at most (decode tokens plus prefill chunk).
    chunked_prefill : bool
        Split prompts over iterations and mix them with decodes.
    kv_block_size : int
        Tokens per KV page.
    gpu_memory_utilization : float
        Share of device memory the engine takes (the KV pool is what weights leave).
    reserve_output : bool
        Admit a request only when the KV for its whole prompt and output is free, so that
        nothing is ever preempted (TensorRT-LLM's guaranteed-no-evict policy); otherwise
        admit on the prompt's blocks and preempt when decoding fills the pool (vLLM).
    kv_fraction_of_free : bool
        The KV pool is ``gpu_memory_utilization`` of the memory left after weights and
        activations (TensorRT-LLM's ``free_gpu_memory_fraction``) instead of that share of
        all memory minus weights and activations (vLLM's ``gpu_memory_utilization``).
    """

    max_num_seqs: int = 256
    max_num_batched_tokens: int = 8192
    chunked_prefill: bool = True
    kv_block_size: int = 16
    gpu_memory_utilization: float = 0.9
    reserve_output: bool = False
    kv_fraction_of_free: bool = False

    def __post_init__(self) -> None:
        for name, what, most in (("max_num_seqs", "requests", MAX_SEQS), ("max_num_batched_tokens", "tokens", MAX_TOKENS),
                                 ("kv_block_size", "tokens", MAX_BLOCK)):
            integer(f"scheduler: {name}", getattr(self, name), maximum=most, what=what)
        for name in ("chunked_prefill", "reserve_output", "kv_fraction_of_free"):
            boolean(f"scheduler: {name}", getattr(self, name))
        object.__setattr__(self, "gpu_memory_utilization",
                           fraction("scheduler: gpu_memory_utilization", self.gpu_memory_utilization))
