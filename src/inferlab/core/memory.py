"""Device memory of a deployment: weights, KV cache, workspace, reserve, and what fits.

Per GPU, in bytes. The budget is ``usable capacity x gpu_memory_utilization`` (like
vLLM's setting, default 0.9); the KV cache gets what weights, the activation workspace
and the runtime reserve leave; sequences take whole pages of ``kv_block_size`` tokens.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import InfeasibleError
from ..precision import number_format
from ..specs.hardware import HardwareSpec
from ..specs.model import ModelSpec
from ..techniques.quantization import PrecisionConfig

#: CUDA context, library workspaces and communication buffers outside the engine's pool.
DEFAULT_RESERVE_BYTES = 1.0 * 2**30
#: Bytes of activations kept per token in flight: residual and normed input (2H), the
#: attention and MLP intermediates (qkv, gate/up at most 3 x the shard width), 16-bit.
_WORKSPACE_WIDTHS = 4


@dataclass(frozen=True)
class MemoryPlan:
    """Where one GPU's memory goes [B]; arrays over the sweep grid."""

    capacity: float
    budget: float
    weights: float
    reserve: float
    workspace: np.ndarray
    kv_per_token: float
    kv_per_sequence: np.ndarray
    kv_batch: np.ndarray
    max_sequences: np.ndarray

    @property
    def kv_budget(self) -> np.ndarray:
        """Bytes left for the KV cache."""
        return self.budget - self.weights - self.reserve - self.workspace

    @property
    def used(self) -> np.ndarray:
        """Weights, reserve, workspace and the batch's KV cache."""
        return self.weights + self.reserve + self.workspace + self.kv_batch

    @property
    def fits(self) -> np.ndarray:
        """Whether the batch's KV cache fits next to the weights."""
        return self.kv_batch <= self.kv_budget


def weight_bytes_per_gpu(model: ModelSpec, precision: PrecisionConfig, tp: int) -> float:
    """Stored weights per GPU [B]: linear layers in the weight format, embedding and LM
    head kept in 16-bit (engines exclude them from quantization), all split over ``tp``."""
    counts = model.param_counts
    embed = counts.embedding + counts.lm_head
    linear = counts.total - embed
    return (linear * number_format(precision.weights).bytes_per_element + embed * 2.0) / tp


def kv_share(model: ModelSpec, tp: int) -> float:
    """Share of a token's KV cache one of ``tp`` ranks holds (KV heads replicate past TP)."""
    units = 1 if model.mla is not None else model.num_key_value_heads
    return max(1.0 / tp, 1.0 / units)


def plan_memory(model: ModelSpec, hw: HardwareSpec, precision: PrecisionConfig, *, tp: int,
                batch: np.ndarray, context: np.ndarray, step_tokens: np.ndarray,
                gpu_memory_utilization: float = 0.9, kv_block_size: int = 16,
                reserve_bytes: float = DEFAULT_RESERVE_BYTES) -> MemoryPlan:
    """Memory of ``batch`` sequences of ``context`` tokens on one of ``tp`` GPUs."""
    capacity = hw.usable_memory_capacity.si
    share = kv_share(model, tp)
    kv_fmt = precision.kv_cache
    pages = np.ceil(np.asarray(context, float) / kv_block_size) * kv_block_size
    per_seq = model.kv_cache_bytes(pages, kv_fmt) * share
    per_token = sum(model.kv_cache_bytes_per_token(kv_fmt).values()) * share
    widest = max([layer.intermediate_size for layer in model.layers] +
                 [model.moe.moe_intermediate_size * model.moe.num_experts_per_tok if model.moe else 0])
    workspace = step_tokens * (_WORKSPACE_WIDTHS * model.hidden_size + 3 * widest / tp) * 2.0
    weights = weight_bytes_per_gpu(model, precision, tp)
    budget = capacity * gpu_memory_utilization
    free = budget - weights - reserve_bytes - workspace
    with np.errstate(divide="ignore"):
        max_seq = np.floor(np.maximum(free, 0.0) / per_seq)
    return MemoryPlan(capacity, budget, weights, reserve_bytes, np.asarray(workspace, float), per_token,
                      np.asarray(per_seq, float), np.asarray(batch * per_seq, float), max_seq)


def require_weights_fit(plan: MemoryPlan, model: ModelSpec, hw: HardwareSpec, tp: int) -> None:
    """Raise :class:`InfeasibleError` when not even one sequence fits next to the weights."""
    if np.all(plan.max_sequences >= 1):
        return
    need = plan.weights + plan.reserve + float(np.max(plan.workspace)) + float(np.max(plan.kv_per_sequence))
    domain = int(hw.scale_up.domain_size.si)
    heads = model.num_attention_heads
    smallest = next((t for t in range(tp + 1, domain + 1) if heads % t == 0 and
                     plan.weights * tp / t + plan.reserve + float(np.max(plan.kv_per_sequence)) * tp / t
                     < plan.budget), None)
    if smallest:
        hint = f"; tp={smallest} would fit"
    else:
        hint = (f"; no tensor-parallel size within the {domain}-GPU scale-up domain fits: use a narrower weight "
                "format, a GPU with more memory, or pipeline parallelism across nodes")
    raise InfeasibleError(
        f"{model.id or model.name} does not fit on {hw.id} at tp={tp}: needs {need / 1e9:.1f} GB per GPU "
        f"(weights {plan.weights / 1e9:.1f} GB, one sequence's KV {float(np.max(plan.kv_per_sequence)) / 1e9:.2f} GB) "
        f"but {plan.budget / 1e9:.1f} GB is usable ({plan.capacity / 1e9:.1f} GB x utilization){hint}",
        needed_bytes=need, available_bytes=plan.budget, suggestion={"tp": smallest} if smallest else {},
    )
