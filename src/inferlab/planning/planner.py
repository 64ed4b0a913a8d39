"""The planner: search the configuration space of a scenario, rank what meets the SLOs by cost.

For each candidate (model, GPU, precision, TP, EP, speculation; aggregated or with a
disaggregated decode pool) one vectorized :func:`inferlab.estimate` over a grid of batch
sizes gives the decode step and prefill times; the fluid model (:mod:`.fluid`) turns them
into the request rate a replica sustains at each concurrency and the latencies there. The
largest concurrency that meets the SLOs (with the planned utilization and queueing) sets
the replica's capacity; replicas = ceil(traffic / capacity). The best candidates are then
re-checked with the request-level simulation, adding replicas until the simulated
percentiles meet the SLOs.
"""

from __future__ import annotations

import functools
import itertools
import math
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from ..core.memory import plan_memory, require_weights_fit
from ..core.phases import mean_decode_step_s
from ..errors import InferlabError
from ..estimate import deployment
from ..techniques.prefix_cache import PrefixCache, effective_cached_tokens, prefill_with_cache
from ..techniques.speculative import SpeculativeConfig, mean_speculative_tpot_s
from ..results.render import text_table
from ..specs.catalog import load_hardware, load_model
from .fluid import max_utilization, operating_points, queue_wait_s
from .operations import day_plan
from .scenario import Scenario

_BATCHES = np.unique(np.round(np.geomspace(1, 4096, 36)))
#: Engine settings the search assumes (the :func:`inferlab.estimate` defaults).
_MAX_NUM_TOKENS = 8192
_GPU_MEMORY = 0.9
_KV_BLOCK = 16


@dataclass(frozen=True)
class Candidate:
    """One configuration and what it needs to carry the scenario's traffic."""

    model: str
    hardware: str
    precision: str
    tp: int
    ep: int
    speculative: str | None
    feasible: bool
    disaggregated: bool = False
    pp: int = 1
    reason: str = ""
    batch: float = float("nan")
    replica_rate: float = float("nan")
    replicas: int = 0
    gpus: int = 0
    usd_per_hour: float = float("nan")
    usd_per_million_output: float = float("nan")
    tpot_s: float = float("nan")
    ttft_s: float = float("nan")
    tokens_per_s_per_user: float = float("nan")
    tokens_per_s_per_gpu: float = float("nan")
    headroom: float = float("nan")
    binding: str = ""
    verified: dict[str, Any] = field(default_factory=dict)
    curve: dict[str, np.ndarray] = field(default_factory=dict, repr=False)
    pd: str = ""  # prefill:decode replicas of a disaggregated candidate

    @property
    def label(self) -> str:
        """Short description, e.g. ``llama-3.1-70b h200-sxm fp8 tp4``."""
        text = f"{self.model} {self.hardware} {self.precision} tp{self.tp}"
        text += f" pp{self.pp}" if self.pp > 1 else ""
        text += f" ep{self.ep}" if self.ep > 1 else ""
        text += f" disagg {self.pd}" if self.disaggregated else ""
        return text + (f" +{self.speculative}" if self.speculative else "")


@dataclass(frozen=True)
class Plan:
    """Ranked candidates (feasible first, by cost), with the scenario they answer."""

    scenario: Scenario
    candidates: tuple[Candidate, ...]

    @property
    def feasible(self) -> tuple[Candidate, ...]:
        """Candidates that meet the SLOs within the limits, cheapest first."""
        return tuple(c for c in self.candidates if c.feasible)

    @property
    def best(self) -> Candidate | None:
        """The cheapest feasible candidate (verified by simulation when ``verify`` > 0)."""
        return self.feasible[0] if self.feasible else None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready ranking (and the winner's day, with an ``operations`` section)."""
        day = day_plan(self.scenario, self.best)
        return {"scenario": self.scenario.model_dump(mode="json"),
                "candidates": [dict({k: v for k, v in c.__dict__.items() if k != "curve"}, label=c.label)
                               for c in self.candidates],
                **({"operations": day.to_dict()} if day is not None else {})}

    def operating_table(self) -> dict[str, np.ndarray]:
        """Every operating point of every candidate that fits (one row per concurrency), for
        Pareto fronts: tokens/s per user, per GPU and per dollar-hour, whether the SLOs hold."""
        cols: dict[str, list] = {k: [] for k in ("label", "batch_size", "output_tokens_per_s_per_user",
                                                 "output_tokens_per_s_per_gpu", "output_tokens_per_usd",
                                                 "meets_slo", "chosen")}
        best = self.best
        for c in self.candidates:
            if not c.curve:
                continue
            n = len(c.curve["batch_size"])
            cols["label"] += [c.label] * n
            for key in ("batch_size", "output_tokens_per_s_per_user", "output_tokens_per_s_per_gpu",
                        "output_tokens_per_usd", "meets_slo"):
                cols[key] += list(c.curve[key])
            cols["chosen"] += list((c is best) & (c.curve["batch_size"] == c.batch))
        return {k: np.asarray(v) for k, v in cols.items()}

    def __str__(self, limit: int = 15) -> str:
        sc = self.scenario
        slo = sc.slo
        head = (f"plan '{sc.name}': {sc.traffic.request_rate:g} req/s, ISL ~{sc.traffic.isl.expected:.0f}, "
                f"OSL ~{sc.traffic.osl.expected:.0f}"
                + (f"; SLO P{slo.percentile:g} TTFT {slo.ttft_ms} ms, TPOT {slo.tpot_ms} ms" if slo.ttft_ms or slo.tpot_ms else ""))
        rows = []
        for c in self.feasible[:limit]:
            check = c.verified.get("meets") if not c.verified.get("skipped") else "n/a"
            rows.append([c.label, str(c.replicas), str(c.gpus), f"{c.usd_per_hour:,.2f}", f"{c.usd_per_million_output:.3f}",
                         f"{c.ttft_s * 1e3:.0f}", f"{c.tpot_s * 1e3:.1f}", f"{c.headroom:.0%}", c.binding,
                         "-" if check is None else (check if isinstance(check, str) else ("yes" if check else "no"))])
        table = text_table(["configuration", "replicas", "GPUs", "$/h", "$/M out", "TTFT ms", "TPOT ms", "headroom",
                            "binding", "simulated ok"], rows, right={1, 2, 3, 4, 5, 6, 7})
        skipped = len(self.candidates) - len(self.feasible)
        return f"{head}\n{table}\n{len(self.feasible)} feasible, {skipped} ruled out (see to_dict() for reasons)"

    def explain(self) -> str:
        """Why the winner wins, against the runner-up and the cheapest rule-outs."""
        best = self.best
        if best is None:
            reasons = sorted({c.reason for c in self.candidates})
            return "no configuration meets the scenario: " + "; ".join(reasons[:6])
        lines = [f"best: {best.label}, {best.replicas} replica(s) = {best.gpus} GPUs at ${best.usd_per_hour:,.2f}/h "
                 f"(${best.usd_per_million_output:.3f} per 1M output tokens); each replica runs ~{best.batch:.0f} "
                 f"requests at once; the binding constraint is {best.binding}"]
        others = self.feasible[1:3]
        for c in others:
            lines.append(f"  vs {c.label}: ${c.usd_per_hour:,.2f}/h ({c.usd_per_hour / best.usd_per_hour - 1:+.0%}), "
                         f"bound by {c.binding}")
        api = self.scenario.api_price
        if api is not None and not best.disaggregated:
            from ..economics import api_vs_dedicated

            tr = self.scenario.traffic
            be = api_vs_dedicated(usd_per_million_input=api.input_per_million,
                                  usd_per_million_output=api.output_per_million, isl=tr.isl.expected,
                                  osl=tr.osl.expected, usd_per_replica_hour=best.usd_per_hour / best.replicas,
                                  requests_per_s_per_replica=best.replica_rate)
            api_h = float(be.api_usd_per_request) * tr.request_rate * 3600.0
            lines.append(f"vs the API at ${api.input_per_million:g}/${api.output_per_million:g} per 1M in/out tokens: "
                         f"${api_h:,.2f}/h for this traffic; dedicated replicas pay off from "
                         f"{float(be.break_even_request_rate):.2f} req/s (each replica {float(be.break_even_utilization):.0%} busy)")
        if best.verified.get("skipped"):
            lines.append(f"not simulated: {best.verified['skipped']}")
        elif best.verified:
            v = best.verified
            lines.append(f"simulated at the planned load: P{self.scenario.slo.percentile:g} TTFT {v['ttft_s'] * 1e3:.0f} ms, "
                         f"TPOT {v['tpot_s'] * 1e3:.1f} ms -> {'meets' if v['meets'] else 'misses'} the SLOs")
        day = day_plan(self.scenario, best)
        return "\n".join(lines + (day.lines() if day is not None else []))


def _tp_rule_out(model: Any, tp: int, node: int, hardware: str) -> str:
    """Why a tensor-parallel degree cannot run the model on the hardware ('' when it can)."""
    if tp > node:
        return f"tp={tp} spans more than the {node} GPUs of one {hardware} node (tensor parallelism stays in a node)"
    if model.num_attention_heads % tp:
        return f"tp={tp} does not divide the {model.num_attention_heads} attention heads"
    return ""


def candidates(scenario: Scenario) -> list[dict[str, Any]]:
    """Every configuration of the search space, as estimate() keyword sets; one that cannot
    run at all carries its ``reason`` (it is ruled out, not dropped)."""
    from ..core.interconnect import node_size

    out = []
    for model_id, hw_id in itertools.product(scenario.models, scenario.hardware):
        model, hw = load_model(model_id), load_hardware(hw_id)
        for prec, tp, pp, spec in itertools.product(scenario.search.precisions, scenario.search.tp,
                                                    scenario.search.pp, scenario.search.speculative):
            reason = _tp_rule_out(model, tp, node_size(hw), hw_id)
            eps = [1] + ([tp] if model.is_moe and scenario.search.expert_parallel and tp > 1
                         and model.moe.num_experts % tp == 0 and not reason else [])
            for ep in eps:
                # disaggregated pools are tensor-parallel replicas: no pipeline or expert groups in them
                modes = (False, True) if scenario.search.disaggregation and pp == 1 and ep == 1 and not reason else (False,)
                for disagg in modes:
                    out.append({"model": model_id, "hardware": hw_id, "precision": prec, "tp": tp, "pp": pp,
                                "ep": ep, "speculative": spec, "disaggregated": disagg,
                                **({"reason": reason} if reason else {})})
    return out


def evaluate(scenario: Scenario, config: dict[str, Any]) -> Candidate:
    """Capacity, replicas and cost of one configuration for the scenario (ruled out with
    its reason when it cannot run or meet the SLOs)."""
    sc, tr, slo = scenario, scenario.traffic, scenario.slo
    isl, osl = tr.isl.expected, tr.osl.expected
    base = Candidate(**config, feasible=False)
    if base.reason:
        return base
    try:
        est = _capacity_curve(sc, config, round(isl), max(round(osl), 2))
    except InferlabError as exc:
        return replace(base, reason=str(exc))
    by_memory = est.max_sequences
    seq_limit = _max_num_seqs(sc)
    fits = np.minimum(by_memory, seq_limit)
    ok = _BATCHES <= fits
    if not ok.any():
        return replace(base, reason="not even one request fits next to the weights")
    limit = "KV memory" if float(np.min(by_memory)) < seq_limit else "engine batch limit (max_num_seqs)"
    prefill_1 = est.prefill_1_s
    if config.get("disaggregated"):
        return _limits(sc, _disaggregated(sc, config, est, ok, prefill_1, limit, base), config)
    pts = operating_points(_BATCHES, est.tpot_s, prefill_1, isl, osl, 8192.0)
    cap = sc.search.target_utilization
    tpot_p = pts.tpot_s * _tpot_tail(slo.percentile)
    meets = ok.copy()
    if slo.ttft_ms:
        # the queue may take what the prefill leaves of the TTFT budget: lower utilization, shorter waits
        util = max_utilization(pts.rate, slo.ttft_ms / 1e3 - pts.ttft_s, slo.percentile, cap)
        meets &= util > 0
    else:
        util = np.full(len(_BATCHES), cap)
    if slo.tpot_ms:
        meets &= tpot_p <= slo.tpot_ms / 1e3
    if not meets.any():
        why = []
        if slo.tpot_ms and tpot_p[0] > slo.tpot_ms / 1e3:
            why.append(f"TPOT {tpot_p[0] * 1e3:.1f} ms > {slo.tpot_ms} ms even alone")
        if slo.ttft_ms and pts.ttft_s[0] > slo.ttft_ms / 1e3:
            why.append(f"TTFT {pts.ttft_s[0] * 1e3:.0f} ms > {slo.ttft_ms} ms even alone")
        return replace(base, reason="; ".join(why) or "no concurrency meets the SLOs")
    capacity_all = pts.rate * util
    j = int(np.flatnonzero(meets)[np.argmax(capacity_all[meets])])
    nxt = j + 1
    if nxt < len(_BATCHES) and not ok[nxt]:
        binding_j = limit
    elif slo.tpot_ms and nxt < len(_BATCHES) and tpot_p[nxt] > slo.tpot_ms / 1e3:
        binding_j = "TPOT SLO"
    elif slo.ttft_ms and (util[j] < cap or (nxt < len(_BATCHES) and not meets[nxt])):
        binding_j = "TTFT SLO"
    else:
        binding_j = limit
    capacity = float(capacity_all[j])
    u = float(util[j])
    replicas = max(1, math.ceil(tr.request_rate / capacity))
    gpus_per_replica = config["tp"] * config.get("pp", 1)
    gpus = replicas * gpus_per_replica
    price = _price(sc, config["hardware"])
    usd_h = gpus * price
    tokens_out = tr.request_rate * osl
    # at the planned load each replica runs below the utilization the SLO allows: its P-th TTFT
    in_use = tr.request_rate / (replicas * float(pts.rate[j]))
    planned_ttft = float(pts.ttft_s[j] + queue_wait_s(pts.rate[j], in_use, slo.percentile))
    curve = {"batch_size": _BATCHES[ok], "output_tokens_per_s_per_user": 1.0 / pts.tpot_s[ok],
             "output_tokens_per_s_per_gpu": pts.rate[ok] * osl / gpus_per_replica,
             "output_tokens_per_usd": pts.rate[ok] * osl * 3600.0 / (gpus_per_replica * price),
             "meets_slo": meets[ok]}
    cand = replace(base, curve=curve, feasible=True, batch=float(_BATCHES[j]), replica_rate=capacity, replicas=replicas,
                   gpus=gpus, usd_per_hour=usd_h, usd_per_million_output=usd_h / (tokens_out * 3600.0) * 1e6,
                   tpot_s=float(tpot_p[j]), ttft_s=planned_ttft,
                   tokens_per_s_per_user=1.0 / float(pts.tpot_s[j]),
                   tokens_per_s_per_gpu=float(pts.rate[j]) * osl / gpus_per_replica,
                   headroom=replicas * capacity / u / tr.request_rate - 1.0, binding=binding_j)
    return _limits(sc, cand, config)


@dataclass(frozen=True)
class _Curve:
    """What the search needs of one candidate: the decode step at each concurrency of
    :data:`_BATCHES`, the prefill of one prompt, and how many sequences the KV memory holds."""

    deployment: Any
    max_sequences: np.ndarray
    prefill_1_s: float
    tpot_s: np.ndarray


def _capacity_curve(sc: Scenario, config: dict[str, Any], isl: int, osl: int) -> _Curve:
    """The core's view of a candidate, as :func:`inferlab.estimate` computes it (same memory
    plan, prefill with the prefix cache, decode integral with or without speculation) without
    the static-batch waves and costs the search does not use. The aggregated and the
    disaggregated variant of a configuration share it."""
    return _cached_curve(config["model"], config["hardware"], config["tp"], config.get("pp", 1), config["ep"],
                         config["precision"], config["speculative"], sc.engine, sc.profile, sc.traffic.prefix_hit,
                         isl, osl)


def _curve(model: str, hardware: str, tp: int, pp: int, ep: int, precision: str, speculative: Any, engine: str,
           profile: Any, prefix_hit: float, isl: int, osl: int) -> _Curve:
    spec = SpeculativeConfig.parse(speculative) if isinstance(speculative, str) else speculative
    dep, max_sequences, prefill_1 = _prefill_and_memory(model, hardware, tp, pp, ep, precision, engine, profile,
                                                        prefix_hit, isl, osl)
    b, i, o = _BATCHES, np.asarray(float(isl)), np.asarray(float(osl))
    tpot = (mean_decode_step_s(dep, b, i, o) if spec is None else mean_speculative_tpot_s(dep, b, i, o, spec))
    return _Curve(dep, max_sequences, prefill_1, np.broadcast_to(tpot, b.shape))


@functools.lru_cache(maxsize=64)
def _prefill_and_memory(model: str, hardware: str, tp: int, pp: int, ep: int, precision: str, engine: str,
                        profile: Any, prefix_hit: float, isl: int, osl: int) -> tuple[Any, np.ndarray, float]:
    """The deployment, the sequences its KV memory holds at each batch of :data:`_BATCHES` and
    the prefill of one prompt [s]: what a configuration with and without speculation share."""
    cache = PrefixCache(hit_rate=prefix_hit) if prefix_hit else None
    dep = deployment(model, hardware, tp=tp, pp=pp, ep=ep, precision=precision, engine=engine, profile=profile)
    b, i, o = _BATCHES, float(isl), float(osl)
    plan = plan_memory(dep.model, dep.hardware, dep.precision, parallel=dep.parallel, batch=b, context=i + o,
                       step_tokens=np.minimum(b * i, _MAX_NUM_TOKENS), gpu_memory_utilization=_GPU_MEMORY,
                       kv_block_size=_KV_BLOCK)
    require_weights_fit(plan, dep.model, dep.hardware, dep.parallel)
    pre = prefill_with_cache(dep, np.ones(()), np.asarray(i), cache, block_size=_KV_BLOCK)
    cached = 0.0 if cache is None else float(effective_cached_tokens(i, cache, block_size=_KV_BLOCK))
    chunks = math.ceil((i - cached) / _MAX_NUM_TOKENS)
    prefill_1 = float(pre.time_s) + (chunks - 1.0) * dep.profile.step_overhead_s
    return dep, np.broadcast_to(plan.max_sequences, b.shape), prefill_1


#: Curves of recent configurations (a plan asks for each twice: aggregated and disaggregated).
_cached_curve = functools.lru_cache(maxsize=64)(_curve)


def _limits(sc: Scenario, cand: Candidate, config: dict[str, Any]) -> Candidate:
    """Rule out a sized candidate that breaks the GPU count, the budget or has no price."""
    if not cand.feasible:
        return cand
    gpus, usd_h = cand.gpus, cand.usd_per_hour
    if gpus > sc.search.max_gpus:
        return replace(cand, feasible=False, reason=f"needs {gpus} GPUs > max_gpus {sc.search.max_gpus}")
    if sc.budget_usd_per_hour is not None and usd_h > sc.budget_usd_per_hour:
        return replace(cand, feasible=False, reason=f"${usd_h:,.0f}/h over the budget ${sc.budget_usd_per_hour:,.0f}/h")
    if math.isnan(usd_h):
        return replace(cand, feasible=False, reason=f"no price for {config['hardware']}: add it under prices")
    return cand


def _max_num_seqs(scenario: Scenario) -> int:
    from ..serve import ENGINE_SCHEDULERS
    from ..serving.scheduler import SchedulerConfig

    if scenario.search.max_num_seqs is not None:
        return scenario.search.max_num_seqs
    return ENGINE_SCHEDULERS.get(scenario.engine, SchedulerConfig()).max_num_seqs


def _tpot_tail(percentile: float) -> float:
    """Ratio of a percentile request TPOT to the mean under mixed prefill (a prior, ~10% at P99)."""
    return 1.0 + 0.1 * max(percentile - 50.0, 0.0) / 49.0


def verify(scenario: Scenario, cand: Candidate, *, num_requests: int = 1500, attempts: int = 3) -> Candidate:
    """Re-check a candidate with the request-level simulation; add replicas until it meets the SLOs.

    At least :data:`TAIL_REQUESTS` simulated requests lie beyond the SLO percentile (P99.9:
    10,000 requests), so the percentile checked is the scenario's, from enough samples.
    """
    from ..serve import serve

    sc, tr = scenario, scenario.traffic
    num_requests = _requests_for(sc.slo.percentile, num_requests)
    if cand.disaggregated:
        return _verify_disaggregated(sc, cand, num_requests=num_requests, attempts=attempts)
    current = cand
    for _ in range(attempts):
        rep_rate = tr.request_rate / current.replicas
        result = serve(cand.model, cand.hardware, tp=cand.tp, pp=cand.pp, ep=cand.ep, precision=cand.precision,
                       engine=sc.engine, profile=sc.profile, isl=tr.isl, osl=tr.osl, rate=rep_rate,
                       num_requests=num_requests, max_num_seqs=_max_num_seqs(sc))
        ttft, tpot, ttft_ok, tpot_ok = _simulated_slos(sc, result)
        meets = ttft_ok and tpot_ok
        current = replace(current, verified={"ttft_s": ttft, "tpot_s": tpot, "meets": meets,
                                             "replicas": current.replicas})
        if meets:
            return current
        current = _resized(current, current.replicas + 1, cand.tp * cand.pp)
    return _checked(current)


#: Fewest simulated requests beyond the SLO percentile when a candidate is verified.
TAIL_REQUESTS = 10


def _requests_for(percentile: float, num_requests: int) -> int:
    """Requests to simulate so that :data:`TAIL_REQUESTS` lie beyond ``percentile``."""
    # rounded first: 1 - 0.999 is 0.00099999... in float64, which would ask one request more
    return max(num_requests, math.ceil(round(TAIL_REQUESTS * 100.0 / (100.0 - percentile), 6)))


def _simulated_slos(sc: Scenario, result: Any) -> tuple[float, float, bool, bool]:
    """The scenario's percentile of TTFT and TPOT in a simulation [s], and whether each
    meets its objective."""
    slo = sc.slo
    ttft, tpot = (_percentile(values, slo.percentile) for values in (result.ttft_s, result.tpot_s))
    ttft_ok = not slo.ttft_ms or ttft <= slo.ttft_ms / 1e3
    tpot_ok = not slo.tpot_ms or math.isnan(tpot) or tpot <= slo.tpot_ms / 1e3  # NaN: one-token outputs
    return ttft, tpot, bool(ttft_ok), bool(tpot_ok)


def _percentile(values: np.ndarray, percentile: float) -> float:
    """``percentile`` of the defined values (NaN when none is, e.g. TPOT of one-token outputs)."""
    defined = values[~np.isnan(values)]
    return float(np.percentile(defined, percentile)) if defined.size else math.nan


def _resized(cand: Candidate, replicas: int, gpus_per_replica: int, **changes: Any) -> Candidate:
    """``cand`` with ``replicas`` replicas: GPUs, cost and headroom scaled with them."""
    gpus = replicas * gpus_per_replica
    scale = gpus / cand.gpus
    return replace(cand, replicas=replicas, gpus=gpus, usd_per_hour=cand.usd_per_hour * scale,
                   usd_per_million_output=cand.usd_per_million_output * scale,
                   headroom=(cand.headroom + 1.0) * scale - 1.0, **changes)


def _checked(cand: Candidate) -> Candidate:
    """A verified candidate is feasible only if the last simulation met the SLOs."""
    meets = cand.verified.get("meets", False)
    return replace(cand, feasible=meets, reason="" if meets else "misses the SLOs in simulation")


def _verify_disaggregated(sc: Scenario, cand: Candidate, *, num_requests: int, attempts: int) -> Candidate:
    """Simulate both pools at the scenario's rate; a missed TTFT adds a prefill replica, a
    missed TPOT a decode replica, until the SLOs hold or ``attempts`` run out."""
    from ..serve import ENGINE_SCHEDULERS
    from ..serving.disaggregated import serve_disaggregated
    from ..serving.scheduler import SchedulerConfig
    from ..techniques.disaggregation import Disaggregation, Pool

    tr = sc.traffic
    num_requests = _requests_for(sc.slo.percentile, num_requests)
    n_p, n_d = (int(x) for x in cand.pd.removeprefix("P").split(":D"))
    current = cand
    for _ in range(attempts):
        pools = [Pool(cand.hardware, num_gpus=n * cand.tp, tp=cand.tp, precision=cand.precision) for n in (n_p, n_d)]
        result = serve_disaggregated(cand.model, Disaggregation(prefill=pools[0], decode=pools[1]), isl=tr.isl,
                                     osl=tr.osl, rate=tr.request_rate, num_requests=num_requests, engine=sc.engine,
                                     profile=sc.profile, precision=cand.precision,
                                     scheduler=replace(ENGINE_SCHEDULERS.get(sc.engine, SchedulerConfig()),
                                                       max_num_seqs=_max_num_seqs(sc)))
        ttft, tpot, ttft_ok, tpot_ok = _simulated_slos(sc, result)
        current = replace(current, verified={"ttft_s": ttft, "tpot_s": tpot, "meets": ttft_ok and tpot_ok,
                                             "replicas": n_p + n_d, "pd": f"P{n_p}:D{n_d}"})
        if ttft_ok and tpot_ok:
            return current
        n_p, n_d = n_p + (not ttft_ok), n_d + (not tpot_ok)
        current = _resized(current, n_p + n_d, cand.tp, pd=f"P{n_p}:D{n_d}")
    return _checked(current)


def _price(sc: Scenario, hardware: str) -> float:
    """USD per GPU-hour: the scenario's, else the catalog's (NaN when neither has one)."""
    price = sc.prices.get(hardware)
    if price is None:
        hw = load_hardware(hardware)
        price = hw.price.si if hw.price is not None else float("nan")
    return price


def _disaggregated(sc: Scenario, config: dict[str, Any], est: Any, ok: np.ndarray, prefill_1: float, limit: str,
                   base: Candidate) -> Candidate:
    """Size separate prefill and decode pools of the same replica kind.

    Notes
    -----
    The decode pool runs plain decode steps (no prefill interleaved): at concurrency ``b`` a
    replica serves ``b / (osl x d(b))`` requests/s with TPOT ``d(b)``. The prefill pool runs
    prompts one after another (``1 / t_pf`` per replica) and its M/M/1 admission wait takes
    what the prefill, the exposed KV transfer (over the NICs, overlapped layer by layer) and
    the first decode step leave of the TTFT budget. The pools' replica counts give the P:D ratio.
    """
    from ..techniques.disaggregation import exposed_transfer_s

    tr, slo = sc.traffic, sc.slo
    isl, osl = tr.isl.expected, tr.osl.expected
    model, hw = load_model(config["model"]), load_hardware(config["hardware"])
    d = np.asarray(est.tpot_s, float)
    tail = _tpot_tail(slo.percentile)
    meets = ok & ((d * tail <= slo.tpot_ms / 1e3) if slo.tpot_ms else True)
    if not meets.any():
        return replace(base, reason=f"TPOT {d[0] * tail * 1e3:.1f} ms > {slo.tpot_ms} ms even alone")
    rate_d = _BATCHES / (max(osl, 1.0) * d)
    j = int(np.flatnonzero(meets)[np.argmax(rate_d[meets])])
    nic = hw.scale_out.bandwidth.si if hw.scale_out is not None else (hw.pcie.bandwidth.si if hw.pcie else 1e9)
    kv_bytes = float(model.kv_cache_bytes(isl, est.deployment.precision.kv_cache))
    transfer = kv_bytes / (config["tp"] * nic)
    exposed = float(exposed_transfer_s(transfer, prefill_1, model.num_hidden_layers, latency_s=20e-6))
    ttft_alone = prefill_1 + exposed + float(d[j])
    cap = sc.search.target_utilization
    mu_p = 1.0 / prefill_1
    if slo.ttft_ms:
        u_p = float(max_utilization(np.array([mu_p]), np.array([slo.ttft_ms / 1e3 - ttft_alone]), slo.percentile, cap)[0])
        if u_p <= 0:
            return replace(base, reason=f"TTFT {ttft_alone * 1e3:.0f} ms > {slo.ttft_ms} ms even alone (disaggregated)")
    else:
        u_p = cap
    n_p = max(1, math.ceil(tr.request_rate / (u_p * mu_p)))
    n_d = max(1, math.ceil(tr.request_rate / (cap * float(rate_d[j]))))
    gpus = (n_p + n_d) * config["tp"]
    usd_h = gpus * _price(sc, config["hardware"])
    in_use = tr.request_rate / (n_p * mu_p)
    ttft = ttft_alone + float(queue_wait_s(np.array(mu_p), in_use, slo.percentile))
    binding = "TPOT SLO" if (slo.tpot_ms and j + 1 < len(_BATCHES) and ok[j + 1]) else limit
    return replace(base, feasible=True, pd=f"P{n_p}:D{n_d}", batch=float(_BATCHES[j]), replica_rate=float(rate_d[j]),
                   replicas=n_p + n_d, gpus=gpus, usd_per_hour=usd_h,
                   usd_per_million_output=usd_h / (tr.request_rate * osl * 3600.0) * 1e6, tpot_s=float(d[j]) * tail,
                   ttft_s=ttft, tokens_per_s_per_user=1.0 / float(d[j]),
                   tokens_per_s_per_gpu=tr.request_rate * osl / gpus, headroom=min(n_p * u_p * mu_p,
                   n_d * cap * float(rate_d[j])) / cap / tr.request_rate - 1.0, binding=binding)


def _rank(c: Candidate) -> tuple:
    """Feasible first, cheapest first, then the shorter TTFT."""
    return (not c.feasible, c.usd_per_hour if c.feasible else math.inf, c.ttft_s if c.feasible else math.inf)


def plan(scenario: Scenario) -> Plan:
    """Search, rank and verify: the configurations that serve the scenario, cheapest first."""
    from ..serving.progress import Progress

    configs = candidates(scenario)
    evaluated = []
    with Progress(len(configs), "configurations") as bar:
        for config in configs:
            evaluated.append(evaluate(scenario, config))
            bar.step()
    results = sorted(evaluated, key=_rank)
    if not scenario.traffic.offline:
        # re-check leaders by simulation until the leader is a checked one: at least ``verify``
        # candidates, and up to three times that when checks keep reordering the ranking
        for n in range(3 * scenario.verify):
            top = next((i for i, c in enumerate(results) if c.feasible and not c.verified), None)
            leader_ok = bool(results and results[0].feasible and results[0].verified.get("meets"))
            if top is None or (leader_ok and n >= scenario.verify):
                break
            results[top] = verify(scenario, results[top])
            results.sort(key=_rank)
    return Plan(scenario, tuple(results))
