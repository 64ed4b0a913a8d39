"""Readers of hybrid architectures' ``config.json``: linear-attention layers (Gated DeltaNet)
beside full attention (Qwen3-Next, Qwen3.5), for :mod:`inferlab.specs.hf_config`."""

from __future__ import annotations

from typing import Any

from ..errors import SpecError
from .layers import LayerSpec, LinearAttentionSpec, MoESpec

#: The state formats ``mamba_ssm_dtype`` names.
_STATE_FORMATS = {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16"}


def qwen3_next_fields(c: Any, base: dict[str, Any]) -> dict[str, Any]:
    """Qwen3-Next and Qwen3.5 (dense and MoE): Gated DeltaNet linear-attention layers with a full
    (gated, grouped-query) attention layer every ``full_attention_interval``-th (``layer_types``
    where the config lists them); the full layers' output gate doubles the query projection
    (``attn_output_gate``, always on in Qwen3-Next); RMSNorm on q and k per head; MoE layers of
    routed experts plus one gated shared expert (``shared_expert_intermediate_size``), every
    ``decoder_sparse_step``-th layer outside ``mlp_only_layers``; ``mtp_num_hidden_layers``
    multi-token-prediction modules. Partial rotary embedding moves positions, not cost. ``c`` reads
    the config (:class:`~.hf_config._Config`), ``base`` holds the fields every llama-like config has."""
    n = base["num_hidden_layers"]
    interval = c.get("full_attention_interval", 4)
    if not isinstance(interval, int) or isinstance(interval, bool) or interval < 1:
        raise SpecError(f"{c.where}: field 'full_attention_interval' must be a positive integer, got {interval!r}")
    types = c.get("layer_types", []) or ["full_attention" if (i + 1) % interval == 0 else "linear_attention"
                                         for i in range(n)]
    if len(types) != n:
        raise SpecError(f"{c.where}: 'layer_types' lists {len(types)} layers for num_hidden_layers={n}")
    if any(kind not in ("linear_attention", "full_attention") for kind in types):
        bad = next(kind for kind in types if kind not in ("linear_attention", "full_attention"))
        raise SpecError(f"{c.where}: field 'layer_types' holds {bad!r:.60}; allowed for model_type "
                        f"{c.model_type!r}: linear_attention, full_attention")
    is_moe = c.data.get("num_experts") is not None
    sparse_step, dense_only = c.get("decoder_sparse_step", 1), set(c.get("mlp_only_layers", []))
    layers = []
    for i, kind in enumerate(types):
        moe_layer = is_moe and i not in dense_only and (i + 1) % sparse_step == 0
        layers.append(LayerSpec(attention="linear" if kind == "linear_attention" else "full",
                                mlp="moe" if moe_layer else "dense",
                                intermediate_size=0 if moe_layer else c.int("intermediate_size")))
    state = c.get("mamba_ssm_dtype", "")  # absent (Qwen3-Next): the engine's choice
    if state and state not in _STATE_FORMATS:
        raise SpecError(f"{c.where}: field 'mamba_ssm_dtype' must be one of {', '.join(_STATE_FORMATS)}, got {state!r}")
    linear = LinearAttentionSpec(num_key_heads=c.int("linear_num_key_heads"),
                                 num_value_heads=c.int("linear_num_value_heads"),
                                 key_head_dim=c.int("linear_key_head_dim"),
                                 value_head_dim=c.int("linear_value_head_dim"),
                                 conv_kernel=c.get("linear_conv_kernel_dim", 4),
                                 state_format=_STATE_FORMATS[state] if state else None)
    out = {**base, "qk_norm": True, "attention_output_gate": bool(c.get("attn_output_gate", True)),
           "linear_attention": linear if "linear_attention" in types else None,  # every layer full: none
           "layers": tuple(layers), "num_mtp_layers": c.get("mtp_num_hidden_layers", 0)}
    if is_moe:
        shared = c.get("shared_expert_intermediate_size", 0)
        out["moe"] = MoESpec(num_experts=c.int("num_experts"), num_experts_per_tok=c.int("num_experts_per_tok"),
                             moe_intermediate_size=c.int("moe_intermediate_size"), num_shared_experts=1 if shared else 0,
                             shared_expert_intermediate_size=shared)
    return out
