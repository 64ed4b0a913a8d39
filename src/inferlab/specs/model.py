"""Typed model specifications: the architecture facts that cost time and memory.

A :class:`ModelSpec` is built from a Hugging Face ``config.json`` (see
:mod:`inferlab.specs.hf_config`) and keeps Hugging Face field names. The layer stack is
explicit (:class:`LayerSpec` per layer) so sliding-window, chunked and MoE patterns are
data, not special cases.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from functools import cached_property
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

from ..errors import UnitError
from ..precision import number_format
from ..units import to_si_array
from .card import ModelCard
from .checkpoint import CheckpointFormats
from .layers import AttentionWindow, LayerSpec, LinearAttentionSpec, MLASpec, MoESpec  # noqa: F401 - a model's parts
from .params import ParamCounts, count_params

_STRICT = ConfigDict(frozen=True, extra="forbid")

class ModelSpec(BaseModel):
    """A decoder-only transformer, described by the figures that set its cost.

    Field names follow Hugging Face ``config.json``. Derived figures
    (:attr:`total_params`, :meth:`kv_cache_bytes_per_token`, :meth:`weight_bytes`, ...)
    are computed, never stored.
    """

    model_config = _STRICT

    id: str | None = None
    name: str
    model_type: str
    hidden_size: int = Field(ge=1)
    num_hidden_layers: int = Field(ge=1)
    num_attention_heads: int = Field(ge=1)
    num_key_value_heads: int = Field(ge=1)
    head_dim: int = Field(ge=1)
    vocab_size: int = Field(ge=1)
    max_position_embeddings: int = Field(ge=1)
    tie_word_embeddings: bool = False
    gated_mlp: bool = Field(default=True, description="SwiGLU/GeGLU (3 matrices) vs plain (2).")
    hidden_act: str = "silu"
    norm: Literal["rmsnorm", "layernorm"] = "rmsnorm"
    norms_per_layer: int = Field(default=2, ge=0, le=4)
    qkv_bias: bool = False
    o_bias: bool = False
    mlp_bias: bool = False
    lm_head_bias: bool = False
    qk_norm: bool = False
    qk_norm_span: Literal["head", "layer"] = Field(
        default="head", description="RMSNorm of q and k per head (Qwen3: one head_dim-wide weight each) or over "
                                    "all heads at once (MiniMax-M2: its statistics need an all-reduce under TP).")
    attention_sinks: bool = False
    attention_output_gate: bool = Field(
        default=False, description="A sigmoid gate on the attention output, its weights beside the queries' "
                                   "(Qwen3-Next, Qwen3.5: q_proj twice as wide).")
    mla: MLASpec | None = None
    linear_attention: LinearAttentionSpec | None = None
    moe: MoESpec | None = None
    layers: tuple[LayerSpec, ...]
    num_mtp_layers: int = Field(default=0, ge=0, description="Multi-token-prediction modules (DeepSeek).")
    checkpoint: CheckpointFormats | None = Field(
        default=None, description="Formats of the released checkpoint per tensor kind, with their source; None: 16-bit.")
    card: ModelCard | None = Field(default=None, description="Provenance, for catalog models.")

    @model_validator(mode="after")
    def _check(self) -> ModelSpec:
        if len(self.layers) != self.num_hidden_layers:
            raise ValueError(f"{len(self.layers)} layer entries for num_hidden_layers={self.num_hidden_layers}")
        if self.num_attention_heads % self.num_key_value_heads and self.mla is None:
            raise ValueError(
                f"num_attention_heads {self.num_attention_heads} is not a multiple of "
                f"num_key_value_heads {self.num_key_value_heads}"
            )
        if any(layer.mlp == "moe" for layer in self.layers) and self.moe is None:
            raise ValueError("MoE layers present but no moe structure given")
        if any(layer.attention == "linear" for layer in self.layers) and self.linear_attention is None:
            raise ValueError("linear-attention layers present but no linear_attention structure given")
        if all(layer.attention == "linear" for layer in self.layers):
            raise ValueError("every layer is linear attention: a hybrid model keeps some attention layers")
        if self.linear_attention is not None and not any(layer.attention == "linear" for layer in self.layers):
            raise ValueError("linear_attention given but no layer is linear attention")
        return self

    # --- construction ---------------------------------------------------------------
    @classmethod
    def from_hf_config(cls, config: str | Any, *, id: str | None = None, name: str | None = None,
                       quant_config: str | Any | None = None) -> ModelSpec:
        """Build a spec from a Hugging Face ``config.json`` (a path, a folder or a parsed dict).

        Never touches the network. The config's ``quantization_config`` and a ModelOpt
        ``hf_quant_config.json`` next to it (or passed as ``quant_config``) set the
        checkpoint's formats per tensor kind (:attr:`checkpoint`).

        Raises
        ------
        SpecError
            Naming the missing field, or the supported architectures when
            ``model_type`` is unknown.
        """
        from .hf_config import model_from_hf_config

        return model_from_hf_config(cls, config, id=id, name=name, quant_config=quant_config)

    # --- structure --------------------------------------------------------------------
    @property
    def attention_type(self) -> Literal["MHA", "GQA", "MQA", "MLA"]:
        """How keys and values are shared across query heads."""
        if self.mla is not None:
            return "MLA"
        if self.num_key_value_heads == self.num_attention_heads:
            return "MHA"
        return "MQA" if self.num_key_value_heads == 1 else "GQA"

    @property
    def is_moe(self) -> bool:
        """Whether any layer is a mixture of experts."""
        return self.moe is not None

    @property
    def num_moe_layers(self) -> int:
        """Layers whose MLP is a mixture of experts."""
        return sum(layer.mlp == "moe" for layer in self.layers)

    @property
    def num_dense_layers(self) -> int:
        """Layers with a dense MLP."""
        return self.num_hidden_layers - self.num_moe_layers

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> ModelSpec:
        """A copy (pydantic's), without the values computed from the original's fields:
        ``model_copy(update=...)`` would otherwise carry stale layer groups and counts."""
        copied = super().model_copy(update=update, deep=deep)
        if update:
            for name, attr in vars(type(self)).items():
                if isinstance(attr, cached_property):
                    copied.__dict__.pop(name, None)
        return copied

    @cached_property
    def layer_groups(self) -> tuple[tuple[LayerSpec, int], ...]:
        """Distinct layers with how many times each occurs, in order of first appearance."""
        return tuple(Counter(self.layers).items())

    @property
    def layer_kinds(self) -> dict[str, int]:
        """Count of layers per attention kind, e.g. ``{"sliding(1024)": 52, "full": 10}``."""
        return dict(self._layer_kinds)

    @cached_property
    def _layer_kinds(self) -> tuple[tuple[str, int], ...]:
        return tuple(Counter(layer.kind for layer in self.layers).items())

    @cached_property
    def _kv_layers(self) -> tuple[tuple[str, Any, int], ...]:
        """Layers with a KV cache by attention kind and window (None: full attention), as
        ``(attention, window, count)``; linear-attention layers hold a state instead
        (:meth:`recurrent_state_bytes`)."""
        counts = Counter((layer.attention, layer.window) for layer in self.layers if layer.attention != "linear")
        return tuple((attention, window, n) for (attention, window), n in counts.items())

    def widest_window(self, kinds: tuple[str, ...] = ("sliding", "chunked")) -> int:
        """The widest window of the windowed layers of ``kinds`` [token]; 0 where there are none."""
        return max((w for attention, w, _ in self._kv_layers if w is not None and attention in kinds), default=0)

    @property
    def num_linear_layers(self) -> int:
        """Linear-attention layers (a recurrent state each, no KV cache)."""
        return sum(layer.attention == "linear" for layer in self.layers)

    # --- parameters -------------------------------------------------------------------
    @cached_property
    def param_counts(self) -> ParamCounts:
        """Parameter count per component."""
        return count_params(self)

    @property
    def total_params(self) -> int:
        """All parameters of the main model, embeddings and LM head included, MTP excluded."""
        return self.param_counts.total

    @property
    def active_params(self) -> int:
        """Parameters one token passes through (top-k of the routed experts)."""
        return self.param_counts.active

    def weight_bytes(self, precision: str = "bf16", *, expert_precision: str | None = None) -> float:
        """Bytes of all main-model weights stored in ``precision`` [B].

        Parameters
        ----------
        precision : str
            Storage format of every weight (``bf16``, ``fp8``, ``nvfp4``...); block scales
            are counted (see :mod:`inferlab.precision`).
        expert_precision : str, optional
            Different format for routed-expert weights (gpt-oss ships them in MXFP4).
        """
        counts = self.param_counts
        base = number_format(precision).bytes_per_element
        expert = number_format(expert_precision).bytes_per_element if expert_precision else base
        return float((counts.total - counts.routed_experts) * base + counts.routed_experts * expert)

    # --- KV cache ---------------------------------------------------------------------
    def kv_elements_per_token_per_layer(self) -> int:
        """Cached elements per token in one layer (K and V, or the MLA latent)."""
        if self.mla is not None:
            return self.mla.kv_lora_rank + self.mla.qk_rope_head_dim
        return 2 * self.num_key_value_heads * self.head_dim

    def kv_cache_bytes_per_token(self, precision: str = "bf16") -> dict[str, float]:
        """KV-cache bytes per token, summed over the layers of each attention kind [B].

        Windowed kinds (``sliding(W)``, ``chunked(W)``) only hold this much per token for
        the last ``W`` tokens of a sequence; see :meth:`kv_cache_bytes`.

        Examples
        --------
        >>> from inferlab import load_model
        >>> load_model("llama-3.1-70b").kv_cache_bytes_per_token("bf16")
        {'full': 327680.0}
        """
        per_layer = self.kv_elements_per_token_per_layer() * number_format(precision).bytes_per_element
        return {kind: float(n * per_layer) for kind, n in self.layer_kinds.items() if kind != "linear"}

    def kv_share_held_whole(self, freed: tuple[str, ...] = ("sliding", "chunked")) -> float:
        """Share of a token's KV bytes (every layer with a cache holding it) in layers that keep a
        sequence's every token: the full-attention ones and the windowed kinds not in ``freed``
        (an engine that does not free what leaves their window); 1 where nothing is freed.

        Examples
        --------
        >>> from inferlab import load_model
        >>> load_model("gpt-oss-120b").kv_share_held_whole()  # 18 full, 18 sliding(128) layers
        0.5
        """
        counts = [(window is None or attention not in freed, n) for attention, window, n in self._kv_layers]
        total = sum(n for _, n in counts)
        return sum(n for whole, n in counts if whole) / total if total else 1.0

    def kv_cache_bytes(self, context_len: Any, precision: str = "bf16",
                       freed: tuple[str, ...] = ("sliding", "chunked")) -> np.ndarray:
        """KV-cache bytes of one sequence at ``context_len`` tokens [B], vectorized.

        ``context_len`` is a number or array of tokens, or a pint quantity (``Q("8 ktok")``);
        ``freed``, the windowed kinds whose layers keep a window's tokens only (an engine that
        frees what leaves it), the others holding every token.

        Notes
        -----
        ``sum over layers of per_layer_bytes * min(context_len, window_or_inf)``.
        """
        ctx = to_si_array(context_len, "token", "context_len")
        if np.any(ctx < 0) or not np.all(np.isfinite(ctx)):
            raise UnitError(f"context_len must be finite and >= 0 tokens, got {context_len!r}")
        per_layer = self.kv_elements_per_token_per_layer() * number_format(precision).bytes_per_element
        total = np.zeros_like(ctx)
        for attention, window, n in self._kv_layers:
            span = ctx if window is None or attention not in freed else np.minimum(ctx, window)
            total = total + n * per_layer * span
        return total

    def recurrent_state_bytes(self) -> float:
        """Bytes of one sequence's linear-attention state over all layers [B]: what it holds in
        place of a KV cache in those layers, at any length (0 without linear attention).

        Notes
        -----
        Per layer: ``value heads x key_head_dim x value_head_dim`` at the state's format, plus
        the convolution's ``(conv_kernel - 1) x conv channels`` in 16-bit. Qwen3.5-397B-A17B:
        45 layers x (64 x 128 x 128 x 4 B + 12,288 x 3 x 2 B) = 45 x 4,268,032 B = 192.1 MB.
        """
        lin = self.linear_attention
        if lin is None:
            return 0.0
        per_layer = lin.state_elements * number_format(lin.state_format or "bf16").bytes_per_element + \
            lin.conv_elements * 2.0
        return float(self.num_linear_layers * per_layer)

    def _repr_html_(self) -> str:
        from .render import model_html

        return model_html(self)
