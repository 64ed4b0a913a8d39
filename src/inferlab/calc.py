"""A unit-checked calculator in which catalog values can be named.

``h100-sxm.flops.bf16 / h100-sxm.memory_bandwidth`` is the ridge point in FLOP/B;
``140 GB / (3.35 TB/s)`` is 41.8 ms. References are ``<catalog id>.<field path>``:
hardware fields as in the YAML files (``memory_bandwidth``, ``flops.fp8``,
``scale_up.bandwidth``, ``price``...), and for models the quantities in
:data:`MODEL_QUANTITIES` (``llama-3.1-70b.kv_bytes_per_token.fp8``).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pint
from pydantic import BaseModel

from .errors import UnitError, UnknownNameError
from .specs.catalog import hardware_ids, load_hardware, load_model, model_ids
from .specs.figure import Figure
from .specs.hardware import HardwareSpec
from .specs.model import ModelSpec
from .units import Q, parse, parse_unit, readable

#: Model quantities a calculator expression can name: (function(model, arg), unit, takes precision).
MODEL_QUANTITIES: dict[str, tuple[Callable[..., float], str, bool]] = {
    "total_params": (lambda m: m.total_params, "dimensionless", False),
    "active_params": (lambda m: m.active_params, "dimensionless", False),
    "weight_bytes": (lambda m, p="bf16": m.weight_bytes(p), "byte", True),
    "kv_bytes_per_token": (lambda m, p="bf16": sum(m.kv_cache_bytes_per_token(p).values()), "byte", True),
    "num_hidden_layers": (lambda m: m.num_hidden_layers, "dimensionless", False),
    "hidden_size": (lambda m: m.hidden_size, "dimensionless", False),
    "num_attention_heads": (lambda m: m.num_attention_heads, "dimensionless", False),
    "num_key_value_heads": (lambda m: m.num_key_value_heads, "dimensionless", False),
    "head_dim": (lambda m: m.head_dim, "dimensionless", False),
    "vocab_size": (lambda m: m.vocab_size, "dimensionless", False),
    "max_position_embeddings": (lambda m: m.max_position_embeddings, "token", False),
}

_ID = r"[a-z][a-z0-9\-]*(?:\.[0-9][a-z0-9\-]*)*"
_REF = re.compile(rf"(?<![\w.])({_ID})\.([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z0-9_]+)*)", re.IGNORECASE)
_BARE = re.compile(rf"(?<![\w.])({_ID})(?![\w.])", re.IGNORECASE)


@dataclass(frozen=True)
class Reference:
    """One catalog value used in an expression."""

    text: str
    value: pint.Quantity
    source: str


@dataclass(frozen=True)
class CalcResult:
    """The value of an expression and the catalog values it used."""

    expression: str
    value: pint.Quantity
    references: tuple[Reference, ...]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form: value in the displayed unit and in SI, plus references with sources."""
        return {
            "expression": self.expression,
            "value": float(self.value.magnitude),
            "unit": f"{self.value.units:~P}" or "dimensionless",
            "references": [
                {"name": r.text, "value": float(r.value.magnitude), "unit": f"{r.value.units:~P}", "source": r.source}
                for r in self.references
            ],
        }


def _hardware_ref(hw: HardwareSpec, path: list[str], text: str) -> tuple[pint.Quantity, str]:
    obj: Any = hw
    for i, part in enumerate(path):
        if part == "ridge_point":
            prec = path[i + 1] if i + 1 < len(path) else "bf16"
            return hw.ridge_point(prec), f"{hw.sources[hw.flops[prec].source].title}; {hw.sources[hw.memory_bandwidth.source].title}"
        if isinstance(obj, dict):
            if part not in obj:
                raise UnknownNameError(f"key in {text}", part, [str(k) for k in obj])
            obj = obj[part]
        elif isinstance(obj, BaseModel):
            names = [*type(obj).model_fields, *(["ridge_point"] if obj is hw else [])]
            if part not in type(obj).model_fields:
                raise UnknownNameError(f"field in {text}", part, names)
            obj = getattr(obj, part)
        else:
            raise UnitError(f"{text}: cannot look up {part!r} inside a {type(obj).__name__}")
        if obj is None:
            raise UnitError(f"{text}: {hw.id} has no value for {'.'.join(path[: i + 1])}")
    if isinstance(obj, Figure):
        return obj.quantity, hw.sources[obj.source].title
    raise UnitError(f"{text} is not a number; name a figure inside it, e.g. {text}.{_first_key(obj)}")


def _first_key(obj: Any) -> str:
    if isinstance(obj, dict) and obj:
        return str(next(iter(obj)))
    if isinstance(obj, BaseModel):
        return next(iter(type(obj).model_fields))
    return "..."


def _model_ref(model: ModelSpec, path: list[str], text: str) -> tuple[pint.Quantity, str]:
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
    return Q(float(value), unit), source


def _resolve(match: re.Match[str]) -> Reference:
    ident, path = match.group(1).lower(), match.group(2).split(".")
    text = match.group(0)
    if ident in hardware_ids():
        value, source = _hardware_ref(load_hardware(ident), path, text)
    elif ident in model_ids():
        value, source = _model_ref(load_model(ident), path, text)
    else:
        raise UnknownNameError("catalog id", ident, [*hardware_ids(), *model_ids()])
    return Reference(text, value, source)


def evaluate(expression: str, to: str | None = None) -> CalcResult:
    """Evaluate a unit expression, with catalog references, into a quantity.

    Parameters
    ----------
    expression : str
        E.g. ``"140 GB / (3.35 TB/s)"`` or ``"h100-sxm.flops.bf16 / h100-sxm.memory_bandwidth"``.
    to : str, optional
        Unit to express the result in; must have the result's dimension.

    Raises
    ------
    UnitError
        On malformed text, unknown units, or mixing dimensions (bytes + seconds).
    UnknownNameError
        On an unknown catalog id or field, with suggestions.

    Examples
    --------
    >>> evaluate("140 GB / (3.35 TB/s)", to="ms").value.magnitude
    41.7910447761194
    """
    refs: list[Reference] = []
    values: dict[str, pint.Quantity] = {}

    def substitute(match: re.Match[str]) -> str:
        ref = _resolve(match)
        name = f"ref{len(refs)}_"
        refs.append(ref)
        values[name] = ref.value
        return f"({name})"

    text = _REF.sub(substitute, expression)
    _refuse_bare_ids(text)
    result = parse(text, values, label=expression)
    result = readable(result) if to is None else _convert(result, to, expression)
    return CalcResult(expression, result, tuple(refs))


def _refuse_bare_ids(text: str) -> None:
    known = {*hardware_ids(), *model_ids()}
    for match in _BARE.finditer(text):
        ident = match.group(1).lower()
        if ident in known:
            raise UnitError(f"{ident!r} names a catalog entry, not a number; name one of its values, "
                            f"e.g. {ident}.{'memory_bandwidth' if ident in hardware_ids() else 'total_params'}")


def _convert(q: pint.Quantity, unit: str, expression: str) -> pint.Quantity:
    target = parse_unit(unit)
    if q.dimensionality != target.dimensionality:
        have = str(q.dimensionality) if q.dimensionality else "dimensionless"
        raise UnitError(f"{expression!r} is {have} ({q:~P}); it cannot be expressed in {unit}")
    return q.to(target)
