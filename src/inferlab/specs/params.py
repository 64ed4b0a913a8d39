"""Parameter counts of a :class:`~inferlab.specs.model.ModelSpec`, per component.

Conventions (see each model file for what its published count includes):

- ``total`` is the main model: embeddings, every decoder layer, final norm and an
  untied LM head; DeepSeek's multi-token-prediction module is kept apart (``mtp``).
- ``active`` is what one token passes through: ``total`` minus the routed experts it
  does not use.
- Norm weights and biases are counted; rotary tables are buffers, not parameters.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .model import LayerSpec, ModelSpec


@dataclass(frozen=True)
class ParamCounts:
    """Parameters per component [count]."""

    embedding: int
    lm_head: int
    attention: int
    dense_mlp: int
    routed_experts: int
    routed_experts_active: int
    shared_experts: int
    router: int
    norms: int
    mtp: int

    @property
    def total(self) -> int:
        """Main-model parameters (MTP excluded)."""
        return (
            self.embedding + self.lm_head + self.attention + self.dense_mlp
            + self.routed_experts + self.shared_experts + self.router + self.norms
        )

    @property
    def active(self) -> int:
        """Parameters used per token."""
        return self.total - self.routed_experts + self.routed_experts_active

    @property
    def total_with_mtp(self) -> int:
        """Main model plus multi-token-prediction modules (embedding and head shared)."""
        return self.total + self.mtp


def _norm(spec: ModelSpec, width: int) -> int:
    return width * (2 if spec.norm == "layernorm" else 1)


def attention_params(spec: ModelSpec) -> int:
    """Parameters of one attention block (projections, biases, q/k norms, sinks)."""
    h, nh, nkv, hd = spec.hidden_size, spec.num_attention_heads, spec.num_key_value_heads, spec.head_dim
    if spec.mla is not None:
        m = spec.mla
        qk = m.qk_nope_head_dim + m.qk_rope_head_dim
        q = h * nh * qk if m.q_lora_rank is None else h * m.q_lora_rank + m.q_lora_rank + m.q_lora_rank * nh * qk
        kv = h * (m.kv_lora_rank + m.qk_rope_head_dim) + m.kv_lora_rank + m.kv_lora_rank * nh * (m.qk_nope_head_dim + m.v_head_dim)
        return q + kv + nh * m.v_head_dim * h
    n = h * nh * hd + 2 * h * nkv * hd + nh * hd * h
    n += h * nh * hd if spec.attention_output_gate else 0  # the gate's projection beside the queries'
    n += (nh * hd + 2 * nkv * hd) if spec.qkv_bias else 0
    n += h if spec.o_bias else 0
    if spec.qk_norm:
        n += 2 * hd if spec.qk_norm_span == "head" else (nh + nkv) * hd
    n += nh if spec.attention_sinks else 0
    return n


def linear_attention_params(spec: ModelSpec) -> int:
    """Parameters of one linear-attention (Gated DeltaNet) block: the input projection to
    queries, keys, values and the output gate (``z``), the per-head decay and update gates'
    (``a``, ``b``), the causal convolution over queries, keys and values (no bias), the decay's
    two per-head vectors (``A_log``, ``dt_bias``), the gated output norm (one value head wide)
    and the output projection."""
    lin = spec.linear_attention
    if lin is None:
        return 0
    h, hv = spec.hidden_size, lin.num_value_heads
    projections = h * (2 * lin.key_dim + 2 * lin.value_dim) + h * 2 * hv + lin.value_dim * h
    return projections + lin.conv_channels * lin.conv_kernel + 2 * hv + lin.value_head_dim


def dense_mlp_params(spec: ModelSpec, width: int) -> int:
    """Parameters of a dense MLP of intermediate ``width``."""
    h = spec.hidden_size
    mats = 3 if spec.gated_mlp else 2
    bias = ((2 if spec.gated_mlp else 1) * width + h) if spec.mlp_bias else 0
    return mats * h * width + bias


def expert_params(spec: ModelSpec) -> int:
    """Parameters of one routed expert."""
    moe = spec.moe
    if moe is None:
        return 0
    h, w = spec.hidden_size, moe.moe_intermediate_size
    return 3 * h * w + ((2 * w + h) if moe.expert_bias else 0)


def _layer_mlp(spec: ModelSpec, layer: LayerSpec) -> tuple[int, int, int, int, int]:
    """(dense, routed, routed_active, shared, router) parameters of one layer's MLP."""
    if layer.mlp == "dense":
        return dense_mlp_params(spec, layer.intermediate_size), 0, 0, 0, 0
    moe = spec.moe
    if moe is None:  # ModelSpec validation forbids this; kept for type narrowing
        raise ValueError("MoE layer without MoE structure")
    h = spec.hidden_size
    per_expert = expert_params(spec)
    shared = moe.num_shared_experts * 3 * h * moe.shared_expert_intermediate_size
    router = h * moe.num_experts + (moe.num_experts if moe.router_bias else 0)
    return 0, moe.num_experts * per_expert, moe.num_experts_per_tok * per_expert, shared, router


def count_params(spec: ModelSpec) -> ParamCounts:
    """Count every parameter of ``spec`` by component.

    Notes
    -----
    Per layer: attention + MLP (dense ``3*H*I`` gated or ``2*H*I``; MoE ``E`` experts of
    ``3*H*I_e`` plus shared experts plus router ``H*E``) + norms. Embedding ``V*H``; an
    untied LM head adds ``V*H``. One MTP module (DeepSeek-V3) is a decoder layer of the
    last layer's kind (with full attention) plus a ``2H x H`` projection and three norms.
    A linear-attention layer (Gated DeltaNet) has its own projections
    (:func:`linear_attention_params`) in place of attention's.
    """
    h = spec.hidden_size
    attn = attention_params(spec)
    linear = linear_attention_params(spec)
    dense = routed = active = shared = router = 0
    for layer in spec.layers:
        d, r, a, s, ro = _layer_mlp(spec, layer)
        dense, routed, active, shared, router = dense + d, routed + r, active + a, shared + s, router + ro
    layers = spec.num_hidden_layers
    norms = layers * spec.norms_per_layer * _norm(spec, h) + _norm(spec, h)
    embedding = spec.vocab_size * h
    lm_head = 0 if spec.tie_word_embeddings else spec.vocab_size * h + (spec.vocab_size if spec.lm_head_bias else 0)
    mtp = 0
    if spec.num_mtp_layers:
        last = spec.layers[-1]
        one_layer = attn + sum(_layer_mlp(spec, last)) - _layer_mlp(spec, last)[2]
        one_layer += spec.norms_per_layer * _norm(spec, h)
        mtp = spec.num_mtp_layers * (one_layer + 2 * h * h + 3 * _norm(spec, h))
    return ParamCounts(
        embedding=embedding,
        lm_head=lm_head,
        attention=sum(linear if layer.attention == "linear" else attn for layer in spec.layers),
        dense_mlp=dense,
        routed_experts=routed,
        routed_experts_active=active,
        shared_experts=shared,
        router=router,
        norms=norms,
        mtp=mtp,
    )
