"""The CUDA-graph limits a user sets on an engine: the largest decode batch replayed from a graph
(``graph_max_batch``) and the longest iteration with prompt tokens run in piecewise graphs
(``prefill_graph_tokens``). Each is refused for an engine whose profile has no eager host rate,
where inferlab could not say what running those iterations eagerly costs, so the limit would
change nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..checks import integer
from ..errors import SpecError
from .scheduler import MAX_SEQS, MAX_TOKENS, default_scheduler
from .sglang_sizing import graph_batch_limit

if TYPE_CHECKING:
    from ..specs.hardware import HardwareSpec


def decode_graph_limit(engine: str, hw: HardwareSpec, tp: int, given: int | None = None) -> int:
    """The largest decode batch (on one attention-DP rank) ``engine`` runs from a CUDA graph on
    ``hw`` at tensor-parallel size ``tp``: ``given``, else its default (SGLang's
    :func:`~inferlab.engines.sglang_sizing.graph_batch_limit`; the others graph every batch)."""
    limit = default_scheduler(engine).graph_max_batch if given is None else given
    if given is None and hw.vendor == "Google":  # XLA compiles every step: no CUDA graph, no eager fallback
        return MAX_SEQS
    return graph_batch_limit(hw.usable_memory_capacity.si, tp) if limit is None else limit


def checked_graph_limit(value: Any, profile: Any, engine: str, name: str = "graph_max_batch") -> int | None:
    """A user's CUDA-graph limit (``None``: the engine's), refused for an engine whose eager host
    rate ``profile`` does not know: inferlab could not say what running its decode batches
    eagerly costs. :data:`~inferlab.engines.scheduler.MAX_SEQS` (every batch graphed) is accepted anywhere."""
    if value is None:
        return None
    limit = integer(name, value, minimum=0, maximum=MAX_SEQS, what="requests", whole_floats=True)
    if limit < MAX_SEQS and not (profile.eager_decode_host_per_kernel_s or profile.eager_host_per_kernel_s):
        raise SpecError(f"graph_max_batch: no measured host rate for running {engine}'s decode steps without CUDA "
                        "graphs (sglang's and trtllm-pytorch's are known), so a CUDA-graph limit would change "
                        "nothing; drop it")
    return limit


def checked_prefill_graphs(value: Any, profile: Any, engine: str, name: str = "prefill_graph_tokens") -> int | None:
    """A user's piecewise CUDA-graph limit [token] (``None``: prefill and mixed iterations run
    eagerly where the engine graphs decode only), a whole number of tokens >= 1, refused for an
    engine whose profile has no eager prefill rate (``eager_host_per_kernel_s``): vLLM runs
    prefill from its compiled graphs already, the TensorRT engine runtime and LMDeploy's
    TurboMind run compiled engines, so no host floor is there to remove."""
    if value is None:
        return None
    tokens = integer(name, value, maximum=MAX_TOKENS, what="tokens", whole_floats=True)
    if not profile.eager_host_per_kernel_s:
        raise SpecError(f"{name}: {engine} runs no prefill eagerly in inferlab's profile (no eager host rate; "
                        "sglang's and trtllm-pytorch's are known), so piecewise CUDA graphs would change nothing; "
                        "drop it")
    return tokens
