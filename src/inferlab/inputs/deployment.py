"""``Deployment``: what runs, where, and how, validated once, in one YAML/JSON form.

A :class:`Deployment` names the model and the GPUs (as text: catalog ids or a config.json
path), their count and parallel layout, the formats per tensor kind, the engine with its
scheduler limits, and the techniques (speculative decoding, a prefix cache, separate
prefill and decode pools). Every entry point's input (keyword arguments, deployment files,
validation cases, the CLI) parses into it (:mod:`inferlab.inputs.convert`), and
:meth:`Deployment.to_dict` writes it back; :meth:`Deployment.estimate_kwargs` and
:meth:`Deployment.serve_kwargs` give what :func:`inferlab.estimate` and
:func:`inferlab.serve` take. It holds names, not loaded specs: resolving them stays with
the physics (:func:`inferlab.estimate.deployment`).

Invalid combinations are refused here, with the messages of
:mod:`inferlab.inputs.resolve`: unknown names (with did-you-mean), counts out of range, a
layout the model cannot take, ``num_gpus`` other than ``tp x pp x dp``, layout or
aggregated-only options next to a disaggregation.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ValidationError

from .. import checks
from ..errors import SpecError, did_you_mean
from ..specs.validation import format_validation_error
from . import resolve as inputs
from .parts import ENGINE_LIMITS, Engine, Layout, engine_of, layout_fields
from .precision import Precision
from .techniques import FROZEN, PrefixCacheSpec, Pools, Speculative
from .workload import WORKLOAD_KWARGS

#: Keyword arguments of the entry points that are Deployment fields as they are.
_PLAIN = ("model", "hardware", "num_gpus", "precision", "profile", "attention", "cuda_graphs", "allow_long_context",
          "price_per_gpu_hour", "utilization", "speculative", "prefix_cache", "disaggregation")
#: Keyword arguments that describe a deployment (:meth:`Deployment.from_kwargs`).
KWARGS = (*_PLAIN, *Layout.model_fields, "engine", "engine_version", *ENGINE_LIMITS, "max_num_tokens")
#: Options of an aggregated deployment that a disaggregation (whose pools set them) refuses, with defaults.
_AGGREGATED_ONLY = {"attention": "flash", "cuda_graphs": True, "utilization": 1.0, "speculative": None}


class Deployment(BaseModel):
    """One deployment: model, GPUs, layout, formats, engine and techniques (frozen; validated once).

    Parameters
    ----------
    model : str
        Catalog id (aliases are stored as the id) or config.json path.
    hardware : str, optional
        Catalog id, with a MIG slice as ``h100-sxm:3g.40gb``; None with a disaggregation
        (its pools name their GPUs).
    num_gpus : int [GPU]
        ``tp x pp x dp``, or both pools' GPUs with a disaggregation; checked when given.
    layout : Layout
    precision : Precision, optional
        Formats per tensor kind; None: the model's shipped checkpoint's.
    engine : Engine
    profile : str
        ``default``, ``roofline`` or a calibration profile path.
    attention : {"flash", "naive"}
    cuda_graphs : bool
    allow_long_context : bool
        Accept contexts beyond the model's ``max_position_embeddings`` (RoPE scaling).
    price_per_gpu_hour : float, optional [USD/GPU/h]
        None: the catalog's.
    utilization : float [1]
        Share of paid time the GPUs serve.
    speculative : Speculative, optional
    prefix_cache : PrefixCacheSpec, optional
    disaggregation : Pools, optional

    Examples
    --------
    >>> d = Deployment(model="llama-3.1-70b", hardware="h100-sxm", layout={"tp": 4}, precision="fp8 kv:bf16")
    >>> d.num_gpus, d.precision.kv_cache
    (4, 'bf16')
    >>> Deployment.from_dict(d.to_dict()) == d
    True
    """

    model_config = FROZEN
    model: str
    hardware: str | None = None
    num_gpus: int = 1
    layout: Layout = Layout()
    precision: Precision | None = None
    engine: Engine = Engine()
    profile: str = "default"
    attention: Literal["flash", "naive"] = "flash"
    cuda_graphs: bool = True
    allow_long_context: bool = False
    price_per_gpu_hour: float | None = None
    utilization: float = 1.0
    speculative: Speculative | None = None
    prefix_cache: PrefixCacheSpec | None = None
    disaggregation: Pools | None = None

    def __init__(self, **data: Any) -> None:
        try:
            super().__init__(**_normalized(data))
        except ValidationError as exc:
            raise SpecError(f"deployment: {format_validation_error(exc, type(self))}") from None

    # ------------------------------------------------------------------ forms
    def to_dict(self) -> dict[str, Any]:
        """The one JSON-ready form: fields at their defaults left out, ``model`` always kept."""
        out = self.model_dump(mode="json", exclude_defaults=True)
        out["model"] = self.model
        if self.precision is not None:
            out["precision"] = self.precision.to_dict()
        return out

    @classmethod
    def from_dict(cls, data: Any) -> Deployment:
        """A Deployment from :meth:`to_dict`'s form (or any mapping of its fields)."""
        if not isinstance(data, dict):
            raise SpecError(f"deployment: expected a mapping of fields, got {type(data).__name__}")
        if "engine_args" in data:  # a deployment file's key, not a field: say where it is read
            raise SpecError("deployment: engine_args is a deployment file's key (inferlab estimate --file, "
                            "inferlab.inputs.convert.from_deployment_file), not a Deployment field; read a launch "
                            "command with inferlab.engines.parse_engine_args")
        return cls(**data)

    @classmethod
    def from_file(cls, path: str | Path) -> Deployment:
        """Read :meth:`to_dict`'s form from a YAML or JSON file (``.json`` is read as JSON)."""
        from ..specs.validation import read_text, read_yaml_mapping

        path = Path(path)
        if path.suffix.lower() == ".json":
            try:
                data = json.loads(read_text(path, f"deployment {path}"))
            except json.JSONDecodeError as exc:
                raise SpecError(f"deployment {path}: not valid JSON: {exc}") from None
            except (ValueError, RecursionError) as exc:  # a number past 4,300 digits, nesting too deep
                raise SpecError(f"deployment {path}: not a deployment: {str(exc).split(':')[0] or 'nested too deeply'}") \
                    from None
        else:
            data = read_yaml_mapping(path, f"deployment {path}")
        try:
            return cls.from_dict(data)
        except SpecError as exc:
            if type(exc) is not SpecError:  # an unknown name keeps its own type and did-you-mean
                raise
            raise SpecError(f"{path}: {exc}") from None

    @classmethod
    def from_kwargs(cls, **kwargs: Any) -> Deployment:
        """The Deployment of :func:`inferlab.estimate` or :func:`inferlab.serve` keyword arguments.

        The workload's arguments (:data:`~inferlab.inputs.workload.WORKLOAD_KWARGS`) are
        left to the Workload (:func:`inferlab.inputs.convert.from_kwargs` gives both);
        ``engine_version`` may be given too. Estimate's ``max_num_tokens`` is the engine's
        ``max_num_batched_tokens``.

        Raises
        ------
        SpecError
            An unknown argument, or an invalid deployment.
        """
        unknown = sorted(str(k) for k in set(kwargs) - set(KWARGS) - set(WORKLOAD_KWARGS))
        if unknown:
            raise SpecError(f"unknown argument(s) {', '.join(unknown)}; a Deployment takes {', '.join(KWARGS)} and "
                            f"a Workload {', '.join(WORKLOAD_KWARGS)}")
        fields = {k: kwargs[k] for k in _PLAIN if kwargs.get(k) is not None}
        layout = {k: kwargs[k] for k in Layout.model_fields if kwargs.get(k) is not None}
        if layout:
            fields["layout"] = layout
        limits = {k: kwargs[k] for k in ENGINE_LIMITS if kwargs.get(k) is not None}
        chunk = kwargs.get("max_num_tokens")
        if chunk is not None:
            if limits.get("max_num_batched_tokens", chunk) != chunk:
                raise SpecError(f"max_num_tokens={chunk} and max_num_batched_tokens="
                                f"{limits['max_num_batched_tokens']} are the same limit (tokens per step): give one")
            limits["max_num_batched_tokens"] = chunk
        engine = kwargs.get("engine")
        if isinstance(engine, (Engine, dict)):
            fields["engine"] = engine
        elif engine is not None or limits or kwargs.get("engine_version") is not None:
            fields["engine"] = {"name": engine or "generic", "version": kwargs.get("engine_version"), **limits}
        return cls(**fields)

    # ------------------------------------------------------------------ entry points
    def _common_kwargs(self) -> dict[str, Any]:
        kw: dict[str, Any] = {"model": self.model, "hardware": self.hardware, "engine": self.engine.name,
                              "profile": self.profile}
        if self.precision is not None:
            kw["precision"] = self.precision.value()
        if self.allow_long_context:
            kw["allow_long_context"] = True
        if self.disaggregation is not None:
            kw["disaggregation"] = self.disaggregation.technique()
            return kw
        layout = self.layout.model_dump(exclude_defaults=True)
        kw.update({k: v for k, v in layout.items() if k in ("tp", "pp", "ep", "dp", "attention_dp", "attention_tp")})
        if self.speculative is not None:
            kw["speculative"] = self.speculative.technique()
        return kw

    def estimate_kwargs(self) -> dict[str, Any]:
        """Keyword arguments of :func:`inferlab.estimate` (the deployment's; the workload adds the rest)."""
        kw = self._common_kwargs()
        if self.price_per_gpu_hour is not None:  # a disaggregation's pools pay it for every GPU
            kw["price_per_gpu_hour"] = self.price_per_gpu_hour
        if self.disaggregation is None:
            extra = self.model_dump(include={"attention", "cuda_graphs", "utilization"}, exclude_defaults=True)
            kw.update(extra)
            kw.update(self.layout.model_dump(include={"expert_imbalance", "micro_batches"}, exclude_defaults=True))
        limits = self.engine.limits()
        kw.update({k: limits[k] for k in ("gpu_memory_utilization", "kv_block_size", "graph_max_batch", "window_kv",
                                          "window_pool_ratio", "prefill_graph_tokens") if k in limits})
        if "max_num_seqs" in limits and self.disaggregation is None:  # a static batch's waves (not the pools')
            kw["max_num_seqs"] = limits["max_num_seqs"]
        if "max_model_len" in limits:  # the longest request, the pools' too
            kw["max_model_len"] = limits["max_model_len"]
        if "max_num_batched_tokens" in limits:
            kw["max_num_tokens"] = limits["max_num_batched_tokens"]
        if self.prefix_cache is not None:
            kw["prefix_cache"] = self.prefix_cache.technique()
        return kw

    def serve_kwargs(self) -> dict[str, Any]:
        """Keyword arguments of :func:`inferlab.serve` (the deployment's; the workload adds the rest).

        Raises
        ------
        SpecError
            Options serving does not simulate: a static-batch prefix cache (serve takes
            prefix structure from the workload), a price, pipeline micro-batches.
        """
        unused = {"prefix_cache": self.prefix_cache is not None, "price_per_gpu_hour": self.price_per_gpu_hour
                  is not None, "utilization": self.utilization != 1.0, "attention": self.attention != "flash",
                  "cuda_graphs": not self.cuda_graphs, "micro_batches": self.layout.micro_batches is not None,
                  "expert_imbalance": self.layout.expert_imbalance != 1.0}
        given = [name for name, was_set in unused.items() if was_set]
        if given:
            raise SpecError(f"serve does not take {', '.join(given)} of the deployment (a prefix cache is the "
                            "workload's prefix structure when serving): drop it, or estimate a static batch")
        kw = self._common_kwargs()
        kw.update(self.engine.limits())
        return kw


def _text(key: str, value: Any) -> str:
    if not isinstance(value, (str, Path)):
        raise SpecError(f"deployment: {key} must be text (a catalog id or a path), got {type(value).__name__} "
                        f"{value!r:.60}")
    return str(value)


def _model_id(value: Any) -> tuple[str, Any]:
    """The stored text of ``value`` (a catalog id for catalog names and specs) and its spec."""
    from ..specs.model import ModelSpec

    spec = inputs.resolve_model(value)
    if isinstance(value, ModelSpec):
        if not spec.id:
            raise SpecError("deployment: a Deployment names its model by catalog id or config.json path; this "
                            "ModelSpec has no id")
        return spec.id, spec
    text = str(value)
    return (text if Path(text).suffix == ".json" or Path(text).is_file() or not spec.id else spec.id), spec


def _hardware_id(value: Any) -> tuple[str, Any]:
    spec = inputs.resolve_hardware(value if not isinstance(value, Path) else str(value))
    return spec.id, spec


def _normalized(data: dict[str, Any]) -> dict[str, Any]:
    """``data`` checked and put in canonical form (names resolved to ids, precision per kind)."""
    unknown = sorted(str(k) for k in set(data) - set(Deployment.model_fields))
    if unknown:
        raise SpecError(f"deployment: unknown key(s) {', '.join(unknown)[:200]}"
                        f"{did_you_mean(unknown[0], Deployment.model_fields)}; allowed: "
                        f"{', '.join(Deployment.model_fields)}")
    if "model" not in data or data["model"] is None:
        raise SpecError("deployment: the model is missing (a catalog id such as 'llama-3.1-8b' or a config.json path)")
    out = dict(data)
    model_text, model = _model_id(data["model"])
    out["model"] = model_text
    pools = data.get("disaggregation")
    out["disaggregation"] = pools = None if pools is None else Pools.of(pools)
    out["engine"] = engine_of(data.get("engine", "generic"))
    par = inputs.layout(model, **layout_fields(data.get("layout") or {}))
    out["layout"] = Layout(tp=par.tp, pp=par.pp, ep=par.ep, dp=par.dp, attention_dp=par.attention_dp,
                           expert_imbalance=par.expert_imbalance, micro_batches=par.micro_batches,
                           attention_tp=par.attention_tp)
    out["attention"] = inputs.attention_kind(data.get("attention", "flash"))
    for key in ("cuda_graphs", "allow_long_context"):
        if key in data:
            out[key] = checks.boolean(key, data[key])
    if data.get("utilization") is not None:
        out["utilization"] = checks.fraction("utilization", data["utilization"])
    if data.get("price_per_gpu_hour") is not None:
        out["price_per_gpu_hour"] = checks.price("price_per_gpu_hour", data["price_per_gpu_hour"])
    out["profile"] = _text("profile", data.get("profile", "default"))
    out["speculative"] = None if data.get("speculative") is None else Speculative.of(data["speculative"])
    out["prefix_cache"] = None if data.get("prefix_cache") is None else PrefixCacheSpec.of(data["prefix_cache"])
    if pools is not None:
        return _disaggregated(data, out, pools)
    if data.get("hardware") is None:
        raise SpecError("deployment: give the hardware (a catalog id such as h100-sxm), or a disaggregation with "
                        "its pools")
    out["hardware"], hw = _hardware_id(data["hardware"])
    out["precision"] = precision = Precision.of(data.get("precision"))
    lay = out["layout"]
    # what the physics would refuse (a layout the GPU cannot span, a profile that does not load,
    # formats the model cannot take), refused here by the same resolver
    inputs.deployment(model, hw, precision=None if precision is None else precision.value(),
                      engine=out["engine"].name, profile=out["profile"], attention=out["attention"],
                      cuda_graphs=out.get("cuda_graphs", True), **lay.model_dump())
    given = data.get("num_gpus")
    if given is not None and checks.integer("num_gpus", given, maximum=inputs.MAX_GPUS_PER_AXIS, what="GPUs",
                                            whole_floats=True) != lay.num_gpus:
        raise SpecError(f"num_gpus={given} but the layout tp={lay.tp} x pp={lay.pp} x dp={lay.dp} uses "
                        f"{lay.num_gpus} GPUs: give num_gpus={lay.num_gpus}, or a layout of {given} GPUs")
    out["num_gpus"] = lay.num_gpus
    return out


def _disaggregated(data: dict[str, Any], out: dict[str, Any], pools: Pools) -> dict[str, Any]:
    """The checks of a deployment whose prefill and decode pools set its GPUs and layout."""
    ignored = {k: out.get(k, v) != v for k, v in _AGGREGATED_ONLY.items()}
    layout = out["layout"].model_dump(exclude_defaults=True)
    ignored = {**dict.fromkeys(layout, True), **ignored}
    inputs.refuse_with_disaggregation(data.get("hardware"), (pools.prefill.hardware, pools.decode.hardware),
                                      ignored)
    given = data.get("num_gpus")
    if given is not None and given != pools.num_gpus:
        raise SpecError(f"num_gpus={given} but the pools have {pools.prefill.num_gpus} + {pools.decode.num_gpus} = "
                        f"{pools.num_gpus} GPUs: give num_gpus={pools.num_gpus} or drop it")
    from ..specs.catalog import load_hardware

    model = inputs.resolve_model(out["model"])
    out.update(hardware=None, num_gpus=pools.num_gpus,
               precision=Precision.of(data.get("precision"), model, load_hardware(pools.decode.hardware)))
    return out
