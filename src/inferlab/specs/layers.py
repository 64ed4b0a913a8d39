"""The parts of a model spec: one decoder layer, multi-head latent attention, linear attention, a
mixture of experts."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

_STRICT = ConfigDict(frozen=True, extra="forbid")

AttentionWindow = Literal["full", "sliding", "chunked", "linear"]


class LayerSpec(BaseModel):
    """One decoder layer: its attention span and its MLP kind.

    Attributes
    ----------
    attention : {"full", "sliding", "chunked", "linear"}
        ``sliding`` attends to the last ``window`` tokens; ``chunked`` (Llama 4) to the
        tokens of the current ``window``-sized chunk. Both cap the KV cache at ``window``.
        ``linear``: a linear-attention layer (Gated DeltaNet, :class:`LinearAttentionSpec`),
        which keeps a fixed-size state per sequence instead of a KV cache.
    window : int or None
        Window or chunk length [token]; None for full and linear attention.
    mlp : {"dense", "moe"}
        Dense MLP or mixture of experts.
    intermediate_size : int
        Width of the dense MLP (0 for MoE layers).
    """

    model_config = _STRICT

    attention: AttentionWindow = "full"
    window: int | None = Field(default=None, ge=1)
    mlp: Literal["dense", "moe"] = "dense"
    intermediate_size: int = Field(default=0, ge=0)

    @model_validator(mode="after")
    def _check(self) -> LayerSpec:
        if (self.attention in ("full", "linear")) != (self.window is None):
            raise ValueError("a window is required for sliding/chunked attention and forbidden for full and linear")
        if self.mlp == "dense" and self.intermediate_size <= 0:
            raise ValueError("a dense layer needs intermediate_size > 0")
        return self

    @property
    def kind(self) -> str:
        """Short label, e.g. ``"full"`` or ``"sliding(1024)"``."""
        return self.attention if self.window is None else f"{self.attention}({self.window})"


class MLASpec(BaseModel):
    """Multi-head latent attention (DeepSeek-V2/V3): the cache holds one latent per token.

    Notes
    -----
    Cached elements per token per layer: ``kv_lora_rank + qk_rope_head_dim``
    (512 + 64 = 576 for DeepSeek-V3), whatever ``num_key_value_heads`` says.
    """

    model_config = _STRICT

    q_lora_rank: int | None = Field(default=None, ge=1)
    kv_lora_rank: int = Field(ge=1)
    qk_nope_head_dim: int = Field(ge=1)
    qk_rope_head_dim: int = Field(ge=1)
    v_head_dim: int = Field(ge=1)


class LinearAttentionSpec(BaseModel):
    """Gated DeltaNet (Qwen3-Next, Qwen3.5): a linear-attention layer with a recurrent state.

    Each token's queries and keys (``num_key_heads`` of ``key_head_dim``) and values
    (``num_value_heads`` of ``value_head_dim``, the keys shared by groups of value heads) pass
    a short causal convolution (``conv_kernel`` taps) and update one ``key_head_dim x
    value_head_dim`` matrix per value head: the layer's whole memory of the sequence, whatever
    its length. The state is kept at ``state_format`` (the config's ``mamba_ssm_dtype``; None
    where the config does not say: the engine chooses, the model's 16-bit dtype until a
    deployment names one), the convolution's last ``conv_kernel - 1`` inputs in 16-bit.

    References
    ----------
    .. [1] Yang, Kautz, Hatamizadeh, "Gated Delta Networks: Improving Mamba2 with Delta Rule",
       ICLR 2025 (the recurrence and its chunked form).
    """

    model_config = _STRICT

    num_key_heads: int = Field(ge=1)
    num_value_heads: int = Field(ge=1)
    key_head_dim: int = Field(ge=1)
    value_head_dim: int = Field(ge=1)
    conv_kernel: int = Field(default=4, ge=1)
    state_format: Literal["fp32", "bf16", "fp16"] | None = None

    @model_validator(mode="after")
    def _check(self) -> LinearAttentionSpec:
        if self.num_value_heads % self.num_key_heads:
            raise ValueError(f"num_value_heads {self.num_value_heads} is not a multiple of num_key_heads "
                             f"{self.num_key_heads}")
        return self

    @property
    def key_dim(self) -> int:
        """Query (and key) features of a token: ``num_key_heads x key_head_dim``."""
        return self.num_key_heads * self.key_head_dim

    @property
    def value_dim(self) -> int:
        """Value (and output) features of a token: ``num_value_heads x value_head_dim``."""
        return self.num_value_heads * self.value_head_dim

    @property
    def conv_channels(self) -> int:
        """Channels the convolution runs over: queries, keys and values."""
        return 2 * self.key_dim + self.value_dim

    @property
    def state_elements(self) -> int:
        """Elements of one sequence's recurrent state in one layer: a matrix per value head."""
        return self.num_value_heads * self.key_head_dim * self.value_head_dim

    @property
    def conv_elements(self) -> int:
        """Elements of one sequence's convolution state in one layer: the last taps' inputs."""
        return self.conv_channels * (self.conv_kernel - 1)


class MoESpec(BaseModel):
    """Mixture-of-experts structure of the MoE layers."""

    model_config = _STRICT

    num_experts: int = Field(ge=1, description="Routed experts per MoE layer.")
    num_experts_per_tok: int = Field(ge=1, description="Routed experts each token uses (top-k).")
    moe_intermediate_size: int = Field(ge=1, description="Width of one routed expert.")
    num_shared_experts: int = Field(default=0, ge=0)
    shared_expert_intermediate_size: int = Field(default=0, ge=0)
    router_bias: bool = False
    expert_bias: bool = False

    @model_validator(mode="after")
    def _check(self) -> MoESpec:
        if self.num_experts_per_tok > self.num_experts:
            raise ValueError(f"num_experts_per_tok {self.num_experts_per_tok} exceeds num_experts {self.num_experts}")
        if self.num_shared_experts and not self.shared_expert_intermediate_size:
            raise ValueError("shared experts need shared_expert_intermediate_size")
        return self
