"""The parts of a model spec: one decoder layer, multi-head latent attention, a mixture of experts."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

_STRICT = ConfigDict(frozen=True, extra="forbid")

AttentionWindow = Literal["full", "sliding", "chunked"]


class LayerSpec(BaseModel):
    """One decoder layer: its attention span and its MLP kind.

    Attributes
    ----------
    attention : {"full", "sliding", "chunked"}
        ``sliding`` attends to the last ``window`` tokens; ``chunked`` (Llama 4) to the
        tokens of the current ``window``-sized chunk. Both cap the KV cache at ``window``.
    window : int or None
        Window or chunk length [token]; None for full attention.
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
        if (self.attention == "full") != (self.window is None):
            raise ValueError("a window is required for sliding/chunked attention and forbidden for full")
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
