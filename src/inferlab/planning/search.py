"""The fluid search: every configuration of a scenario, sized by the fluid model.

For each candidate (model, GPU, precision, TP, EP, speculation; aggregated or with a
disaggregated decode pool) one vectorized pass over a grid of batch sizes gives the decode
step and prefill times as :func:`inferlab.estimate` computes them; the fluid model
(:mod:`.fluid`) turns them into the request rate a replica sustains at each concurrency and
the latencies there. The largest concurrency that meets the SLOs sets the replica's
capacity, and ``ceil(rate / (target_utilization x capacity))`` replicas seed the
simulated sizing (:mod:`.sizing`).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import replace
from typing import Any

import numpy as np

from ..checks import context_within_model
from ..core.interconnect import node_size
from ..core.parallelism import tp_split_reason
from ..engines.scheduler import default_scheduler, prompt_cap
from ..errors import InferlabError, SpecError
from ..inputs.resolve import resolve_model
from ..memo import IdentityMemo
from ..specs.catalog import load_hardware
from ..techniques.deployed_precision import resolve_precision
from ..techniques.speculative import SpeculativeConfig
from .candidate import Candidate
from .curve import _BATCHES, _capacity_curve, engine_budget
from .fluid import OSL_POINTS, admission_wait_s, tpot_percentile_s
from .ttft_mix import TAIL_EDGES, ttft_percentile_s
from .limits import limits
from .offline_job import offline_job_s, offline_replicas
from .pools_seed import seed_pools
from .prefill_pool import prefill_pool_ttft_s
from .attention_dp import balancing_hold_s
from .replica_points import replica_points
from .scenario import Scenario

#: Mean concurrencies below one the fluid search also tries (a replica idle most of the time).
_LIGHT = np.array([0.02, 0.05, 0.1, 0.2, 0.35, 0.5, 0.7])


def _tp_reason(model: Any, tp: int, hw_id: str, node: int) -> str:
    """Why a tensor-parallel size cannot serve the model in the search, or ``""``."""
    why = tp_split_reason(model, tp)
    if why:
        return why
    if tp > node:
        return f"tp={tp} spans more than the {node} GPUs of one {hw_id} node (tensor parallelism stays in a node)"
    return ""


def candidates(scenario: Scenario) -> list[dict[str, Any]]:
    """Every configuration of the search space, as estimate() keyword sets; one that no layout
    can take carries its ``reason`` (it is ranked as ruled out, not dropped)."""
    out = []
    for name, hw_id in itertools.product(scenario.models, scenario.hardware):
        model, hw = resolve_model(name), load_hardware(hw_id)  # a Hugging Face name is its catalog model
        model_id = model.id or name
        # each candidate names its formats as resolved for the model and GPU: labels say what runs;
        # formats the model cannot take (experts' formats on a dense model) rule its candidates out
        precisions: dict[str, str] = {}
        for p in scenario.search.precisions:
            try:
                precisions.setdefault(str(resolve_precision(p, model, hw).config), "")
            except SpecError as exc:
                precisions.setdefault(str(p), str(exc))
        for prec, spec in itertools.product(precisions, scenario.search.speculative):
            kinds = []  # the replica kinds (tp, ep, attention_dp) that fit, for separate pools
            for tp, pp in itertools.product(scenario.search.tp, scenario.search.pp):
                config = {"model": model_id, "hardware": hw_id, "precision": prec, "tp": tp, "pp": pp, "ep": 1,
                          "attention_dp": False, "speculative": spec, "disaggregated": False}
                reason = precisions[prec] or _tp_reason(model, tp, hw_id, node_size(hw))
                if reason:
                    out.append({**config, "reason": reason, "ruled_by_input": True})
                    continue
                eps = [1] + ([tp] if model.is_moe and scenario.search.expert_parallel and tp > 1
                             and model.moe.num_experts % tp == 0 else [])
                for ep in eps:
                    adps = (False, True) if ep > 1 and scenario.search.attention_dp else (False,)
                    # attention DP: each GPU its own sequences, the experts over all
                    out += [{**config, "ep": ep, "attention_dp": adp} for adp in adps]
                    kinds += [(tp, ep, adp) for adp in adps if pp == 1]
            if scenario.search.disaggregation:
                # separate pools, one pipeline stage each: a decode pool of each kind beside a prefill
                # pool of each kind (a narrow prefill pool beside a wide expert-parallel decode pool)
                for (tp, ep, adp), kind_p in itertools.product(kinds, kinds):
                    out.append({"model": model_id, "hardware": hw_id, "precision": prec, "tp": tp, "pp": 1, "ep": ep,
                                "attention_dp": adp, "speculative": spec, "disaggregated": True,
                                "prefill_kind": None if kind_p == (tp, ep, adp) else kind_p})
    return out


def evaluate(scenario: Scenario, config: dict[str, Any]) -> Candidate:
    """Capacity, seed replicas and cost of one configuration for the scenario (fluid model)."""
    sc, tr = scenario, scenario.traffic
    isl, osl = tr.isl.expected, tr.osl.expected
    base = Candidate(**config, feasible=False, sized_by="fluid model")
    if base.reason:  # ruled out by the layout alone
        return base
    try:
        est = _capacity_curve(sc, config, round(isl), max(round(osl), 2))
    except InferlabError as exc:
        layout = {k: v for k, v in (getattr(exc, "suggestion", None) or {}).items() if k in ("tp", "pp")}
        return replace(base, reason=str(exc), fits_as=layout)
    try:  # the longest request the traffic sends, against the model's positions (the engines' default limit)
        turns = tr.prefix.turns if tr.prefix is not None and tr.prefix.kind == "sessions" else 1  # the last turn's
        context_within_model(est.deployment.model, tr.isl, tr.osl, allow_long_context=sc.allow_long_context,
                             turns=turns)
    except InferlabError as exc:  # the scenario's lengths, not the configuration: no layout or SLO changes it
        return replace(base, reason=str(exc), ruled_by_input=True)
    cap = sequence_limit(sc, est.deployment, config.get("speculative"))
    fits = np.minimum(est.max_sequences, cap)
    ok = _BATCHES <= fits
    if not ok.any():
        return replace(base, reason="not even one request fits next to the weights")
    limit = ("KV memory" if float(np.min(est.max_sequences)) < cap
             else "engine batch limit (max_num_seqs)")
    if config.get("disaggregated"):
        est_p = est
        if config.get("prefill_kind") is not None:  # a prefill pool of another kind: its own curve
            tp_p, ep_p, adp_p = config["prefill_kind"]
            try:
                est_p = _capacity_curve(sc, {**config, "tp": tp_p, "ep": ep_p, "attention_dp": adp_p},
                                        round(isl), max(round(osl), 2))
            except InferlabError as exc:
                return replace(base, reason=f"prefill pool: {exc}")
            if not (np.asarray(est_p.max_sequences) >= 1).any():
                return replace(base, reason="prefill pool: not even one request fits next to the weights")
        cand, sized = seed_pools(sc, config, est, ok, limit, base, est_p)
        if not sized:
            return cand
        return limits(sc, with_replicas(sc, cand, sized.pop("replicas"), seed=True, **sized))
    # loads below one request in flight on average run the decode step of a batch of one: a
    # workload whose prompts dwarf its answers may meet a TPOT objective only there
    first = lambda x: np.concatenate([np.full(_LIGHT.shape, x[0]), x])  # noqa: E731 - batch one's for them
    batches, tpot, fits = with_fit_point(_BATCHES, np.asarray(est.tpot_s, float), np.asarray(fits, float))
    loads, ok, fits, tpot = np.concatenate([_LIGHT, batches]), first(batches <= fits), first(fits), first(tpot)
    # pp stages keep pp batches in flight, each with 1/pp of the requests, its own prompts and
    # slots (as serve() runs them): the fluid model is one of them, the replica pp times its rate
    pp = config.get("pp", 1)
    budget = float(engine_budget(sc.engine, est.deployment.hardware))
    pts, stall, together, share = replica_points(sc, est, loads / pp, tpot, isl, osl, budget)
    rate = pts.rate * pp
    # the percentile of a prompt's own time (its length's prefill) and its wait, mixed
    waits = admission_wait_s(pts, est.prefill_1_s * share, fits / pp, 100.0 * TAIL_EDGES,
                             tr.isl.second_moment_ratio, est.batched_prefill_s, est.overlap,
                             held_s=balancing_hold_s(sc, together, pts.rate, tpot))  # each stream balances its own
    # and the server's work on each request before the engine sees it (the profile's, as serve() adds it)
    ttft_p = ttft_percentile_s(tpot, loads / pp, est.prompt_times_s, est.prompt_lengths, budget, waits,
                               sc.slo.percentile) + est.deployment.profile.request_overhead_s
    lengths = tr.osl.quantiles((np.arange(OSL_POINTS) + 0.5) / OSL_POINTS)
    tpot_p = tpot_percentile_s(pts, stall, tr.isl.second_moment_ratio, lengths, sc.slo.percentile)
    if osl <= 1.0:  # answers of one token: no time per output token to hold to an objective
        tpot_p = np.zeros(loads.shape)
    meets = ok & _within(sc, ttft_p, tpot_p)
    if not meets.any():
        return replace(base, reason=_why_not(sc, float(ttft_p[0]), float(tpot_p[0])))
    j = int(np.flatnonzero(meets)[np.argmax(rate[meets])])
    capacity, gpr, price = float(rate[j]), config["tp"] * pp, price_per_gpu_hour(sc, config["hardware"])
    replicas = max(1, math.ceil(tr.request_rate / (sc.search.target_utilization * capacity)))
    if tr.offline:  # one request's decode bounds the job too (a job small against a batch): the deadline binds
        least, why = offline_replicas(tr, replicas, capacity, loads, pts.tpot_s, float(loads[j]), osl)
        if why:
            return replace(base, reason=why)
        limit, replicas = ("deadline" if least > replicas else limit), least
    curve = {"batch_size": loads[ok], "output_tokens_per_s_per_user": 1.0 / pts.tpot_s[ok],
             "output_tokens_per_s_per_gpu": rate[ok] * osl / gpr,
             "output_tokens_per_usd": _per_usd(rate[ok] * osl * 3600.0, gpr * price), "meets_slo": meets[ok],
             "rate": rate[ok], "ttft_p_s": ttft_p[ok], "tpot_p_s": tpot_p[ok]}
    held = min(float(loads[j]), math.ceil(tr.requests / replicas)) if tr.offline else float(loads[j])  # a job's share
    cand = replace(base, curve=curve, feasible=True, batch=held, replica_rate=capacity,
                   tokens_per_s_per_user=1.0 / float(pts.tpot_s[j]), tokens_per_s_per_gpu=capacity * osl / gpr,
                   binding=_fluid_binding(sc, j, ok, meets, ttft_p, tpot_p, limit))
    return limits(sc, with_replicas(sc, cand, replicas, seed=True))


def with_fit_point(batches: np.ndarray, tpot_s: np.ndarray, fits: np.ndarray
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The batch grid with the most sequences a replica holds (its KV memory or the engine's
    sequence limit, ``fits``) added where that falls between two grid points, its decode step
    interpolated between theirs (log-log: the step is smooth in the batch between CUDA-graph
    sizes). The grid's points are 27% apart: the largest one within the limit had left up to a
    fifth of the sequences a replica holds unused, and a configuration's capacity low by as much
    as the limit fell between points (Qwen3-30B-A3B FP8 on a B200, 1,943 sequences: the fluid
    model had run 1,583, 24% fewer than a simulation keeps in flight)."""
    most = float(np.min(fits))
    edge = math.floor(most)
    if not batches[0] < edge < batches[-1] or edge in batches:
        return batches, tpot_s, fits
    j = int(np.searchsorted(batches, edge))
    step = float(np.exp(np.interp(math.log(edge), np.log(batches[j - 1:j + 1]), np.log(tpot_s[j - 1:j + 1]))))
    return np.insert(batches, j, edge), np.insert(tpot_s, j, step), np.insert(fits, j, most)


def _per_usd(tokens_per_h: np.ndarray, usd_per_h: float) -> np.ndarray:
    """Tokens per dollar; infinite on GPUs priced at zero (your own, already paid for)."""
    return tokens_per_h / usd_per_h if usd_per_h > 0 else np.full(tokens_per_h.shape, np.inf)


def _within(sc: Scenario, ttft_s: np.ndarray, tpot_s: np.ndarray) -> np.ndarray:
    """Where both latencies meet their objectives (an objective not set always holds)."""
    slo = sc.slo
    ttft_ok = ttft_s <= slo.ttft_ms / 1e3 if slo.ttft_ms else np.ones(ttft_s.shape, bool)
    return ttft_ok & (tpot_s <= slo.tpot_ms / 1e3 if slo.tpot_ms else True)


def _why_not(sc: Scenario, ttft_s: float, tpot_s: float) -> str:
    slo, why = sc.slo, []
    if slo.tpot_ms and tpot_s > slo.tpot_ms / 1e3:
        why.append(f"TPOT {tpot_s * 1e3:.1f} ms > {slo.tpot_ms} ms even alone")
    if slo.ttft_ms and ttft_s > slo.ttft_ms / 1e3:
        # the fluid model's percentile at its lightest load (it runs up to ~20% above a simulation there,
        # its prompt lengths' quantiles being bins' upper edges)
        why.append(f"TTFT {ttft_s * 1e3:.0f} ms > {slo.ttft_ms} ms at the lightest load (fluid model)")
    return "; ".join(why) or "no concurrency meets the SLOs"


def _fluid_binding(sc: Scenario, j: int, ok: np.ndarray, meets: np.ndarray, ttft_p: np.ndarray,
                   tpot_p: np.ndarray, limit: str) -> str:
    """What the next concurrency past the chosen one runs into."""
    nxt = j + 1
    if nxt >= len(ok) or not ok[nxt]:
        return limit
    if sc.slo.tpot_ms and tpot_p[nxt] > sc.slo.tpot_ms / 1e3:
        return "TPOT SLO"
    if sc.slo.ttft_ms and ttft_p[nxt] > sc.slo.ttft_ms / 1e3:
        return "TTFT SLO"
    return limit


def with_replicas(sc: Scenario, cand: Candidate, replicas: int, *, seed: bool = False, **changes: Any) -> Candidate:
    """``cand`` at ``replicas`` replicas: GPUs, cost, and the fluid latencies and headroom at
    that load (``seed``: also the fluid model's own count)."""
    tr = sc.traffic
    pd = changes.get("pd", cand.pd)
    gpus = cand.pool_gpus(pd) if cand.disaggregated and pd else replicas * cand.gpus_per_replica
    usd_h = gpus * price_per_gpu_hour(sc, cand.hardware)
    new = dict(replicas=replicas, gpus=gpus, usd_per_hour=usd_h, **changes)  # one replace() of them all
    if cand.disaggregated:  # the pools' output over their GPUs, the seed's pools or the simulation's
        new["tokens_per_s_per_gpu"] = tr.request_rate * tr.osl.expected / gpus
    if tr.offline:  # the job's GPU-hours, whatever the deadline: replicas are let go when it is done
        new["fluid_job_s"] = offline_job_s(tr.requests, replicas, cand.replica_rate, cand.curve, cand.batch, tr.osl.expected)
        job = job_s(sc, replace(cand, **new))
        new["usd_per_million_output"] = usd_h * job / 3600.0 / (tr.requests * tr.osl.expected) * 1e6
    else:
        new["usd_per_million_output"] = usd_h / (tr.request_rate * tr.osl.expected * 3600.0) * 1e6
    if seed:
        new["seed_replicas"] = replicas
    out = replace(cand, **new)
    return replace(out, **fluid_at(sc, out))


def job_s(sc: Scenario, cand: Candidate) -> float:
    """An offline job's duration on ``cand``'s replicas [s]: simulated, else the fluid model's."""
    if not math.isnan(cand.simulated_job_s):
        return cand.simulated_job_s
    return cand.fluid_job_s


def fluid_at(sc: Scenario, cand: Candidate) -> dict[str, float]:
    """The fluid model's SLO-percentile TTFT and TPOT [s] and headroom at ``cand``'s replicas."""
    r, c = sc.traffic.request_rate, cand.curve
    if cand.disaggregated:
        n_p, n_d = cand.pools
        servers = n_p * c.get("servers", 1)  # an attention-DP prefill replica: a server a rank
        u = r / (servers * c["mu_p"])
        ttft = (prefill_pool_ttft_s(c["alone_q"], c["isl_q"], c["mu_p"], u, servers, c["prefill_spread"],
                                    sc.slo.percentile) if u < 1.0 else math.inf)
        tpot = float(np.interp(r / n_d, c["rate_d"], c["tpot_p_s"], right=math.inf))
        growth = min(servers * c["u_p"] * c["mu_p"], n_d * c["rate_d_j"]) / r - 1.0
        return {"fluid_ttft_s": ttft, "fluid_tpot_s": tpot, "headroom": growth,
                "headroom_by": "fluid model"}
    load = r / cand.replicas
    return {"fluid_ttft_s": float(np.interp(load, c["rate"], c["ttft_p_s"], right=math.inf)),
            "fluid_tpot_s": float(np.interp(load, c["rate"], c["tpot_p_s"], right=math.inf)),
            "headroom": (sc.traffic.deadline_h * 3600.0 / cand.fluid_job_s if sc.traffic.offline  # the job's slack
                         else cand.replicas * cand.replica_rate / r) - 1.0, "headroom_by": "fluid model"}


def max_num_seqs(scenario: Scenario) -> int | None:
    """The engine's sequence limit the scenario plans with (None: the engine sizes it for the
    deployment, vLLM by the GPU and SGLang from its KV pool; :func:`sequence_limit` gives it)."""
    from ..engines.scheduler import default_scheduler

    if scenario.search.max_num_seqs is not None:
        return scenario.search.max_num_seqs
    return default_scheduler(scenario.engine).max_num_seqs


def chunked_prefill(scenario: Scenario) -> bool | None:
    """True where the scenario's engine prefills prompts whole and refuses one longer than its
    token budget (TensorRT-LLM, :func:`~inferlab.engines.scheduler.prompt_cap`) and the traffic's
    prompts may reach past it: the plan turns chunked prefill on, and its launch command says so;
    None: the engine's default. A prompt's reach: its lengths' 99.99th percentile, or with
    conversations (a ``sessions`` prefix) the last turn's, every earlier turn and answer held."""
    from ..inputs.prefixes import prefixes

    cap = prompt_cap(default_scheduler(scenario.engine))
    if cap is None:
        return None
    tr, tail = scenario.traffic, np.array([1.0 - 1e-4])
    shared = prefixes(tr.prefix) if tr.prefix is not None else None
    turns = shared.turns if shared is not None and shared.kind == "sessions" else 1
    longest = turns * float(tr.isl.quantiles(tail)[0]) + (turns - 1) * float(tr.osl.quantiles(tail)[0])
    return True if longest > cap else None


def scenario_deployment(scenario: Scenario, cand: Any) -> Any:
    """``cand`` as the :class:`~inferlab.Deployment` the scenario runs: its engine, profile,
    sequence limit, chunked prefill and context allowance."""
    return cand.deployment(scenario.engine, scenario.profile, max_num_seqs(scenario), scenario.allow_long_context,
                           chunked_prefill(scenario))


def sequence_limit(scenario: Scenario, dep: Any, speculative: Any = None) -> int:
    """The sequences one replica of ``dep`` runs at most under the scenario's engine (with
    ``speculative`` decoding, the engine's limit for it: SGLang's 48)."""
    from ..engines.scheduler import default_scheduler, for_hardware
    from ..engines.speculation_limits import for_speculation
    from ..serving.replica import with_running_requests

    given = max_num_seqs(scenario)
    if given is not None:  # the engine's flag: each attention-DP rank's where the engine limits ranks
        return given * _ranks_limited(scenario, dep)
    keyed = speculative is None or isinstance(speculative, str)  # (a spec object: not memoized)
    hit = _LIMITS.get((dep,), (scenario.engine, speculative)) if keyed else None
    if hit is not None:  # the aggregated and disaggregated variants share a deployment
        return hit
    sched = default_scheduler(scenario.engine)
    if speculative is not None:
        spec = SpeculativeConfig.parse(speculative) if isinstance(speculative, str) else speculative
        sched = for_speculation(scenario.engine, sched, spec.method)
    limit = int(with_running_requests(dep, for_hardware(sched, dep.hardware)).max_num_seqs)
    limit *= _ranks_limited(scenario, dep)
    return _LIMITS.put((dep,), (scenario.engine, speculative), limit) if keyed else limit


def _ranks_limited(scenario: Scenario, dep: Any) -> int:
    """Attention-DP ranks that each hold the engine's sequence limit (TensorRT-LLM, vLLM and SGLang
    limit each rank's scheduler: :attr:`~inferlab.engines.scheduler.SchedulerConfig.limits_per_rank`)."""
    return dep.parallel.attention_groups if default_scheduler(scenario.engine).limits_per_rank else 1


#: Sequence limits of recent deployments, by deployment, engine and speculation.
_LIMITS = IdentityMemo(256)


def price_per_gpu_hour(sc: Scenario, hardware: str) -> float:
    """USD per GPU-hour: the scenario's, else the catalog's (NaN when neither has one)."""
    price = sc.prices.get(hardware)
    if price is None:
        hw = load_hardware(hardware)
        price = hw.price.si if hw.price is not None else float("nan")
    return price
