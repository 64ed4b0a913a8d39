"""Specs as JSON-ready dicts (``--json`` of ``hardware show`` and ``models show``) and as
HTML tables in Jupyter, every figure with its unit and source."""

from __future__ import annotations

import html
from typing import TYPE_CHECKING, Any

from ..results.render import pretty
from ..units import Q, conversion_factor

if TYPE_CHECKING:
    from .figure import Figure
    from .hardware import HardwareSpec
    from .model import ModelSpec


def in_unit(fig: Figure | None, unit: str, fmt: str = "{:.4g}") -> str:
    """A figure's value in ``unit`` as text, or ``-`` when absent."""
    return "-" if fig is None else fmt.format(fig.si * conversion_factor(fig.unit, unit))


def figure_dict(fig: Figure, sources: dict[str, Any]) -> dict[str, Any]:
    """JSON-ready description of one figure with its resolved source."""
    src = sources.get(fig.source)
    out: dict[str, Any] = {
        "value": fig.si, "unit": fig.unit, "stated": fig.stated, "source": fig.source,
        "source_title": getattr(src, "title", None), "source_url": getattr(src, "url", None),
    }
    if fig.note:
        out["note"] = fig.note
    if fig.as_of:
        out["as_of"] = fig.as_of
    if fig.alternatives:
        out["alternatives"] = [a.model_dump() for a in fig.alternatives]
    return out


def hardware_dict(hw: HardwareSpec) -> dict[str, Any]:
    """Every figure of ``hw`` keyed by its dotted path, plus identity and sources."""
    return {
        "id": hw.id, "name": hw.name, "vendor": hw.vendor, "architecture": hw.architecture,
        "form_factor": hw.form_factor, "status": hw.status, "memory_type": hw.memory_type,
        "scale_up_kind": hw.scale_up.kind, "scale_up_topology": hw.scale_up.topology,
        "scale_out_nic": hw.scale_out.nic if hw.scale_out else None,
        "ridge_point_bf16_flop_per_byte": float(hw.ridge_point("bf16").magnitude) if "bf16" in hw.flops else None,
        "figures": {path: figure_dict(fig, hw.sources) for path, fig in hw.figures()},
        "mig_profiles": [p.name for p in hw.mig.profiles] if hw.mig else [],
        "sources": {k: v.model_dump() for k, v in hw.sources.items()},
        "notes": list(hw.notes),
    }


def model_dict(m: ModelSpec) -> dict[str, Any]:
    """Structure and derived figures of ``m``, JSON-ready."""
    pc = m.param_counts
    out: dict[str, Any] = {
        "id": m.id, "name": m.name, "model_type": m.model_type, "attention_type": m.attention_type,
        "num_hidden_layers": m.num_hidden_layers, "hidden_size": m.hidden_size,
        "num_attention_heads": m.num_attention_heads, "num_key_value_heads": m.num_key_value_heads,
        "head_dim": m.head_dim, "vocab_size": m.vocab_size, "max_position_embeddings": m.max_position_embeddings,
        "layer_kinds": m.layer_kinds,
        "total_params": pc.total, "active_params": pc.active, "mtp_params": pc.mtp,
        "param_counts": {k: getattr(pc, k) for k in pc.__dataclass_fields__},
        "kv_cache_bytes_per_token_bf16": m.kv_cache_bytes_per_token("bf16"),
        "weight_bytes": {p: m.weight_bytes(p) for p in ("bf16", "fp8", "nvfp4")},
        "checkpoint": m.checkpoint.model_dump() if m.checkpoint is not None else None,
    }
    if m.moe is not None:
        out["moe"] = {**m.moe.model_dump(), "moe_layers": m.num_moe_layers, "dense_layers": m.num_dense_layers}
    if m.mla is not None:
        out["mla"] = m.mla.model_dump()
    if m.linear_attention is not None:
        out["linear_attention"] = {**m.linear_attention.model_dump(), "layers": m.num_linear_layers,
                                   "state_bytes_per_sequence": m.recurrent_state_bytes()}
    if m.card is not None:
        out["card"] = m.card.model_dump()
    return out


def hardware_html(spec: HardwareSpec) -> str:
    """HTML table for Jupyter: every figure with its unit and source."""
    return _html(spec.name, [(path, fig.stated, spec.sources[fig.source].title) for path, fig in spec.figures()])


def model_html(spec: ModelSpec) -> str:
    """HTML table for Jupyter: the structure from config.json and the derived sizes."""
    d = model_dict(spec)
    keys = ("attention_type", "num_hidden_layers", "hidden_size", "num_attention_heads", "num_key_value_heads",
            "head_dim", "layer_kinds", "max_position_embeddings")
    rows = [(k, str(d[k]), "config.json") for k in keys]
    rows += [("total_params", f"{d['total_params'] / 1e9:.2f} B", "derived"),
             ("active_params", f"{d['active_params'] / 1e9:.2f} B", "derived")]
    rows += [(f"kv bytes/token {k} (bf16)", pretty(Q(v, "byte")), "derived")
             for k, v in d["kv_cache_bytes_per_token_bf16"].items()]
    if spec.linear_attention is not None:
        rows.append(("linear-attention state/sequence", pretty(Q(spec.recurrent_state_bytes(), "byte")), "derived"))
    return _html(spec.name, rows)


def _html(title: str, rows: list[tuple[str, str, str]]) -> str:
    body = "".join(f"<tr><td>{html.escape(a)}</td><td>{html.escape(b)}</td><td>{html.escape(c)}</td></tr>"
                   for a, b, c in rows)
    return (f"<table><caption>{html.escape(title)}</caption>"
            f"<tr><th>field</th><th>value</th><th>source</th></tr>{body}</table>")
