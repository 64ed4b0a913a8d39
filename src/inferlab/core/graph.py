"""The op graph of one step of a model, unsharded.

A *step* runs ``new_tokens`` tokens for each of ``batch`` sequences that already hold
``context`` tokens in the KV cache: a prefill is ``(B, S, 0)``, a decode step ``(B, 1, L)``.
Layers with the same attention span and MLP are one group, built once and counted.
Every shape may be a numpy array; the graph broadcasts over a sweep grid.

References
----------
.. [1] Dao et al., "FlashAttention", NeurIPS 2022 (no score matrix in memory).
.. [2] DeepSeek-AI, "DeepSeek-V2", 2024, sec. 2.1: MLA with absorbed projections at decode.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from ..precision import number_format
from ..specs.model import LayerSpec, ModelSpec
from .ops import TP_STATISTICS, ArrayLike, Attention, Collective, Elementwise, Gemm, Op, RecurrentState
from .quantization import PrecisionConfig

Phase = Literal["prefill", "decode"]


@dataclass(frozen=True)
class Step:
    """Shape of one step [token counts; arrays broadcast]."""

    phase: Phase
    batch: ArrayLike
    new_tokens: ArrayLike
    context: ArrayLike

    @property
    def tokens(self) -> ArrayLike:
        """Tokens processed in the step: ``batch * new_tokens``."""
        return self.batch * self.new_tokens

    @classmethod
    def prefill(cls, batch: ArrayLike, prompt: ArrayLike, cached: ArrayLike = 0.0) -> Step:
        """Prefill ``prompt`` tokens per sequence, ``cached`` of them already in the cache."""
        return cls("prefill", np.asarray(batch, float), np.asarray(prompt, float) - cached, np.asarray(cached, float))

    @classmethod
    def decode(cls, batch: ArrayLike, context: ArrayLike) -> Step:
        """One decode step of ``batch`` sequences holding ``context`` tokens."""
        # new_tokens stays a scalar so that only the attention ops carry the context axis
        return cls("decode", np.asarray(batch, float), np.ones(()), np.asarray(context, float))


@dataclass(frozen=True)
class StepPrecision:
    """Storage formats and the tensor precisions the op kinds compute at on one GPU.

    ``gemm``/``kernel`` are those of the linear layers, ``expert_gemm``/``expert_kernel``
    those of the routed experts and ``proj_gemm``/``proj_kernel`` those of the attention
    projections (each in their own weight format); empty: as the linear layers.
    ``decode_attention`` is the precision decode attention computes at (empty: ``attention``).
    """

    config: PrecisionConfig
    gemm: str
    attention: str
    head: str
    kernel: str = ""
    expert_gemm: str = ""
    expert_kernel: str = ""
    proj_gemm: str = ""
    proj_kernel: str = ""
    decode_attention: str = ""


def experts_touched(tokens: ArrayLike, num_experts: int, top_k: int) -> ArrayLike:
    """Expected distinct experts used by ``tokens`` tokens under uniform top-k routing.

    Notes
    -----
    Each expert is missed by one token with probability ``1 - k/E``, so
    ``E * (1 - (1 - k/E) ** T)`` experts are touched.
    """
    return num_experts * (1.0 - (1.0 - top_k / num_experts) ** np.asarray(tokens, float))


def build_graph(model: ModelSpec, step: Step, precision: StepPrecision,
                attention: Literal["flash", "naive"] = "flash") -> tuple[Op, ...]:
    """All ops of one step, unsharded, in execution order per layer group."""
    ops: list[Op] = []
    t = step.tokens
    h = model.hidden_size
    ops.append(Elementwise("embedding", elements_read=0.0, elements_written=t * h,
                           weight_bytes=t * h * 2.0, precision=precision.head))
    for layer, count in model.layer_groups:
        meta = {"group": f"{layer.kind}/{layer.mlp}", "count": count}
        ops += _attention_block(model, layer, step, precision, attention, meta)
        ops += _mlp_block(model, layer, step, precision, meta)
    last = step.batch if step.phase == "prefill" else t  # logits only for the last prompt token
    ops.append(Elementwise("final_norm", elements_read=last * h, elements_written=last * h))
    ops.append(Gemm("lm_head", m=last, n=model.vocab_size, k=h, shard="vocab", precision=precision.head))
    return tuple(ops)


def _attention_block(model: ModelSpec, layer: LayerSpec, step: Step, prec: StepPrecision,
                     impl: Literal["flash", "naive"], meta: dict) -> list[Op]:
    cfg = prec.config
    w = number_format(cfg.attention).bytes_per_element
    a = number_format(cfg.activations).bytes_per_element
    kv = number_format(cfg.kv_cache).bytes_per_element
    t, h, nh = step.tokens, model.hidden_size, model.num_attention_heads
    window = float(layer.window) if layer.window else np.inf
    gemm = {"weight_bytes_per_element": w, "act_bytes_per_element": a, "precision": prec.proj_gemm or prec.gemm,
            "kernel": prec.proj_kernel or prec.kernel, **meta}
    ops: list[Op] = [Elementwise("input_norm", elements_read=t * h, elements_written=t * h, **meta)]
    if layer.attention == "linear":
        return ops + _linear_attention_ops(model, step, gemm, prec, meta) + [
            Elementwise("attention_residual", elements_read=2 * t * h, elements_written=t * h, **meta)]
    common = {"batch": step.batch, "new_tokens": step.new_tokens, "context": step.context, "window": window,
              "kv_bytes_per_element": kv, "act_bytes_per_element": a, "implementation": impl,
              "precision": (prec.decode_attention or prec.attention) if step.phase == "decode" else prec.attention,
              "shard": "heads", **meta}
    if model.mla is None:
        hd, nkv = model.head_dim, model.num_key_value_heads
        gate = nh * hd if model.attention_output_gate else 0  # the output gate's features beside the queries'
        ops.append(Gemm("qkv_proj", m=t, n=(nh + 2 * nkv) * hd + gate, k=h, kv_n=2 * nkv * hd, shard="qkv",
                        shard_units=nkv, **gemm))
        if model.qk_norm and model.qk_norm_span == "layer":
            # RMS statistics of q and of k over all heads: two FP32 sums a token, summed over the
            # tensor-parallel ranks that hold the heads (one group until tensor parallelism sizes it)
            ops.append(Collective("all_reduce_qk_norm", message_bytes=t * 2 * 4.0, role=TP_STATISTICS, **meta))
        ops.append(Attention("attention", heads=nh, kv_heads=nkv, qk_dim=hd, v_dim=hd, kv_elements=2 * nkv * hd,
                             **common))
        if gate:  # sigmoid(gate) x output, fused into the attention epilogue's neighbours
            ops.append(Elementwise("output_gate", elements_read=2 * t * gate, elements_written=t * gate,
                                   flops_per_element=4.0, shard="column", **meta))
        ops.append(Gemm("o_proj", m=t, n=h, k=nh * hd, shard="row", **gemm))
    else:
        ops += _mla_ops(model, step, gemm, common)
    ops.append(Elementwise("attention_residual", elements_read=2 * t * h, elements_written=t * h, **meta))
    return ops


def _linear_attention_ops(model: ModelSpec, step: Step, gemm: dict, prec: StepPrecision, meta: dict) -> list[Op]:
    """A Gated DeltaNet layer: one projection to queries, keys, values, the output gate and the
    two per-head gates; a causal convolution over queries, keys and values (its own kernel);
    the delta-rule state update (:class:`~.ops.RecurrentState`, computed in 16-bit and FP32 whatever
    the weights' format: flash-linear-attention's kernels); the gated norm of the output;
    the output projection (row-parallel, followed by the residual's all-reduce)."""
    lin = model.linear_attention
    if lin is None:  # ModelSpec validation forbids linear layers without the structure
        raise ValueError("linear-attention ops requested for a model without linear attention")
    t, h, hv = step.tokens, model.hidden_size, lin.num_value_heads
    a = number_format(prec.config.activations).bytes_per_element
    state = model.recurrent_state_bytes() / model.num_linear_layers  # one layer's, at its formats
    conv = t * lin.conv_channels
    return [
        Gemm("in_proj", m=t, n=2 * lin.key_dim + 2 * lin.value_dim + 2 * hv, k=h, shard="column", **gemm),
        Elementwise("conv1d", elements_read=conv, elements_written=conv, flops_per_element=2.0 * lin.conv_kernel,
                    own_kernel=True, shard="column", **meta),
        RecurrentState("delta_rule", batch=step.batch, new_tokens=step.new_tokens, context=step.context, heads=hv,
                       kv_heads=lin.num_key_heads, qk_dim=lin.key_head_dim, v_dim=lin.value_head_dim,
                       kv_elements=state, act_bytes_per_element=a, precision="bf16", shard="heads",
                       stepwise=step.phase == "decode", **meta),
        Elementwise("gated_norm", elements_read=2 * t * lin.value_dim, elements_written=t * lin.value_dim,
                    flops_per_element=4.0, shard="column", **meta),
        Gemm("out_proj", m=t, n=h, k=lin.value_dim, shard="row", **gemm),
    ]


def _mla_ops(model: ModelSpec, step: Step, gemm: dict, common: dict) -> list[Op]:
    m = model.mla
    if m is None:  # callers route only MLA models here
        raise ValueError("MLA ops requested for a model without MLA")
    t, h, nh = step.tokens, model.hidden_size, model.num_attention_heads
    qk = m.qk_nope_head_dim + m.qk_rope_head_dim
    latent = m.kv_lora_rank + m.qk_rope_head_dim
    if m.q_lora_rank:
        q = [Gemm("q_a_proj", m=t, n=m.q_lora_rank, k=h, **gemm),
             Gemm("q_b_proj", m=t, n=nh * qk, k=m.q_lora_rank, shard="column", **gemm)]
    else:
        q = [Gemm("q_proj", m=t, n=nh * qk, k=h, shard="column", **gemm)]
    ops = q + [Gemm("kv_a_proj", m=t, n=latent, k=h, **gemm)]
    # The compressed query and key-value latents are RMS-normalized, and the rotary part of
    # queries and keys rotated, by kernels of their own before the up-projections and attention.
    norms = t * ((m.q_lora_rank or 0) + m.kv_lora_rank)  # no query latent without q_lora_rank (V2-Lite)
    rope = t * (nh + 1) * m.qk_rope_head_dim
    ops += [Elementwise("latent_norms", elements_read=norms, elements_written=norms, own_kernel=True,
                        group=gemm["group"], count=gemm["count"]),
            Elementwise("rope", elements_read=rope, elements_written=rope, own_kernel=True, shard="column",
                        group=gemm["group"], count=gemm["count"])]
    if step.phase == "decode":
        # Absorbed: queries move into the latent space, attention runs over the 576-wide latent.
        ops += [
            Gemm("q_absorb", m=t * nh, n=m.kv_lora_rank, k=m.qk_nope_head_dim, weight_copies=nh, shard="heads", **gemm),
            Attention("attention", heads=nh, kv_heads=1, qk_dim=latent, v_dim=m.kv_lora_rank, kv_elements=latent,
                      latent=True, **common),
            Gemm("v_absorb", m=t * nh, n=m.v_head_dim, k=m.kv_lora_rank, weight_copies=nh, shard="heads", **gemm),
        ]
    else:
        # Prefill decompresses the cached latents into per-head keys and values.
        cached = step.batch * (step.context + step.new_tokens)
        ops += [
            Gemm("kv_b_proj", m=cached, n=nh * (m.qk_nope_head_dim + m.v_head_dim), k=m.kv_lora_rank, shard="column", **gemm),
            Attention("attention", heads=nh, kv_heads=1, qk_dim=qk, v_dim=m.v_head_dim, kv_elements=latent, **common),
        ]
    return ops + [Gemm("o_proj", m=t, n=h, k=nh * m.v_head_dim, shard="row", **gemm)]


def _mlp_block(model: ModelSpec, layer: LayerSpec, step: Step, prec: StepPrecision, meta: dict) -> list[Op]:
    cfg = prec.config
    gemm = {"weight_bytes_per_element": number_format(cfg.weights).bytes_per_element,
            "act_bytes_per_element": number_format(cfg.activations).bytes_per_element, "precision": prec.gemm,
            "kernel": prec.kernel, **meta}
    t, h = step.tokens, model.hidden_size
    up = 2 if model.gated_mlp else 1
    ops: list[Op] = [Elementwise("post_attention_norm", elements_read=t * h, elements_written=t * h, **meta)]
    if layer.mlp == "dense":
        width = layer.intermediate_size
        return ops + _ffn("mlp", t, h, width, up, 1.0, gemm) + [
            Elementwise("mlp_residual", elements_read=2 * t * h, elements_written=t * h, **meta)]
    moe = model.moe
    if moe is None:  # ModelSpec validation forbids MoE layers without a MoE structure
        raise ValueError("MoE layer without MoE structure")
    touched = experts_touched(t, moe.num_experts, moe.num_experts_per_tok)
    ops.append(Gemm("router", m=t, n=moe.num_experts, k=h, precision=prec.head, **meta))
    # Top-k selection over the router's FP32 logits, then the tokens copied into expert order
    # (one row per token and chosen expert): two kernels of their own before the grouped GEMMs.
    k = moe.num_experts_per_tok
    ops.append(Elementwise("moe_routing", elements_read=t * moe.num_experts, elements_written=2 * t * k,
                           bytes_per_element=4.0, own_kernel=True, **meta))
    ops.append(Elementwise("moe_permute", elements_read=t * k * h, elements_written=t * k * h, own_kernel=True,
                           role="routed_expert", **meta))
    experts = {**gemm, "weight_bytes_per_element": number_format(cfg.experts).bytes_per_element,
               "precision": prec.expert_gemm or prec.gemm, "kernel": prec.expert_kernel or prec.kernel,
               "role": "routed_expert"}
    ops += _ffn("experts", t * moe.num_experts_per_tok, h, moe.moe_intermediate_size, up, touched, experts)
    if moe.num_shared_experts:
        ops += _ffn("shared_expert", t, h, moe.num_shared_experts * moe.shared_expert_intermediate_size, up, 1.0, gemm)
    return ops + [Elementwise("moe_combine_residual", elements_read=(moe.num_experts_per_tok + 1) * t * h,
                              elements_written=t * h, **meta)]


def _ffn(name: str, rows: ArrayLike, h: int, width: int, up: int, copies: ArrayLike, gemm: dict) -> list[Op]:
    meta = {"group": gemm["group"], "count": gemm["count"], "role": gemm.get("role", "")}
    return [
        Gemm(f"{name}_up", m=rows, n=up * width, k=h, weight_copies=copies, shard="column", **gemm),
        Elementwise(f"{name}_activation", elements_read=up * rows * width, elements_written=rows * width,
                    flops_per_element=4.0, shard="column", **meta),
        Gemm(f"{name}_down", m=rows, n=h, k=width, weight_copies=copies, shard="row", **gemm),
    ]
