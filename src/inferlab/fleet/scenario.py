"""Fleet scenario files: one deployment and a ``fleet:`` section.

::

    name: chat and RAG over a day
    model: llama-3.1-8b
    hardware: h100-sxm
    engine: vllm
    tp: 1                                 # ep: 8, attention_dp: true for a MoE model's replicas
    fleet:
      replicas: 4
      hours: 24
      router: cache_aware                 # round_robin, random, least_outstanding, least_kv
      admission: {queue_limit: 64, timeout_s: 10}
      autoscaler: {signal: concurrency, target: 48, min_replicas: 2, max_replicas: 40}
      startup: {warm_pool: true, local_weights: true}
      failures: {replica_mtbf_h: 1000, detection_s: 30, restart_s: 120}
      pricing: {reserved: 2, reserved_usd_per_hour: 1.9}
      slo: {ttft_ms: 1000}
      traffic:
        - {shape: daily, rate: 6, isl: 800, osl: 250, prefix: "sessions:turns=3,think=20"}
        - {shape: daily, rate: 3, isl: 6000, osl: 200, prefix: "shared:tokens=4000,groups=200,zipf=1.1"}
      cascade: {model: llama-3.1-70b, tp: 4, share: 0.2, replicas: 2}   # optional

Several models, GPU types or regions: ``fleet.pools`` (a list of pools, each with its
``model``, ``hardware``, ``region``, ``provider``, ``replicas``, ``autoscaler``, ``pricing``; no
top-level model) and ``fleet.regions`` (``rtt_s: {"ap-southeast-2|us-east-1": 0.2}``,
``quota_gpus`` per region, ``provider_quota_gpus`` per provider, ``spill``); traffic classes
then carry the ``region`` of their users and the ``model`` they ask for (see
:func:`~.api.fleet_of`). A replica may be written as a ``deployment:`` mapping
(:class:`inferlab.Deployment`'s form) instead of ``model``, ``hardware``, ``engine``, ``tp``
and ``precision``, at the top or in a pool. ``allow_long_context: true`` (at the top, in a
pool, or in the deployment) accepts requests beyond the model's trained positions (RoPE
scaling); otherwise such a request ends ``too long`` unless another pool of its model takes
it (a fleet none of whose requests of a model is taken is refused); a cascade's large fleet
takes the small one's.

A planning scenario (``inferlab plan``'s format, ``models: [...]``) may carry a ``fleet:``
section too: the fleet then runs the plan's cheapest configuration and replica count
(:mod:`.planned`) where the section does not name ``model``, ``hardware``, ``tp``,
``precision`` and ``replicas``, at the scenario's traffic, SLO and GPU price, so the same file
is planned and then run as a fleet.

Each policy mapping takes the fields of its class (:class:`~.admission.Admission`,
:class:`~.autoscaler.Autoscaler`, :class:`~.startup.Startup`, :class:`~.failures.Failures`,
:class:`~.pricing.Pricing`); an unknown field is refused with the nearest known one.
"""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any

from ..checks import real
from ..errors import SpecError
from ..specs.validation import read_yaml_mapping
from .planned import note, open_axes, planned

_TOP = ("name", "model", "hardware", "engine", "tp", "ep", "attention_dp", "precision", "deployment", "fleet",
        "allow_long_context")
_FLEET = ("replicas", "hours", "router", "admission", "autoscaler", "startup", "failures", "pricing", "slo",
          "traffic", "trace", "seed", "need", "cascade", "prefix_cache", "pools", "regions")


def _known(keys: Any, allowed: tuple[str, ...], where: str) -> None:
    for key in keys:
        if key not in allowed:
            close = difflib.get_close_matches(str(key), allowed, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise SpecError(f"{where}: unknown key {key!r}{hint} (allowed: {', '.join(allowed)})")


def load_fleet_scenario(path: str | Path) -> dict[str, Any]:
    """The file's settings as keyword arguments of :func:`~.api.fleet` (plus ``cascade``)."""
    data = read_yaml_mapping(Path(path), f"fleet scenario {path}")
    if "models" in data:
        return _from_plan_scenario(Path(path), data)
    _known(data, _TOP, f"fleet scenario {Path(path).name}")
    f = data.get("fleet")
    needed = ("fleet",) if isinstance(f, dict) and "pools" in f or "deployment" in data else ("model", "hardware", "fleet")
    for key in needed:
        if key not in data:
            raise SpecError(f"fleet scenario {Path(path).name}: missing {key!r} (see inferlab.fleet.scenario)")
    f = data["fleet"]
    if not isinstance(f, dict):
        raise SpecError(f"fleet scenario {Path(path).name}: 'fleet' must be a mapping of {', '.join(_FLEET)}")
    _known(f, _FLEET, f"fleet scenario {Path(path).name}, fleet")
    if "pools" in f:  # several pools: inferlab.fleet.fleet_of
        if "model" in data or "hardware" in data or "allow_long_context" in data or "cascade" in f:
            raise SpecError(f"fleet scenario {Path(path).name}: with fleet.pools, give model, hardware and "
                            "allow_long_context in each pool (and no cascade), not at the top")
        per_pool = sorted(k for k in ("replicas", "autoscaler", "startup", "pricing", "prefix_cache", "trace") if k in f)
        top = sorted(k for k in ("engine", "tp", "ep", "attention_dp", "precision", "deployment") if k in data)
        if per_pool or top:  # each pool has its own: these would be dropped
            raise SpecError(f"fleet scenario {Path(path).name}: with fleet.pools, {', '.join(top + per_pool)} "
                            "belong in each pool (trace: give traffic classes), not beside the pools")
        kwargs = {k: f[k] for k in ("pools", "regions", "router", "admission", "failures", "traffic", "seed", "need")
                  if k in f}
        kwargs["name"] = data.get("name", "fleet")
        if "hours" in f:
            kwargs["horizon_s"] = _hours(f["hours"])
        _slo({} if f.get("slo") is None else f["slo"], kwargs)
        return kwargs
    if "deployment" in data:  # the replica as a Deployment (inferlab.Deployment's mapping)
        clash = sorted(k for k in ("model", "hardware", "engine", "tp", "ep", "attention_dp", "precision",
                                   "allow_long_context") if k in data)
        if clash:
            raise SpecError(f"fleet scenario {Path(path).name}: {', '.join(clash)} given beside deployment; set them "
                            "in the deployment")
        from ..inputs.deployment import Deployment

        kwargs: dict[str, Any] = {"model": Deployment.from_dict(data["deployment"]), "name": data.get("name", "")}
    else:
        kwargs = {"model": data["model"], "hardware": data["hardware"], "engine": data.get("engine", "vllm"),
                  "tp": data.get("tp", 1), "ep": data.get("ep", 1), "attention_dp": data.get("attention_dp", False),
                  "precision": data.get("precision"), "name": data.get("name", ""),
                  "allow_long_context": data.get("allow_long_context", False)}
    for key in ("replicas", "router", "admission", "autoscaler", "startup", "failures", "pricing", "traffic",
                "seed", "need", "prefix_cache"):
        if key in f:
            kwargs[key] = f[key]
    if "trace" in f:
        if not isinstance(f["trace"], str) or not f["trace"].strip():
            raise SpecError(f"{Path(path).name}: fleet.trace: a CSV file's path (arrival_s,isl,osl), got "
                            f"{f['trace']!r:.60}")
        if "traffic" in f:
            raise SpecError(f"{Path(path).name}: fleet.trace and fleet.traffic both give the requests; keep one")
        trace = Path(f["trace"])
        kwargs["trace"] = trace if trace.is_absolute() else Path(path).parent / trace
    if "hours" in f:
        kwargs["horizon_s"] = _hours(f["hours"])
    _slo({} if f.get("slo") is None else f["slo"], kwargs)
    if "cascade" in f:
        kwargs["cascade"] = f["cascade"]
    return kwargs


def _from_plan_scenario(path: Path, data: dict[str, Any]) -> dict[str, Any]:
    """A planning scenario (``inferlab plan``'s format) with a ``fleet:`` section: the fleet
    runs the section's ``model``, ``hardware``, ``tp``, ``precision`` and ``replicas`` (what it
    leaves open with a choice to make, the plan's cheapest configuration and replica count; see
    :mod:`.planned`), at the search's ``max_num_seqs``, the scenario's traffic (a constant rate,
    unless the section gives ``traffic``), SLO and GPU price."""
    from ..planning.scenario import load_scenario

    sc = load_scenario(path)
    f = dict(sc.fleet or {})
    if not f:
        raise SpecError(f"{path.name} is a planning scenario without a fleet: section; add one (e.g. "
                        "fleet: {replicas: 4, router: cache_aware, hours: 1}) to run it with inferlab fleet")
    _known(f, _FLEET + ("model", "hardware", "tp", "ep", "attention_dp", "precision", "allow_long_context"),
           f"{path.name}, fleet")
    if sc.traffic.rate is None and "traffic" not in f:
        raise SpecError(f"{path.name}: the fleet needs an online rate (traffic.rate) or its own fleet.traffic")
    if "pools" in f or "cascade" in f or "trace" in f:
        raise SpecError(f"{path.name}: pools, cascade and trace need a fleet scenario file (see "
                        "examples/scenarios/fleet-day.yaml), not a planning one")
    from ..inputs.prefixes import shared_by_hit_rate

    tr = sc.traffic  # its prefix_hit as the plan runs it: a prefix every prompt shares (planning.probes)
    prefix = tr.prefix if tr.prefix is not None else shared_by_hit_rate(tr.prefix_hit, tr.isl.expected)
    traffic = f.pop("traffic", None) or {"rate": tr.rate, "isl": tr.isl, "osl": tr.osl, "prefix": prefix}
    open_ = open_axes(sc, f)
    if open_ and {"ep", "attention_dp"} & set(f):
        raise SpecError(f"{path.name}, fleet: ep and attention_dp name a replica's layout with model, hardware, tp, "
                        "precision and replicas all named; leave them out to take the plan's layout")
    if open_:  # what the section leaves open is the plan's: its cheapest configuration and replica count
        result = planned(sc, f, f"{path.name}, fleet")
        best = result.best
        for key in ("model", "hardware", "tp", "precision", "allow_long_context"):
            f.pop(key, None)
        hardware, gpus = best.hardware, best.gpus_per_replica
        kwargs: dict[str, Any] = {"model": result.deployment(best), "name": sc.name, "traffic": traffic,
                                  "replicas": f.pop("replicas", best.replicas), "notes": (note(best, open_),)}
    else:
        only = sc.search.precisions[0]  # each axis named or with one choice
        hardware = f.pop("hardware", sc.hardware[0])
        kwargs = {"model": f.pop("model", sc.models[0]), "hardware": hardware, "engine": sc.engine,
                  "profile": sc.profile, "tp": f.pop("tp", sc.search.tp[0]), "ep": f.pop("ep", 1),
                  "attention_dp": f.pop("attention_dp", False),
                  "precision": f.pop("precision", None if only == "checkpoint" else only), "name": sc.name,
                  "traffic": traffic,
                  "allow_long_context": f.pop("allow_long_context", sc.allow_long_context)}
        gpus = kwargs["tp"]
        if sc.search.max_num_seqs is not None:
            kwargs["max_num_seqs"] = sc.search.max_num_seqs
        from ..planning.search import chunked_prefill

        if "traffic" not in (sc.fleet or {}) and chunked_prefill(sc):  # as the plan runs it (TensorRT-LLM)
            kwargs["chunked_prefill"] = True
    if sc.slo.ttft_ms is not None:
        kwargs["ttft_slo_s"] = float(sc.slo.ttft_ms) / 1e3
    if sc.slo.tpot_ms is not None:
        kwargs["tpot_slo_s"] = float(sc.slo.tpot_ms) / 1e3
    if hardware in sc.prices and "pricing" not in f:
        f["pricing"] = {"on_demand_usd_per_hour": float(sc.prices[hardware]) * gpus}
    _slo(f.pop("slo", None) or {}, kwargs)
    if "hours" in f:
        kwargs["horizon_s"] = _hours(f.pop("hours"))
    kwargs.update(f)
    return kwargs


def _hours(value: Any) -> float:
    """``fleet.hours`` as the horizon [s]."""
    from .api import MAX_HORIZON_S

    return real("fleet.hours", value, minimum=0.0, include_minimum=False, maximum=MAX_HORIZON_S / 3600.0, unit="h") \
        * 3600.0


def _slo(slo: dict[str, Any], kwargs: dict[str, Any]) -> None:
    """``fleet.slo``: ``ttft_ms`` and ``tpot_ms`` into the fleet's keyword arguments [s]."""
    if not isinstance(slo, dict):  # (a string's characters had been read as its keys)
        raise SpecError(f"fleet.slo must be a mapping of ttft_ms and tpot_ms, got {slo!r:.60}")
    _known(slo, ("ttft_ms", "tpot_ms"), "fleet.slo")
    for key, arg in (("ttft_ms", "ttft_slo_s"), ("tpot_ms", "tpot_slo_s")):
        if key in slo:
            kwargs[arg] = real(f"fleet.slo.{key}", slo[key], minimum=0.0, include_minimum=False, unit="ms") / 1e3
