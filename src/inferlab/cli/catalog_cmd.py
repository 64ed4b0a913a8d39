"""``inferlab hardware`` and ``inferlab models``: the catalogs."""

from __future__ import annotations

import argparse
from typing import Any

from ..errors import SpecError, UnknownNameError
from ..results.table import text_table
from .output import emit as _emit


# Each command imports what it needs when it runs, so `--help` and the catalog listings do
# not load the op graph, the simulator or scipy.


def _hardware_list(args: argparse.Namespace) -> None:
    from ..specs.render import hardware_dict, in_unit
    from ..specs.catalog import hardware_ids, load_hardware

    specs = [load_hardware(i) for i in hardware_ids()]
    rows = []
    for h in specs:
        up = h.scale_up
        link = "-" if up.bandwidth is None else f"{up.kind} {in_unit(up.bandwidth, 'GB/s', '{:.0f}')}x{int(up.domain_size.si)}"
        rows.append([h.id, h.memory_capacity.stated, in_unit(h.memory_bandwidth, "TB/s", "{:.3g}"),
                     in_unit(h.flops.get("bf16"), "TFLOPS", "{:.0f}"), in_unit(h.flops.get("fp8"), "TFLOPS", "{:.0f}"),
                     in_unit(h.flops.get("fp4"), "TFLOPS", "{:.0f}"), link,
                     in_unit(h.price, "USD/hour", "{:.2f}"), h.status])
    headers = ["id", "memory", "TB/s", "bf16 TF", "fp8 TF", "fp4 TF", "scale-up GB/s/dir x GPUs", "$/h", "status"]
    text = text_table(headers, rows, right={2, 3, 4, 5, 7})
    text += "\nTensor FLOPS are dense (no 2:4 sparsity). `inferlab hardware show ID` lists every figure with its source."
    _emit(args, lambda: [hardware_dict(h) for h in specs], text)


def _hardware_show(args: argparse.Namespace) -> None:
    from ..results.render import pretty
    from ..specs.render import hardware_dict
    from ..specs.catalog import load_hardware

    h = load_hardware(args.id)
    rows = [[path, fig.stated, fig.source] for path, fig in h.figures()]
    lines = [f"{h.name} ({h.id}) - {h.vendor} {h.architecture}, {h.form_factor}, {h.status}",
             f"memory: {h.memory_type}", text_table(["field", "value", "source"], rows)]
    if "bf16" in h.flops:
        lines.append(f"ridge point (bf16 dense / memory bandwidth): {pretty(h.ridge_point('bf16'))}")
    if h.mig:
        lines.append("MIG profiles: " + ", ".join(f"{p.name} x{p.max_instances}" for p in h.mig.profiles))
    lines.append("sources:")
    lines += [f"  {key}: {src.title} [{src.kind}{', ' + src.date if src.date else ''}]" + (f" {src.url}" if src.url else "")
              for key, src in h.sources.items()]
    notes = [f"  {path}: {fig.note}" for path, fig in h.figures() if fig.note] + [f"  {n}" for n in h.notes]
    if notes:
        lines += ["notes:", *notes]
    _emit(args, hardware_dict(h), "\n".join(lines))


def _models_list(args: argparse.Namespace) -> None:
    from ..specs.render import model_dict
    from ..specs.catalog import load_model, model_ids

    specs = [load_model(i) for i in model_ids()]
    rows = []
    for m in specs:
        kv = sum(m.kv_cache_bytes_per_token("bf16").values())
        kind = m.attention_type + ("+linear" if m.linear_attention else "") + \
            (f" MoE {m.moe.num_experts_per_tok}/{m.moe.num_experts}" if m.moe else "")
        rows.append([m.id or m.name, kind, f"{m.total_params / 1e9:.1f}", f"{m.active_params / 1e9:.1f}",
                     str(m.num_hidden_layers), f"{kv / 1024:.0f}", f"{m.max_position_embeddings:,}"])
    headers = ["id", "attention", "params B", "active B", "layers", "KV KiB/token bf16", "max context"]
    text = text_table(headers, rows, right={2, 3, 4, 5, 6})
    text += ("\nKV per token sums all layers; sliding-window layers stop growing at their window; linear-attention "
             "layers hold a fixed state per sequence instead (models show).")
    _emit(args, [model_dict(m) for m in specs], text)


def modality_instead(exc: BaseException) -> BaseException:
    """``exc``; or, where it is an unknown language model that the modalities catalog holds (an
    image model given to ``estimate``), a :class:`SpecError` saying which command runs it."""
    if not isinstance(exc, UnknownNameError) or exc.kind != "model":
        return exc
    from ..modalities.catalog import COMMANDS, KIND_PHRASES, load_modality, modality_ids

    if str(exc.name).strip().lower() not in modality_ids():
        return exc
    kind = load_modality(exc.name).kind
    return SpecError(f"{exc.name} is not a language model of the LLM catalog but {KIND_PHRASES.get(kind, kind)} model "
                     f"of the modalities catalog: `inferlab modalities` lists it, "
                     f"`inferlab {COMMANDS.get(kind, 'modalities')}` runs it")


def _models_show(args: argparse.Namespace) -> None:
    from ..results.render import pretty
    from ..specs.render import model_dict
    from ..specs.catalog import load_model
    from ..units import Q

    m = load_model(args.model)  # (a model of the modalities catalog: main says which command runs it)
    d = model_dict(m)
    pc = m.param_counts
    lines = [f"{m.name}" + (f" ({m.id})" if m.id else "") + f" - model_type {m.model_type}, {m.attention_type}",
             f"layers {m.num_hidden_layers}, hidden {m.hidden_size}, heads {m.num_attention_heads} "
             f"(KV {m.num_key_value_heads}, head_dim {m.head_dim}), vocab {m.vocab_size:,}, "
             f"max context {m.max_position_embeddings:,}",
             "attention layers: " + ", ".join(f"{n} {k}" for k, n in m.layer_kinds.items())]
    if m.moe:
        e = m.moe
        lines.append(f"MoE: {m.num_moe_layers} MoE layers + {m.num_dense_layers} dense; {e.num_experts} routed experts "
                     f"(top-{e.num_experts_per_tok}, width {e.moe_intermediate_size}) + {e.num_shared_experts} shared")
    if m.mla:
        lines.append(f"MLA: kv_lora_rank {m.mla.kv_lora_rank} + rope {m.mla.qk_rope_head_dim} cached per token per layer")
    if m.linear_attention:
        la = m.linear_attention
        lines.append(f"linear attention (Gated DeltaNet): {la.num_key_heads} key and {la.num_value_heads} value heads of "
                     f"{la.key_head_dim}x{la.value_head_dim}, {la.conv_kernel}-tap convolution; state per sequence "
                     f"{pretty(Q(m.recurrent_state_bytes(), 'byte'))} ("
                     + (la.state_format or "bf16 under vLLM; SGLang keeps fp32: the config names no format")
                     + f") over {m.num_linear_layers} layers, whatever its length")
    lines.append(f"parameters: total {pc.total / 1e9:.3f} B, active {pc.active / 1e9:.3f} B"
                 + (f", MTP module {pc.mtp / 1e9:.2f} B (not in total)" if pc.mtp else ""))
    lines.append("  " + ", ".join(f"{k} {getattr(pc, k) / 1e9:.3f} B" for k in pc.__dataclass_fields__ if getattr(pc, k)))
    lines.append("KV cache per token (bf16): " + ", ".join(f"{k} {v:,.0f} B" for k, v in d["kv_cache_bytes_per_token_bf16"].items()))
    lines.append("weights: " + ", ".join(f"{p} {pretty(Q(v, 'byte'))}" for p, v in d["weight_bytes"].items()))
    if m.checkpoint is not None:
        lines.append(f"released checkpoint: {m.checkpoint.describe()}")
    if m.card:
        c = m.card
        lines.append(f"config: {c.sources[c.config_source].title}" + ("" if c.config_verbatim else " [not verbatim]"))
        for label, pub in (("published total", c.total_params), ("published active", c.active_params)):
            if pub:
                lines.append(f"{label}: {pub.stated} ({c.sources[pub.source].title})")
        lines += [f"note: {n}" for n in c.notes]
    _emit(args, d, "\n".join(lines))


def add_parsers(sub: Any, common: argparse.ArgumentParser) -> None:
    """``hardware list|show`` and ``models list|show``."""
    hw = sub.add_parser("hardware", help="accelerator catalog").add_subparsers(dest="action", required=True)
    hw.add_parser("list", parents=[common], help="every device with its headline figures").set_defaults(func=_hardware_list)
    show = hw.add_parser("show", parents=[common], help="every figure of one device, with sources")
    show.add_argument("id")
    show.set_defaults(func=_hardware_show)

    mo = sub.add_parser("models", help="model catalog").add_subparsers(dest="action", required=True)
    mo.add_parser("list", parents=[common], help="every model with size and KV cache").set_defaults(func=_models_list)
    mshow = mo.add_parser("show", parents=[common], help="one model by id, alias or config.json path")
    mshow.add_argument("model", metavar="ID|PATH")
    mshow.set_defaults(func=_models_show)
