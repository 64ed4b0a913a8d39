"""Types and bounds of the fields of a Hugging Face ``config.json``, checked before a spec is built.

A config is data from outside: a layer count of 2^63, ``"sliding_window": "32"`` or
``"tie_word_embeddings": "false"`` must be one clear error naming the field, not a
MemoryError, a silent coercion into a different spec, or a hang.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..errors import SpecError

#: Largest value of each count field, far beyond any released model (the largest today:
#: 126 layers, 128 heads, 384 experts, hidden 16,384, MLP 53,248, vocab 262,208, context
#: 10M), so that a corrupt or hostile config is refused at once instead of building
#: 2^63 layers. Each field: (smallest, largest).
_LAYERS, _HEADS, _EXPERTS, _WIDTH = (1, 4096), (1, 8192), (1, 65_536), (1, 2**20)
_POSITIONS = (1, 2**30)
COUNT_BOUNDS: dict[str, tuple[int, int]] = {
    "num_hidden_layers": _LAYERS, "n_layer": _LAYERS,
    "num_attention_heads": _HEADS, "num_key_value_heads": _HEADS, "n_head": _HEADS, "num_kv_heads": _HEADS,
    "num_experts": _EXPERTS, "num_local_experts": _EXPERTS, "n_routed_experts": _EXPERTS,
    "num_experts_per_tok": _EXPERTS, "experts_per_token": _EXPERTS, "n_shared_experts": (0, _EXPERTS[1]),
    **{k: _WIDTH for k in ("hidden_size", "n_embd", "intermediate_size", "intermediate_size_mlp",
                           "moe_intermediate_size", "head_dim", "n_inner", "ffn_hidden_size", "kv_lora_rank",
                           "q_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim")},
    "vocab_size": (1, 2**24),
    "max_position_embeddings": _POSITIONS, "n_positions": _POSITIONS, "sliding_window": _POSITIONS,
    "attention_chunk_size": _POSITIONS,
    **{k: _LAYERS for k in ("moe_layer_freq", "decoder_sparse_step", "interleave_moe_layer_step",
                            "no_rope_layer_interval", "sliding_window_pattern")},
    **{k: (0, _LAYERS[1]) for k in ("first_k_dense_replace", "max_window_layers", "num_nextn_predict_layers",
                                    "mtp_num_hidden_layers")},
    "linear_num_key_heads": _HEADS, "linear_num_value_heads": _HEADS, "linear_key_head_dim": _WIDTH,
    "linear_value_head_dim": _WIDTH, "linear_conv_kernel_dim": (1, 64), "full_attention_interval": _LAYERS,
    "shared_expert_intermediate_size": (0, _WIDTH[1]),
    "num_ln_in_parallel_attn": (1, 4),
}
#: Fields read as true/false: ``"false"`` (a string) would otherwise count as true.
BOOL_FIELDS = ("tie_word_embeddings", "attention_bias", "bias", "mlp_bias", "use_sliding_window",
               "new_decoder_architecture", "multi_query", "parallel_attn", "use_qk_norm", "attn_output_gate")
#: Layer-type names of ``layer_types`` lists.
_LAYER_TYPES = ("sliding_attention", "full_attention")
#: Architectures whose layers may also be linear attention (Gated DeltaNet).
LINEAR_ATTENTION_TYPES = ("qwen3_next", "qwen3_5_text", "qwen3_5_moe_text")


def check_fields(data: Mapping[str, Any], where: str) -> None:
    """Every count field present is an integer within :data:`COUNT_BOUNDS`, every flag a
    boolean: checked before anything is built, so a bad config is one line at once."""
    for key, (low, high) in COUNT_BOUNDS.items():
        value = data.get(key)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int):
            raise SpecError(f"{where}: field {key!r} must be an integer, got {value!r:.60} ({type(value).__name__})")
        if not low <= value <= high:
            raise SpecError(f"{where}: field {key!r} must be between {low:,} and {high:,} (a bound far beyond "
                            f"any released model), got {value:,}; check the config")
    for key in BOOL_FIELDS:
        value = data.get(key)
        if value is not None and not isinstance(value, bool):
            raise SpecError(f"{where}: field {key!r} must be true or false, got {value!r:.60}")
    types = data.get("layer_types")
    allowed = _LAYER_TYPES + (("linear_attention",) if data.get("model_type") in LINEAR_ATTENTION_TYPES else ())
    if isinstance(types, list) and any(t not in allowed for t in types):
        bad = next(t for t in types if t not in allowed)
        raise SpecError(f"{where}: field 'layer_types' holds {bad!r:.60}; allowed: {', '.join(allowed)}")


#: ``_common``'s defaults for a family that sets ``head_dim`` itself (MLA's, or a required field):
#: no hidden_size / heads split to check.
OWN_HEAD_DIM = {"head_dim": 0}


def head_dim_or_split(where: str, hidden: int, heads: int, given: Any) -> int:
    """``given`` (the config's ``head_dim`` or the family's default), else hidden_size / heads,
    which must then divide (transformers refuses such a model too)."""
    if given is not None:
        return given
    if hidden % heads:
        raise SpecError(f"{where}: hidden_size {hidden} is not a multiple of num_attention_heads {heads}, and no "
                        "head_dim is given; give head_dim or check the two")
    return hidden // heads


#: RoPE scalings that stretch the trained positions by their ``factor``: YaRN, linear
#: interpolation and dynamic NTK. Llama 3's ``llama3`` and Phi's ``longrope`` leave
#: ``max_position_embeddings`` as the long length already.
STRETCHING_ROPE = ("yarn", "linear", "dynamic")


def scaled_positions(where: str, positions: int, rope_scaling: Any) -> int:
    """The positions a model takes with its ``rope_scaling``: a YaRN, linear or dynamic scaling
    of ``factor`` over ``original_max_position_embeddings`` reaches their product, the larger of
    it and the config's own count. Qwen's model cards extend Qwen2.5 and Qwen3 this way
    (``{"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}``:
    131,072 tokens) without raising ``max_position_embeddings``; DeepSeek-V3's and gpt-oss's
    configs state the product there already (4,096 x 40 = 163,840; 4,096 x 32 = 131,072). A
    scaling without the original length (Gemma 3's linear factor 8) is taken as stated in
    ``max_position_embeddings`` (131,072 for Gemma 3, not 8 times it)."""
    if not isinstance(rope_scaling, Mapping) or "original_max_position_embeddings" not in rope_scaling:
        return positions
    kind = rope_scaling.get("rope_type", rope_scaling.get("type"))
    factor, base = rope_scaling.get("factor"), rope_scaling["original_max_position_embeddings"]
    if kind not in STRETCHING_ROPE or factor is None:
        return positions
    if isinstance(factor, bool) or not isinstance(factor, (int, float)) or not 1.0 <= factor <= 1024.0:
        raise SpecError(f"{where}: field 'rope_scaling.factor' must be a number in [1, 1024], got {factor!r:.40}")
    if isinstance(base, bool) or not isinstance(base, int) or not _POSITIONS[0] <= base <= _POSITIONS[1]:
        raise SpecError(f"{where}: field 'rope_scaling.original_max_position_embeddings' must be a whole number in "
                        f"[1, {_POSITIONS[1]}], got {base!r:.40}")
    return max(positions, min(int(base * factor), _POSITIONS[1]))
