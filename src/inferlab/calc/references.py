"""Catalog values a calculator expression names: ``<hardware id>.<field path>`` (the fields of
its YAML file, list entries by position, ``ridge_point``) and ``<model id>.<quantity>``
(:data:`MODEL_QUANTITIES`), each with the source it comes from."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pint
from pydantic import BaseModel

from ..errors import UnitError, UnknownNameError
from ..specs.figure import Figure
from ..specs.hardware import HardwareSpec
from ..specs.model import ModelSpec
from ..units import Q

#: Model quantities a calculator expression can name: (function(model, arg), unit, takes precision).
MODEL_QUANTITIES: dict[str, tuple[Callable[..., float], str, bool]] = {
    "total_params": (lambda m: m.total_params, "dimensionless", False),
    "active_params": (lambda m: m.active_params, "dimensionless", False),
    "weight_bytes": (lambda m, p="bf16": m.weight_bytes(p), "byte", True),
    "kv_bytes_per_token": (lambda m, p="bf16": sum(m.kv_cache_bytes_per_token(p).values()), "byte / token", True),
    # a hybrid model's linear-attention state, a sequence's whatever its length (0 without one)
    "state_bytes_per_sequence": (lambda m: m.recurrent_state_bytes(), "byte", False),
    "num_hidden_layers": (lambda m: m.num_hidden_layers, "dimensionless", False),
    "hidden_size": (lambda m: m.hidden_size, "dimensionless", False),
    "num_attention_heads": (lambda m: m.num_attention_heads, "dimensionless", False),
    "num_key_value_heads": (lambda m: m.num_key_value_heads, "dimensionless", False),
    "head_dim": (lambda m: m.head_dim, "dimensionless", False),
    "vocab_size": (lambda m: m.vocab_size, "dimensionless", False),
    "max_position_embeddings": (lambda m: m.max_position_embeddings, "token", False),
}


def hardware_ref(hw: HardwareSpec, path: list[str], text: str) -> tuple[pint.Quantity, str]:
    obj: Any = hw
    for i, part in enumerate(path):
        if part == "ridge_point":
            prec = path[i + 1] if i + 1 < len(path) else "bf16"
            if len(path) > i + 2:
                raise UnitError(f"{text}: ridge_point takes one precision after it (ridge_point.fp8), got "
                                f"{'.'.join(path[i + 1:])}")
            if prec not in hw.flops:
                if not hw.flops:
                    raise UnitError(f"{text}: {hw.id} lists no tensor rates, so it has no ridge point")
                raise UnknownNameError(f"precision in {text} (the tensor rates {hw.id} lists)", prec,
                                       [str(getattr(k, "value", k)) for k in hw.flops])
            titles = dict.fromkeys(hw.sources[q.source].title for q in (hw.flops[prec], hw.memory_bandwidth))
            return hw.ridge_point(prec), "; ".join(titles)  # the FLOPS and the bandwidth, one source named once
        if isinstance(obj, dict):
            if not obj:
                raise UnitError(f"{text}: {hw.id} lists no {'.'.join(path[:i])} values")
            if part not in obj:
                raise UnknownNameError(f"key in {text}", part, [str(k) for k in obj])
            obj = obj[part]
        elif isinstance(obj, BaseModel):
            names = [*type(obj).model_fields, *(["ridge_point"] if obj is hw else [])]
            if part not in type(obj).model_fields:
                raise UnknownNameError(f"field in {text}", part, names)
            obj = getattr(obj, part)
        elif isinstance(obj, (list, tuple)):  # a list of records (MIG profiles): by position
            if not obj:
                raise UnitError(f"{text}: {hw.id} lists no {'.'.join(path[:i])}")
            if not part.isdigit() or int(part) >= len(obj):
                raise UnitError(f"{text}: {'.'.join(path[:i])} holds {len(obj)} entries; name one by its position "
                                f"0-{len(obj) - 1}")
            obj = obj[int(part)]
        else:
            raise UnitError(f"{text}: cannot look up {part!r} inside a {type(obj).__name__}")
        if obj is None:
            raise UnitError(f"{text}: {hw.id} has no value for {'.'.join(path[: i + 1])}")
    if isinstance(obj, Figure):
        return obj.quantity, hw.sources[obj.source].title
    if isinstance(obj, dict) and not obj:
        raise UnitError(f"{text}: {hw.id} lists no {'.'.join(path)} values")
    if isinstance(obj, (list, tuple)) and obj:
        names = [str(getattr(x, "name", k)) for k, x in enumerate(obj)]
        raise UnitError(f"{text} holds {len(obj)} entries ({', '.join(names)}); name one by its position and a figure "
                        f"inside it, e.g. {text}.0.{_first_key(obj[0])}")
    if not isinstance(obj, (dict, BaseModel)):  # a name, a note, a count without a unit: list the figures
        figures = [k for k, v in hw if k != "sources" and (isinstance(v, (Figure, BaseModel))
                                                           or v and isinstance(v, dict))]
        raise UnitError(f"{text} is {obj!r:.60}, not a figure with a unit; figures of {hw.id}: {', '.join(figures)}")
    raise UnitError(f"{text} is not a number; name a figure inside it, e.g. {text}.{_first_key(obj)}")


def _first_key(obj: Any) -> str:
    """The first key or field of ``obj`` that holds figures (a name or a note does not)."""
    if isinstance(obj, dict) and obj:
        return str(next(iter(obj)))
    if isinstance(obj, BaseModel):
        for name in type(obj).model_fields:
            if isinstance(getattr(obj, name), (Figure, BaseModel, dict, list, tuple)):
                return name
        return next(iter(type(obj).model_fields))
    return "..."


def model_ref(model: ModelSpec, path: list[str], text: str) -> tuple[pint.Quantity, str]:
    name = path[0]
    if name not in MODEL_QUANTITIES:
        raise UnknownNameError(f"model quantity in {text}", name, MODEL_QUANTITIES)
    fn, unit, takes_precision = MODEL_QUANTITIES[name]
    if len(path) > 1 + takes_precision:
        raise UnitError(f"{text}: too many parts after {name!r}")
    value = fn(model, path[1]) if takes_precision and len(path) == 2 else fn(model)
    source = "derived from config.json"
    if model.card is not None:
        source = f"derived from {model.card.sources[model.card.config_source].title}"
    if name == "weight_bytes" and len(path) == 2:
        source += _deployed_weights(model, path[1])
    return Q(float(value), unit), source


def _deployed_weights(model: ModelSpec, precision: str) -> str:
    """What a narrower format's weight bytes leave out: engines keep the embedding and the LM
    head 16-bit (as estimate() does), so the model deploys larger than every weight in it."""
    from ..precision import number_format

    width = number_format(precision).bytes_per_element
    if width >= 2.0:
        return ""
    counts = model.param_counts
    ends = counts.embedding + counts.lm_head
    per_weight = model.weight_bytes(precision) / counts.total  # the format's bytes and its block scales
    deployed = (counts.total - ends) * per_weight + ends * 2.0
    return (f"; every weight in {precision}: engines keep the embedding and LM head 16-bit, "
            f"{deployed / 1e9:.2f} GB as deployed")
