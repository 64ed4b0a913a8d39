"""Build a :class:`ModelSpec` from a Hugging Face ``config.json``, offline.

One reader per architecture family maps the config's fields onto :class:`ModelSpec`;
what differs between families (biases, q/k norms, sliding-window patterns, MoE
layouts) is read from the config or from the documented transformers default, never
guessed. A missing field or an unknown ``model_type`` is a :class:`SpecError` that
names the field and the supported architectures.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from ..errors import SpecError
from .checkpoint import checkpoint_formats
from .hf_fields import OWN_HEAD_DIM, check_fields, head_dim_or_split, scaled_positions
from .hf_hybrid import qwen3_next_fields
from .layers import LayerSpec, MLASpec, MoESpec
from .validation import format_validation_error, read_text

if TYPE_CHECKING:
    from .model import ModelSpec

_MISSING = object()

class _Config:
    """Read access to one config dict that names the field and architecture on error."""

    def __init__(self, data: Mapping[str, Any], model_type: str, where: str):
        check_fields(data, where)
        self.data, self.model_type, self.where = data, model_type, where

    def req(self, *keys: str) -> Any:
        for key in keys:
            if self.data.get(key) is not None:
                return self.data[key]
        names = " or ".join(repr(k) for k in keys)
        raise SpecError(f"{self.where}: model_type {self.model_type!r} needs field {names}, which is missing or null")

    def get(self, key: str, default: Any = None) -> Any:
        """Optional field; when ``default`` is given the value must be of its kind."""
        value = self.data.get(key, _MISSING)
        if value is _MISSING or value is None:
            return default
        if default is not None and not _same_kind(value, default):
            raise SpecError(
                f"{self.where}: field {key!r} must be {_KIND_NAMES[_kind(default)]}, got {value!r}"
            )
        if isinstance(default, list) and not all(isinstance(v, (int, str)) and not isinstance(v, bool) for v in value):
            raise SpecError(f"{self.where}: field {key!r} must be a list of integers or names, got {value!r}")
        return value

    def int(self, *keys: str) -> int:
        value = self.req(*keys)
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise SpecError(f"{self.where}: field {keys[0]!r} must be a positive integer, got {value!r}")
        return value


_KIND_NAMES = {bool: "true or false", int: "an integer", float: "a number", str: "a string", list: "a list",
               Mapping: "a mapping"}


def _kind(value: Any) -> type:
    for kind in (bool, int, float, str, list, Mapping):
        if isinstance(value, kind):
            return kind
    return object


def _same_kind(value: Any, default: Any) -> bool:
    kind = _kind(default)
    if kind is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, kind)


def _common(c: _Config, defaults: Mapping[str, int] | None = None) -> dict[str, Any]:
    """Fields every llama-like config has; ``defaults`` are the transformers defaults for
    fields a family's config.json may leave out."""
    d = defaults or {}
    h = c.int("hidden_size")
    heads = c.int("num_attention_heads")

    def count(key: str) -> int:
        return c.int(key) if key not in d else c.get(key, d[key])

    return {
        "model_type": c.model_type,
        "hidden_size": h,
        "num_hidden_layers": c.int("num_hidden_layers"),
        "num_attention_heads": heads,
        "num_key_value_heads": c.get("num_key_value_heads", heads),
        "head_dim": head_dim_or_split(c.where, h, heads, c.get("head_dim", d.get("head_dim"))),
        "vocab_size": count("vocab_size"),
        "max_position_embeddings": scaled_positions(c.where, count("max_position_embeddings"), c.get("rope_scaling")),
        "tie_word_embeddings": bool(c.get("tie_word_embeddings", False)),
        "hidden_act": str(c.get("hidden_act", "silu")),
    }


def _uniform_layers(c: _Config, base: dict[str, Any], window: int | None) -> tuple[LayerSpec, ...]:
    attention = "full" if window is None else "sliding"
    layer = LayerSpec(attention=attention, window=window, mlp="dense", intermediate_size=c.int("intermediate_size"))
    return (layer,) * base["num_hidden_layers"]


def _llama(c: _Config) -> dict[str, Any]:
    base = _common(c)
    bias = bool(c.get("attention_bias", c.get("bias", False)))
    window = c.get("sliding_window") if c.model_type in ("mistral", "phi3") else None
    return {**base, "qkv_bias": bias, "o_bias": bias, "mlp_bias": bool(c.get("mlp_bias", False)),
            "layers": _uniform_layers(c, base, window)}


def _qwen(c: _Config) -> dict[str, Any]:
    base = _common(c)
    n = base["num_hidden_layers"]
    # Sliding window applies to layers >= max_window_layers, only when use_sliding_window is set.
    window = c.get("sliding_window") if c.get("use_sliding_window", False) else None
    first_windowed = c.get("max_window_layers", 28) if window else n  # transformers' default is 28
    sparse_step = c.get("decoder_sparse_step", 1)
    dense_only = set(c.get("mlp_only_layers", []))
    is_moe = c.model_type == "qwen3_moe"
    layers = []
    for i in range(n):
        moe_layer = is_moe and i not in dense_only and (i + 1) % sparse_step == 0
        windowed = window is not None and i >= first_windowed
        layers.append(LayerSpec(
            attention="sliding" if windowed else "full", window=window if windowed else None,
            mlp="moe" if moe_layer else "dense",
            intermediate_size=0 if moe_layer else c.int("intermediate_size"),
        ))
    out = {**base, "qkv_bias": c.model_type == "qwen2", "qk_norm": c.model_type != "qwen2", "layers": tuple(layers)}
    if is_moe:
        out["moe"] = MoESpec(num_experts=c.int("num_experts"), num_experts_per_tok=c.int("num_experts_per_tok"),
                             moe_intermediate_size=c.int("moe_intermediate_size"))
    return out


def _mixtral(c: _Config) -> dict[str, Any]:
    base = _common(c)
    window = c.get("sliding_window")
    layer = LayerSpec(attention="full" if window is None else "sliding", window=window, mlp="moe")
    moe = MoESpec(num_experts=c.int("num_local_experts"), num_experts_per_tok=c.int("num_experts_per_tok"),
                  moe_intermediate_size=c.int("intermediate_size"))
    return {**base, "moe": moe, "layers": (layer,) * base["num_hidden_layers"]}


def _minimax_m2(c: _Config) -> dict[str, Any]:
    """MiniMax-M2 (M2.1, M2.5): Mixtral's layout (every layer routed experts of
    ``intermediate_size``, ``num_local_experts``) with a sigmoid router and its score bias,
    and RMSNorm on q and k (``use_qk_norm``, on by default) over all heads at once
    (``qk_norm_type`` ``per_layer``, the default; ``per_head`` as Qwen3's)."""
    fields = _mixtral(c)
    moe = fields["moe"].model_copy(update={"router_bias": True})
    span = "head" if c.get("qk_norm_type", "per_layer") == "per_head" else "layer"
    return {**fields, "moe": moe, "qk_norm": bool(c.get("use_qk_norm", True)), "qk_norm_span": span}


def _moe_stack(c: _Config, n: int, router_bias: bool) -> tuple[tuple[LayerSpec, ...], MoESpec]:
    """DeepSeek-V3's MoE layout (also Kimi-K2's and GLM-4.5's): the first ``first_k_dense_replace``
    layers dense, then every ``moe_layer_freq``-th layer routed experts plus ``n_shared_experts``
    shared ones of the routed width; ``router_bias``: the router's score-correction bias."""
    first_dense, freq = c.get("first_k_dense_replace", 0), c.get("moe_layer_freq", 1)
    moe_inter = c.int("moe_intermediate_size")
    layers = tuple(
        LayerSpec(mlp="moe") if i >= first_dense and i % freq == 0
        else LayerSpec(mlp="dense", intermediate_size=c.int("intermediate_size"))
        for i in range(n)
    )
    shared = c.get("n_shared_experts", 0)
    moe = MoESpec(num_experts=c.int("n_routed_experts"), num_experts_per_tok=c.int("num_experts_per_tok"),
                  moe_intermediate_size=moe_inter, num_shared_experts=shared,
                  shared_expert_intermediate_size=moe_inter if shared else 0, router_bias=router_bias)
    return layers, moe


def _deepseek_v3(c: _Config) -> dict[str, Any]:
    base = _common(c, OWN_HEAD_DIM)
    mla = MLASpec(q_lora_rank=c.get("q_lora_rank"), kv_lora_rank=c.int("kv_lora_rank"),
                  qk_nope_head_dim=c.int("qk_nope_head_dim"), qk_rope_head_dim=c.int("qk_rope_head_dim"),
                  v_head_dim=c.int("v_head_dim"))
    layers, moe = _moe_stack(c, base["num_hidden_layers"], c.get("topk_method", "noaux_tc") == "noaux_tc")
    return {**base, "head_dim": mla.qk_nope_head_dim + mla.qk_rope_head_dim, "mla": mla, "moe": moe,
            "layers": layers, "num_mtp_layers": c.get("num_nextn_predict_layers", 0)}


def _glm4_moe(c: _Config) -> dict[str, Any]:
    """GLM-4.5: grouped-query attention with q/k/v biases (``attention_bias``; the output projection
    has none) and, where ``use_qk_norm``, a per-head RMSNorm on q and k; DeepSeek-V3's MoE layout
    with its score-correction router bias. Partial RoPE (``partial_rotary_factor``) moves positions,
    not cost; ``head_dim`` is required (96 heads of 128 on a 5120-wide model: not hidden/heads)."""
    base = {**_common(c, OWN_HEAD_DIM), "head_dim": c.int("head_dim")}
    layers, moe = _moe_stack(c, base["num_hidden_layers"], router_bias=True)
    return {**base, "qkv_bias": bool(c.get("attention_bias", False)), "qk_norm": bool(c.get("use_qk_norm", False)),
            "moe": moe, "layers": layers, "num_mtp_layers": c.get("num_nextn_predict_layers", 0)}


def _gpt_oss(c: _Config) -> dict[str, Any]:
    base = _common(c)
    n, window = base["num_hidden_layers"], c.int("sliding_window")
    # transformers' default when layer_types is absent: sliding on even layers, full on odd.
    types = c.get("layer_types", []) or ["sliding_attention" if i % 2 == 0 else "full_attention" for i in range(n)]
    layers = tuple(LayerSpec(attention="sliding", window=window, mlp="moe") if t == "sliding_attention"
                   else LayerSpec(mlp="moe") for t in types)
    moe = MoESpec(num_experts=c.int("num_local_experts"), num_experts_per_tok=c.int("num_experts_per_tok", "experts_per_token"),
                  moe_intermediate_size=c.int("intermediate_size"), router_bias=True, expert_bias=True)
    return {**base, "qkv_bias": bool(c.get("attention_bias", True)), "o_bias": bool(c.get("attention_bias", True)),
            "attention_sinks": True, "moe": moe, "layers": layers}


#: transformers GemmaConfig defaults for fields a Gemma (1) config.json may omit (PaliGemma's
#: text_config states only its widths, depth, heads and vocabulary).
_GEMMA_DEFAULTS = {"head_dim": 256, "max_position_embeddings": 8192}


def _gemma(c: _Config) -> dict[str, Any]:
    """Gemma (1): a llama-like decoder with a GeGLU MLP (``gelu_pytorch_tanh``), tied
    embeddings and a 256-wide head by default."""
    base = _common(c, _GEMMA_DEFAULTS)
    act = c.get("hidden_activation") or c.get("hidden_act") or "gelu_pytorch_tanh"
    return {**base, "hidden_act": str(act), "tie_word_embeddings": bool(c.get("tie_word_embeddings", True)),
            "qkv_bias": bool(c.get("attention_bias", False)), "o_bias": bool(c.get("attention_bias", False)),
            "layers": _uniform_layers(c, base, None)}


#: transformers Gemma3TextConfig defaults for fields the released config.json files omit.
_GEMMA3_DEFAULTS = {"vocab_size": 262_208, "head_dim": 256, "max_position_embeddings": 131_072, "sliding_window": 4096}


def _gemma3(c: _Config) -> dict[str, Any]:
    base = _common(c, _GEMMA3_DEFAULTS)
    n, window = base["num_hidden_layers"], c.get("sliding_window", _GEMMA3_DEFAULTS["sliding_window"])
    # transformers default: every sliding_window_pattern-th layer (1-based) is global.
    pattern = c.get("sliding_window_pattern", 6)
    types = c.get("layer_types", []) or ["full_attention" if (i + 1) % pattern == 0 else "sliding_attention" for i in range(n)]
    inter = c.int("intermediate_size")
    layers = tuple(LayerSpec(attention="sliding", window=window, intermediate_size=inter) if t == "sliding_attention"
                   else LayerSpec(intermediate_size=inter) for t in types)
    return {**base, "hidden_act": str(c.get("hidden_activation", "gelu_pytorch_tanh")),
            "tie_word_embeddings": bool(c.get("tie_word_embeddings", True)),
            "norms_per_layer": 4, "qk_norm": True, "qkv_bias": bool(c.get("attention_bias", False)),
            "o_bias": bool(c.get("attention_bias", False)), "layers": layers}


def _llama4(c: _Config) -> dict[str, Any]:
    base = _common(c)
    n = base["num_hidden_layers"]
    step = c.get("interleave_moe_layer_step", 1)
    # An explicit list (even an empty one) wins over the interleave default.
    moe_layers = set(c.get("moe_layers", [])) if c.data.get("moe_layers") is not None else set(range(step - 1, n, step))
    # transformers default: every 4th layer is NoPE with global attention, the rest chunked.
    interval = c.get("no_rope_layer_interval", 4)
    rope = c.get("no_rope_layers", []) or [int((i + 1) % interval != 0) for i in range(n)]
    if len(rope) != n or any(r not in (0, 1) or isinstance(r, bool) for r in rope):
        raise SpecError(f"{c.where}: field 'no_rope_layers' must hold one 0 or 1 per layer ({n}), got {rope!r:.80}")
    chunk = c.get("attention_chunk_size")
    layers = tuple(
        LayerSpec(attention="chunked" if rope[i] and chunk else "full", window=chunk if rope[i] and chunk else None,
                  mlp="moe" if i in moe_layers else "dense",
                  intermediate_size=0 if i in moe_layers else c.int("intermediate_size_mlp"))
        for i in range(n)
    )
    inter = c.int("intermediate_size")
    moe = MoESpec(num_experts=c.int("num_local_experts"), num_experts_per_tok=c.int("num_experts_per_tok"),
                  moe_intermediate_size=inter, num_shared_experts=1, shared_expert_intermediate_size=inter)
    return {**base, "moe": moe, "layers": layers}


def _gptj(c: _Config) -> dict[str, Any]:
    h = c.int("n_embd")
    n = c.int("n_layer")
    heads = c.int("n_head")
    inner = c.get("n_inner") or 4 * h
    return {"model_type": c.model_type, "hidden_size": h, "num_hidden_layers": n, "num_attention_heads": heads,
            "num_key_value_heads": heads, "head_dim": head_dim_or_split(c.where, h, heads, c.get("head_dim")), "vocab_size": c.int("vocab_size"),
            "max_position_embeddings": c.int("n_positions"), "tie_word_embeddings": bool(c.get("tie_word_embeddings", False)),
            "gated_mlp": False, "hidden_act": str(c.get("activation_function", "gelu_new")), "norm": "layernorm",
            "norms_per_layer": 1, "mlp_bias": True, "lm_head_bias": True,
            "layers": (LayerSpec(intermediate_size=inner),) * n}


def _falcon(c: _Config) -> dict[str, Any]:
    h = c.int("hidden_size")
    heads = c.int("num_attention_heads")
    new_arch = bool(c.get("new_decoder_architecture", False))
    if new_arch:
        kv = c.get("num_kv_heads", heads)
    else:
        kv = 1 if c.get("multi_query", True) else heads
    bias = bool(c.get("bias", False))
    inner = c.get("ffn_hidden_size") or 4 * h
    norms = (c.get("num_ln_in_parallel_attn") or 2) if new_arch else (1 if c.get("parallel_attn", True) else 2)
    n = c.int("num_hidden_layers")
    return {"model_type": c.model_type, "hidden_size": h, "num_hidden_layers": n, "num_attention_heads": heads,
            "num_key_value_heads": kv, "head_dim": head_dim_or_split(c.where, h, heads, c.get("head_dim")), "vocab_size": c.int("vocab_size"),
            "max_position_embeddings": c.get("max_position_embeddings", 2048),
            "tie_word_embeddings": bool(c.get("tie_word_embeddings", True)), "gated_mlp": False,
            "hidden_act": str(c.get("activation", "gelu")), "norm": "layernorm", "norms_per_layer": norms,
            "qkv_bias": bias, "o_bias": bias, "mlp_bias": bias, "layers": (LayerSpec(intermediate_size=inner),) * n}


READERS: dict[str, Callable[[_Config], dict[str, Any]]] = {
    "llama": _llama, "mistral": _llama, "phi3": _llama, "internlm": _llama, "internlm2": _llama,
    "mixtral": _mixtral, "qwen2": _qwen, "qwen3": _qwen, "qwen3_moe": _qwen,
    "deepseek_v2": _deepseek_v3, "deepseek_v3": _deepseek_v3, "kimi_k2": _deepseek_v3, "glm4_moe": _glm4_moe,
    "gpt_oss": _gpt_oss, "minimax_m2": _minimax_m2,
    **dict.fromkeys(("qwen3_next", "qwen3_5_text", "qwen3_5_moe_text"), lambda c: qwen3_next_fields(c, _common(c))),
    "gemma": _gemma, "gemma3": _gemma3, "gemma3_text": _gemma3, "llama4": _llama4, "llama4_text": _llama4,
    "gptj": _gptj, "falcon": _falcon,
}

#: Multimodal wrappers whose text decoder lives under ``text_config``.
_WRAPPED = {"gemma3": "gemma3_text", "llama4": "llama4_text", "paligemma": "gemma", "kimi_k25": "kimi_k2",
            "qwen3_5": "qwen3_5_text", "qwen3_5_moe": "qwen3_5_moe_text"}


def load_config(config: str | Path | Mapping[str, Any]) -> tuple[dict[str, Any], str]:
    """Read a config.json path or dict; return (dict, description of where it came from)."""
    if isinstance(config, Mapping):
        return dict(config), "config"
    path = Path(config)
    if path.is_dir():
        path = path / "config.json"
    text = read_text(path, str(path))
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SpecError(f"{path}: not valid JSON ({exc.msg} at line {exc.lineno})") from None
    except RecursionError:
        raise SpecError(f"{path}: JSON nested too deeply to be a config") from None
    except ValueError as exc:  # an integer past Python's 4,300-digit conversion limit
        raise SpecError(f"{path}: not a config: {str(exc).split(':')[0]}") from None
    if not isinstance(data, dict):
        raise SpecError(f"{path}: expected a JSON object, got {type(data).__name__}")
    return data, str(path)


def model_from_hf_config(spec_type: type[ModelSpec], config: str | Path | Mapping[str, Any], *, id: str | None = None,
                         name: str | None = None,
                         quant_config: str | Path | Mapping[str, Any] | None = None) -> ModelSpec:
    """See :meth:`ModelSpec.from_hf_config` (``spec_type``: the class to build)."""
    data, where = load_config(config)
    quant: dict[str, Any] | None = None
    if quant_config is not None:
        quant, _ = load_config(quant_config)
    elif not isinstance(config, Mapping):
        sidecar = Path(where).parent / "hf_quant_config.json"
        if sidecar.is_file():
            quant, _ = load_config(sidecar)
    original = data
    model_type = data.get("model_type")
    supported = sorted({*READERS, *_WRAPPED})
    if model_type is None:
        raise SpecError(f"{where}: no 'model_type' field; supported: {', '.join(supported)}")
    if not isinstance(model_type, str) or model_type not in supported:
        raise SpecError(f"{where}: unsupported model_type {model_type!r}; supported: {', '.join(supported)}")
    if model_type in _WRAPPED:
        text = data.get("text_config")
        if isinstance(text, Mapping):
            data = {**text, "model_type": _WRAPPED[model_type]}
            model_type = _WRAPPED[model_type]
        elif model_type not in READERS or "hidden_size" not in data:
            raise SpecError(f"{where}: model_type {model_type!r} needs 'text_config' with the decoder's fields")
    reader = READERS[model_type]
    label = name or id or _name_from(original, where)
    try:
        fields = reader(_Config(data, model_type, where))
        checkpoint = checkpoint_formats(original, quant, where, is_moe=fields.get("moe") is not None)
        return spec_type(id=id, name=label, checkpoint=checkpoint, **fields)
    except ValidationError as exc:
        raise SpecError(f"{where}: {format_validation_error(exc)}") from None
    except SpecError:
        raise
    except (TypeError, ValueError, IndexError, KeyError, ArithmeticError) as exc:
        # A field of an unexpected shape that the typed reads above did not anticipate.
        raise SpecError(f"{where}: config fields of model_type {model_type!r} have an unexpected shape ({exc})") from None


def _name_from(data: Mapping[str, Any], where: str) -> str:
    name = data.get("_name_or_path")
    if isinstance(name, str) and name:
        return name
    if where != "config":
        path = Path(where)
        stem = path.parent.name if path.name == "config.json" else path.stem
        return stem.replace("--", "/")
    archs = data.get("architectures")
    if isinstance(archs, list) and archs:
        return str(archs[0])
    return str(data.get("model_type", "model"))
