"""``inferlab.fleet``: a fleet of replicas of one deployment behind a router, over a day."""

from __future__ import annotations

import math
import numbers
from dataclasses import replace
from typing import Any, Callable

import numpy as np

from ..checks import boolean, integer, is_default, real
from ..errors import InferlabError, SpecError, did_you_mean, placed
from ..inputs.deployment import Deployment
from .admission import Admission
from .autoscaler import Autoscaler, starting_count
from .failures import Failures
from .pools import Pool, Regions, check_pool, check_region_names, check_start_quotas, default_need, regions_of
from .pricing import Pricing, catalog_price
from .result import DEFAULT_TTFT_SLO_S, FleetResult
from .router import POLICIES, RouterConfig
from .replicas import check_keywords, replica_kind, served_lengths
from .prompts import check_pools_take
from .simulation import FleetConfig, run
from .startup import Startup, dominant_phase
from .traffic import Requests, read_trace
from .classes import build_requests, unsent_shapes
from .deployments import REPLICA, pool_of_deployment, replica_of
from .outcome import result_of

#: Longest simulated span [s]: a year; float64 times then still resolve 10 ns, far below a
#: step (availability over months of failures needs more than a day).
MAX_HORIZON_S = 366 * 86400.0
_POOL_KEYS = ("model", "hardware", "tp", "ep", "attention_dp", "precision", "engine", "profile", "replicas", "region",
              "provider", "serves", "autoscaler", "pricing", "startup", "prefix_cache", "limits", "deployment",
              "allow_long_context")


def fleet(model: Any, hardware: Any = None, *, tp: int = 1, ep: int = 1, attention_dp: bool = False,
          precision: Any = None, engine: str = "vllm",
          profile: Any = "default", replicas: int = 1, traffic: Any = None, trace: Any = None,
          horizon_s: float = 3600.0, router: str | RouterConfig = "least_outstanding",
          admission: Admission | dict | None = None, autoscaler: Autoscaler | dict | None = None,
          failures: Failures | dict | None = None, startup: Startup | dict | None = None,
          pricing: Pricing | dict | None = None, prefix_cache: bool = True, ttft_slo_s: float = DEFAULT_TTFT_SLO_S,
          tpot_slo_s: float | None = None, drain_s: float | None = None, need: int | None = None,
          sample_s: float | None = None, seed: int = 0, name: str = "",
          progress: Callable[[float], None] | None = None, requests: Requests | None = None,
          allow_long_context: bool = False, **limits: Any) -> FleetResult:
    """Simulate a fleet of replicas of one deployment, fed by a router, over ``horizon_s``.

    Parameters
    ----------
    model, hardware, tp, ep, attention_dp, precision, engine, profile :
        One replica, as :func:`inferlab.serve`; ``limits`` override scheduler fields
        (``max_num_seqs``, ...). Or a :class:`~inferlab.Deployment` as ``model`` alone,
        which sets all of them (and the on-demand price when it names one).
    replicas : int
        Replicas serving at the start.
    traffic : dict, Profile or list of dicts
        Request classes: each a rate profile (``shape``: constant, daily, ramp, burst;
        ``rate`` [request/s] and the shape's fields, see :class:`~.traffic.Profile`) with
        ``isl``, ``osl`` [token] (default 1024 and 256) and an optional ``prefix`` (``"sessions:turns=2,think=5"``,
        ``"shared:tokens=4000,groups=50,zipf=1"``).
    trace : path, optional
        A CSV of requests instead (see :func:`~.traffic.read_trace`).
    horizon_s : float [s]
    router : str or RouterConfig
        round_robin, random, least_outstanding, least_kv or cache_aware.
    admission, autoscaler, failures, startup, pricing :
        Policies (objects or mappings of their fields); see each module.
    ttft_slo_s, tpot_slo_s : float [s]
        The SLOs goodput counts against (no TPOT SLO by default).
    drain_s : float [s], optional
        How long after the horizon the requests still in the fleet may finish; the rest are
        ``unfinished`` (default: as long as the horizon, and at least 600 s).
    need : int, optional
        Replicas the traffic needs without failures, for availability (default: the
        autoscaler's ``min_replicas``, else ``replicas``).
    requests : Requests, optional
        The requests themselves, instead of ``traffic`` or ``trace``.
    allow_long_context : bool
        Accept requests (and a ``max_model_len``) beyond the model's trained positions, as
        :func:`inferlab.serve` does (a Deployment sets its own).

    Returns
    -------
    FleetResult
    """
    check_keywords(limits, fleet)
    horizon_s = real("fleet: horizon_s", horizon_s, minimum=0.0, include_minimum=False, maximum=MAX_HORIZON_S, unit="s")
    replicas = integer("fleet: replicas", replicas, minimum=0, maximum=100_000)
    seed = integer("fleet: seed", seed, minimum=0, maximum=2**63 - 1)
    ttft_slo_s = real("fleet: ttft_slo_s", ttft_slo_s, minimum=0.0, include_minimum=False, unit="s")
    tpot_slo_s = _tpot_slo(tpot_slo_s)
    if need is not None:
        need = integer("fleet: need", need, maximum=100_000)
    replica_price = None  # a Deployment's price for the replica's GPUs [USD/h]
    if isinstance(model, Deployment):
        defaults = (("hardware", hardware, None), ("tp", tp, 1), ("ep", ep, 1), ("attention_dp", attention_dp, False),
                    ("precision", precision, None),
                    ("engine", engine, "vllm"), ("profile", profile, "default"),
                    ("allow_long_context", allow_long_context, False))
        given = [name for name, value, default in defaults if not is_default(value, default)]
        if given or limits:
            raise SpecError(f"fleet(deployment): {', '.join(given + ['limits'] * bool(limits))} given beside the "
                            "Deployment; set them in it instead")
        spec = replica_of(model)
        model, hardware, tp, ep, attention_dp, precision, engine, profile, limits = (spec[k] for k in REPLICA)
        allow_long_context = spec["allow_long_context"]
        replica_price = spec["price"]
    elif hardware is None:
        raise SpecError("fleet: give the hardware (a catalog id such as h100-sxm), or a Deployment")
    if requests is None:
        requests = read_trace(trace) if trace is not None else build_requests(traffic, horizon_s, seed)
    allow_long_context = boolean("fleet: allow_long_context", allow_long_context)
    kind, cs = replica_kind(name, model, hardware, tp=tp, ep=ep, attention_dp=attention_dp, precision=precision,
                            engine=engine, profile=profile, limits=limits,
                            startup=_policy(Startup, startup) or Startup(),
                            prefix_cache=boolean("fleet: prefix_cache", prefix_cache), lengths=served_lengths(requests),
                            allow_long_context=allow_long_context)
    dep = kind.model.dep
    check_pools_take((Pool(kind, allow_long_context=allow_long_context),), requests)
    _check_models_served(requests, [dep.model.id or dep.model.name])  # one model: a class naming another is refused
    # the on-demand price the pricing leaves out: the Deployment's, else the catalog's
    price = (_policy(Pricing, pricing) or Pricing()).with_on_demand(replica_price).with_on_demand(catalog_price(dep))
    scaler = _policy(Autoscaler, autoscaler)
    if replicas == 0 and scaler is None:
        raise SpecError("fleet: replicas=0 without an autoscaler serves nothing; give replicas >= 1, or an autoscaler "
                        "that starts some")
    if drain_s is not None:
        drain_s = real("fleet: drain_s", drain_s, minimum=0.0, maximum=MAX_HORIZON_S, unit="s")
    if sample_s is not None:
        sample_s = real("fleet: sample_s", sample_s, minimum=1.0, maximum=MAX_HORIZON_S, unit="s")
    cfg = FleetConfig(replicas=replicas, router=_router(router), admission=_policy(Admission, admission) or Admission(),
                      autoscaler=scaler, failures=_policy(Failures, failures), horizon_s=horizon_s,
                      sample_s=sample_s or (scaler.period_s if scaler else max(horizon_s / 2000.0, 1.0)), seed=seed,
                      pools=(Pool(kind, replicas, scaler, price, allow_long_context=allow_long_context),),
                      drain_s=drain_s)
    record = run(kind, requests, cfg, progress)
    phase, share = dominant_phase(cs)
    below = starting_count(replicas, scaler, "fleet")
    notes = (*([f"cold start {float(cs.total_s):.0f} s per new replica; {phase} dominates scale-up ({share:.0%})"]
               if scaler is not None or cfg.failures is not None or price.spot_share and price.spot_reclaims_per_h
               else []),  # (no replica is ever started otherwise: no scaling, no failure, no spot reclaim)
             *([below] if below else []), *([price.unused_spot_note] if price.unused_spot_note else []))
    late = np.asarray(requests.arrival)[np.asarray(requests.arrival) >= horizon_s]
    notes = (*notes, *unsent_shapes(traffic if trace is None else None, horizon_s))
    if trace is not None and late.size:  # a trace longer than the horizon: its tail is not sent
        notes = (*notes, f"{late.size:,} of the trace's requests arrive after the {horizon_s / 3600.0:.3g} h horizon "
                         f"and are not sent (it spans {float(late.max()) / 3600.0:.3g} h): give hours to cover it")
    return replace(result_of(kind.name, requests, record, cfg, price, need or default_need(cfg.pools), ttft_slo_s,
                             notes),
                   tpot_slo_s=tpot_slo_s)


def _check_models_served(requests: Any, models: list[str]) -> None:
    """Refuse traffic that asks for a model no pool serves (every such request would be lost, or
    served by another model); ``models``: each pool's, "" for a pool that takes any request."""
    if requests.model is None or "" in models:  # a pool without a model takes any request
        return
    served = sorted(set(models))
    asked = set(requests.model.tolist())
    if "" in asked and len(served) > 1:
        raise SpecError(f"fleet traffic: a class names no model, and the pools serve {', '.join(served)}: its requests "
                        "would go to any of them; give each class its model")
    for name in sorted(asked - set(served) - {""}):
        raise SpecError(f"fleet traffic asks for model {name!r}, which no pool serves{did_you_mean(name, served)}; "
                        f"pools serve: {', '.join(served)}")


def _tpot_slo(value: float | None) -> float:
    """The TPOT SLO [s]; None: none (``inf``)."""
    if value is None:
        return math.inf
    return real("fleet: tpot_slo_s", value, minimum=0.0, include_minimum=False, unit="s")


def fleet_of(pools: list[dict], *, traffic: Any, horizon_s: float = 3600.0, regions: Regions | dict | None = None,
             router: str | RouterConfig = "least_outstanding", admission: Admission | dict | None = None,
             failures: Failures | dict | None = None, ttft_slo_s: float = DEFAULT_TTFT_SLO_S,
             tpot_slo_s: float | None = None,
             need: int | None = None, sample_s: float | None = None, seed: int = 0, name: str = "fleet",
             progress: Callable[[float], None] | None = None) -> FleetResult:
    """A fleet of several pools: models, GPU types and regions (see :mod:`.pools`).

    Parameters
    ----------
    pools : list of dict
        Each: ``model``, ``hardware`` (and ``tp``, ``precision``, ``engine``, ``profile``,
        ``limits``: scheduler overrides) or a ``deployment`` (a :class:`~inferlab.Deployment`
        or its mapping, which sets all of them), ``replicas``, ``region``, ``provider``, ``serves`` (the model
        name requests ask for; default ``model``), ``autoscaler``, ``pricing``, ``startup``.
    traffic : list of dict
        As :func:`fleet`, each class with the ``region`` its users are in and the ``model``
        they ask for.
    regions : Regions or dict
        Round trips ``rtt_s`` (``{"a|b": seconds}`` in a mapping), ``quota_gpus`` (per region),
        ``provider_quota_gpus`` (per provider, over its regions), ``spill``.
    """
    horizon_s = real("fleet: horizon_s", horizon_s, minimum=0.0, include_minimum=False, maximum=MAX_HORIZON_S, unit="s")
    if not isinstance(pools, (list, tuple)):
        raise SpecError(f"fleet: pools must be a list of mappings (model, hardware, replicas, ...), got {pools!r:.60}")
    built, starts = [], []
    requests = build_requests(traffic, horizon_s, seed)
    for k, spec in enumerate(pools):
        check_pool(k, spec, _POOL_KEYS)
        if "deployment" in spec:
            spec = pool_of_deployment(k, spec)
        check_pool(k, spec, _POOL_KEYS, written_out=True)
        serves = str(spec.get("serves", spec["model"]))
        long_context = boolean(f"pool {k}: allow_long_context", spec.get("allow_long_context", False))
        try:
            kind, _ = replica_kind("", spec["model"], spec["hardware"], tp=spec.get("tp", 1), ep=spec.get("ep", 1),
                                   attention_dp=boolean(f"pool {k}: attention_dp", spec.get("attention_dp", False)),
                                   precision=spec.get("precision"), engine=spec.get("engine", "vllm"),
                                   profile=spec.get("profile", "default"), limits=spec.get("limits", {}),
                                   startup=_policy(Startup, spec.get("startup")) or Startup(),
                                   prefix_cache=boolean(f"pool {k}: prefix_cache", spec.get("prefix_cache", True)),
                                   lengths=served_lengths(requests, serves), allow_long_context=long_context)
        except InferlabError as exc:  # which pool it is (a layout that does not fit, a name, a limit)
            if str(exc).startswith(f"pool {k}"):
                raise
            raise placed(exc, f"pool {k}") from None
        dep = kind.model.dep
        kind = replace(kind, name=f"{serves} on {dep.hardware.id} in {spec.get('region', 'local')}")
        price = (_policy(Pricing, spec.get("pricing")) or Pricing()).with_on_demand(catalog_price(dep))
        built.append(Pool(kind, integer(f"pool {k}: replicas", spec.get("replicas", 1), minimum=0, maximum=100_000),
                          _policy(Autoscaler, spec.get("autoscaler")), price,
                          str(spec.get("region", "local")), serves, dep.parallel.tp * dep.parallel.pp,
                          str(spec.get("provider", "")), long_context))
        if (below := starting_count(built[-1].replicas, built[-1].autoscaler, f"pool {k}")) is not None:
            starts.append(below)
        if built[-1].replicas == 0 and built[-1].autoscaler is None:
            raise SpecError(f"pool {k}: replicas 0 without an autoscaler serves nothing; give replicas >= 1, or an "
                            "autoscaler that starts some")
    if not built:
        raise SpecError("fleet: give at least one pool")
    regions = regions_of(regions)
    check_region_names(built, regions)
    _check_models_served(requests, [p.model for p in built])
    check_pools_take(built, requests)  # each engine refuses what it would serve that is too long
    sample_s = (real("fleet: sample_s", sample_s, minimum=1.0, maximum=MAX_HORIZON_S, unit="s")
                if sample_s is not None else max(horizon_s / 2000.0, 1.0))
    check_start_quotas(built, regions)
    cfg = FleetConfig(replicas=sum(p.replicas for p in built), router=_router(router),
                      admission=_policy(Admission, admission) or Admission(), failures=_policy(Failures, failures),
                      horizon_s=horizon_s, sample_s=sample_s, seed=seed, pools=tuple(built), regions=regions)
    record = run(built[0].kind, requests, cfg, progress)
    served = record.status == 0
    far = record.half_rtt[served] > 0
    notes = tuple(starts)
    if far.any():
        notes = (*notes, f"{far.mean():.1%} of served requests crossed regions, adding "
                 f"{2e3 * float(np.mean(record.half_rtt[served][far])):.0f} ms of round trip on average",)
    asked = set(requests.model.tolist()) if requests.model is not None else {""}
    idle = sorted({p.model for p in built} - asked) if "" not in asked else []
    if idle:  # a pool's replicas are paid whether or not a request asks for its model
        notes = (*notes, f"no traffic class names {', '.join(idle)}: {'its pools' if len(idle) == 1 else 'their pools'}"
                         " serve nothing and are paid while idle")
    notes = (*notes, *dict.fromkeys(p.pricing.unused_spot_note for p in built if p.pricing.unused_spot_note),
             *unsent_shapes(traffic, horizon_s))
    refused = sum(1 for e in record.events if e[1] == "quota")
    if refused:  # a pool whose region or provider quota has no room runs fewer replicas than asked
        notes = (*notes, f"{refused} replica order(s) refused by a GPU quota (fleet.regions quota_gpus or "
                         "provider_quota_gpus)")
    return replace(result_of(name, requests, record, cfg, built[0].pricing, need or default_need(cfg.pools), ttft_slo_s,
                             notes), tpot_slo_s=_tpot_slo(tpot_slo_s))


def _policy(cls: type, value: Any) -> Any:
    if value is None or isinstance(value, cls):
        return value
    if not isinstance(value, dict):
        article = "an" if cls.__name__[0] in "AEIOU" else "a"
        raise SpecError(f"fleet: {cls.__name__.lower()} must be {article} {cls.__name__} or a mapping of its fields, "
                        f"got {value!r:.60}")
    unknown = sorted(set(value) - set(cls.__dataclass_fields__))
    if unknown:
        import difflib
        close = difflib.get_close_matches(unknown[0], cls.__dataclass_fields__, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise SpecError(f"fleet {cls.__name__.lower()}: unknown field {unknown[0]!r}{hint} "
                        f"(allowed: {', '.join(cls.__dataclass_fields__)})")
    given_nan = [k for k, v in value.items()  # NaN inside means "not given" (a numpy float's too)
                 if isinstance(v, numbers.Real) and not isinstance(v, bool) and math.isnan(v)]
    if given_nan:
        raise SpecError(f"fleet {cls.__name__.lower()}.{given_nan[0]} must be a number, got nan (leave it out for the "
                        "default)")
    return cls(**value)


def _router(value: str | RouterConfig | dict) -> RouterConfig:
    if isinstance(value, RouterConfig):
        return value
    if isinstance(value, str):
        return RouterConfig(policy=value)
    if not isinstance(value, dict):
        raise SpecError(f"fleet: router must be a policy name ({', '.join(POLICIES)}) or a mapping, got {value!r:.40}")
    return _policy(RouterConfig, value)
