"""``inferlab.serve``: a workload served by an in-flight-batching engine, request by request."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path
from typing import Any, Literal

import numpy as np

from . import checks
from .calibration.profile import Profile
from .core.memory import plan_memory
from .errors import InfeasibleError, SpecError
from .estimate import deployment
from .inputs.call import typed_call, with_inputs
from .inputs.deployment import Deployment as InputDeployment
from .serving.overheads import ClientOverheads
from .serving.result import ServeResult
from .serving.scheduler import SchedulerConfig
from .serving.prefixes import Prefixes, prefixes
from .serving.simulator import simulate
from .serving.speculation import (
    DrafterMemory,
    SpeculativeDecoding,
    SpeculativeStepModel,
    check_drafter,
    drafter_memory,
    speculative_config,
)
from .serving.scheduler import ENGINE_SCHEDULERS  # noqa: F401 - importable from here as before
from .serving.stepmodel import StepModel
from .inputs.workload import Lengths, Workload
from .specs.hardware import HardwareSpec
from .specs.model import ModelSpec



def serve(model: str | ModelSpec | InputDeployment, hardware: str | HardwareSpec | Workload | None = None, *, tp: int = 1, pp: int = 1, ep: int = 1,
          dp: int = 1,
          attention_dp: bool = False, precision: Any = None, engine: str = "generic",
          profile: str | Path | Profile = "default",
          isl: int | list[int] | Lengths = 1024, osl: int | list[int] | Lengths = 128,
          rate: float | None = None, concurrency: int | None = None, trace: Any = None, offline: bool = False,
          num_requests: int = 1000, seed: int = 0, scheduler: SchedulerConfig | None = None,
          max_num_seqs: int | None = None, max_num_batched_tokens: int | None = None,
          chunked_prefill: bool | None = None, gpu_memory_utilization: float | None = None,
          kv_block_size: int | None = None, overheads: ClientOverheads | None = None,
          stagger: bool = True, disaggregation: Any = None, speculative: Any = None,
          prefix: Prefixes | str | dict | None = None, allow_long_context: bool = False) -> ServeResult:
    """Simulate serving ``num_requests`` requests and return their latency distributions.

    Parameters
    ----------
    model, hardware, tp, pp, ep, dp, attention_dp, precision, engine, profile
        The deployment, as for :func:`inferlab.estimate`; or a
        :class:`~inferlab.inputs.deployment.Deployment` and a traffic
        :class:`~inferlab.inputs.workload.Workload`, which hold every other argument but
        ``overheads`` and ``scheduler`` (``serve(deployment, workload)``).
    isl, osl : int, list of int or Lengths [token]
        Prompt and output lengths: fixed, an empirical list, or a distribution.
    rate, concurrency, trace, offline
        Exactly one: Poisson arrivals per second, closed-loop clients, arrival times, or
        everything queued at once.
    scheduler, max_num_seqs, max_num_batched_tokens, chunked_prefill, ...
        The engine's scheduling limits (defaults per engine, :data:`ENGINE_SCHEDULERS`).
    overheads : ClientOverheads, optional
        Network, tokenizer, client and streaming costs added on top of the GPU side
        (``result.user``, and a line in ``explain()``).
    stagger : bool
        Closed loop: after the opening burst, spread the clients out of step (the steady
        state long benchmarks see) rather than keep them in lockstep (:class:`Workload`).
    disaggregation : Disaggregation or str, optional
        Prefill and decode on separate pools (``"prefill=h200x4,decode=h200x8:tp4"``):
        both pools are simulated (:func:`~inferlab.serving.disaggregated.serve_disaggregated`);
        the pools replace ``hardware`` and the layout arguments.
    speculative : SpeculativeConfig or str, optional
        Speculative decoding, as for :func:`inferlab.estimate` (``"eagle:k=4,accept=0.7"``,
        a preset name): every iteration drafts and verifies ``k + 1`` tokens per decoding
        request, each emitting a drawn number of them; the drafter's weights and KV and
        ``k`` slots per request come out of the KV pool
        (:mod:`~inferlab.serving.speculation`).
    prefix : Prefixes, str or mapping, optional
        Prompts that share a prefix, kept by the engine's prefix cache
        (``"shared:tokens=1000,groups=8"``, ``"sessions:turns=4,think=5"``; see
        :class:`~inferlab.serving.prefixes.Prefixes`); ``result.prefix_hit_rate`` is the
        share of prompt tokens found in the cache.
    allow_long_context : bool
        Accept prompts plus outputs beyond the model's ``max_position_embeddings`` (RoPE
        scaling); refused otherwise.

    Notes
    -----
    ``dp`` replicas each take ``1/dp`` of the requests (and of the rate or clients); the
    simulation runs one and scales the throughput. With ``pp`` pipeline stages a replica
    keeps ``pp`` batches in flight (:class:`~inferlab.serving.stepmodel.StepModel`), each
    with ``1/pp`` of its requests, KV pool and sequence limit, simulated the same way.
    """
    typed = typed_call(serve, "serve", locals())
    if typed is not None:  # serve(Deployment, Workload): the same call, written out
        return with_inputs(serve(**typed), model, hardware)
    if disaggregation is not None:
        return _serve_disaggregated(model, hardware, disaggregation, locals())
    if hardware is None:
        raise SpecError("serve: give the hardware (a catalog id such as h100-sxm), or a disaggregation with its pools")
    # the workload and limits are checked first: a bad count is one line before any model is built
    workload = Workload(isl=isl, osl=osl, num_requests=num_requests, rate=rate, concurrency=concurrency, trace=trace,
                        offline=offline, seed=seed, stagger=stagger)
    overrides = {"max_num_seqs": max_num_seqs, "max_num_batched_tokens": max_num_batched_tokens,
                 "chunked_prefill": chunked_prefill, "gpu_memory_utilization": gpu_memory_utilization,
                 "kv_block_size": kv_block_size}
    sched = engine_scheduler(engine, scheduler, **{k: v for k, v in overrides.items() if v is not None})
    if overheads is not None and not isinstance(overheads, ClientOverheads):
        raise SpecError(f"serve: overheads must be a ClientOverheads, got {overheads!r:.80}")
    dep = deployment(model, hardware, tp=tp, pp=pp, ep=ep, dp=dp, attention_dp=attention_dp, precision=precision,
                     engine=engine, profile=profile)
    shared = prefixes(prefix) if prefix is not None else None
    turns = shared.turns if shared is not None and shared.kind == "sessions" else 1
    checks.context_within_model(dep.model, isl, osl, allow_long_context=allow_long_context, turns=turns)
    result = serve_workload(dep, engine, workload, sched, speculative=speculative, prefix=shared)
    return result if overheads is None else replace(result, overheads=overheads)


def engine_scheduler(engine: Any, scheduler: SchedulerConfig | None = None, **limits: Any) -> SchedulerConfig:
    """The scheduler of ``engine`` (or ``scheduler``) with ``limits`` overriding its fields."""
    if scheduler is not None and not isinstance(scheduler, SchedulerConfig):
        raise SpecError(f"serve: scheduler must be a SchedulerConfig, got {scheduler!r:.80}")
    base = scheduler or (ENGINE_SCHEDULERS.get(engine, SchedulerConfig()) if isinstance(engine, str)
                         else SchedulerConfig())
    return replace(base, **limits)


def _serve_disaggregated(model: Any, hardware: Any, disaggregation: Any, args: dict[str, Any]) -> ServeResult:
    """:func:`serve` with separate prefill and decode pools; the arguments that cannot apply are refused."""
    from .serving.disaggregated import serve_disaggregated

    fixed = {"tp": 1, "pp": 1, "ep": 1, "dp": 1, "attention_dp": False, "concurrency": None, "max_num_seqs": None,
             "max_num_batched_tokens": None, "chunked_prefill": None, "gpu_memory_utilization": None,
             "kv_block_size": None, "speculative": None, "prefix": None}
    given = sorted(k for k, v in fixed.items() if args[k] != v) + (["hardware"] if hardware is not None else [])
    if given:
        why = " (a closed loop is not simulated with separate pools)" if args["concurrency"] is not None else ""
        raise SpecError(f"serve with a disaggregation: the pools set the hardware and layout and a rate, trace or "
                        f"offline load drives them; drop {', '.join(given)}{why}")
    result = serve_disaggregated(model, disaggregation, isl=args["isl"], osl=args["osl"], rate=args["rate"],
                                 trace=args["trace"], offline=args["offline"], num_requests=args["num_requests"],
                                 seed=args["seed"], engine=args["engine"], profile=args["profile"],
                                 precision=args["precision"], scheduler=args["scheduler"])
    return result if args["overheads"] is None else replace(result, overheads=args["overheads"])


def serve_deployment(dep: Any, engine: str, *, isl: Any, osl: Any, rate: float | None = None,
                     concurrency: int | None = None, trace: Any = None, offline: bool = False,
                     num_requests: int = 1000, seed: int = 0, scheduler: SchedulerConfig | None = None,
                     stagger: bool = True, speculative: Any = None, prefix: Any = None,
                     **limits: Any) -> ServeResult:
    """:func:`serve` on a ready :class:`Deployment`; ``limits`` override scheduler fields."""
    sched = engine_scheduler(engine, scheduler, **limits)
    workload = Workload(isl=isl, osl=osl, num_requests=num_requests, rate=rate, concurrency=concurrency,
                        trace=trace, offline=offline, seed=seed,
                        stagger=stagger)
    return serve_workload(dep, engine, workload, sched, speculative=speculative, prefix=prefix)


def scheduler_for(dep: Any, sched: SchedulerConfig) -> SchedulerConfig:
    """The limits of one simulated stream from the engine's per-scheduler limits.

    With attention data parallelism every rank runs its own scheduler over its own
    requests (TensorRT-LLM's ``max_batch_size`` and ``max_num_tokens`` are per rank), so
    the replica holds ``attention_groups`` times the sequences and tokens of one rank.
    With ``pp`` pipeline stages the stream is one of the ``pp`` batches in flight: it holds
    ``1/pp`` of the sequences, and each of its iterations takes up to the token budget.
    """
    ranks, stages = dep.parallel.attention_groups, dep.parallel.pp
    if ranks == 1 and stages == 1:
        return sched
    # pipeline stages: the engine's sequences spread over the pp batches in flight
    return replace(sched, max_num_seqs=max(1, sched.max_num_seqs * ranks // stages),
                   max_num_batched_tokens=sched.max_num_batched_tokens * ranks)


def _replica_workload(workload: Workload, dp: int) -> Workload:
    if dp == 1:
        return workload
    n = max(1, math.ceil(workload.num_requests / dp))
    if workload.trace is not None:
        return replace(workload, trace=tuple(sorted(workload.trace)[::dp]))
    return replace(workload, num_requests=n,
                   rate=workload.rate / dp if workload.rate else None,
                   concurrency=max(1, math.ceil(workload.concurrency / dp)) if workload.concurrency else None)


def kv_capacity_tokens(dep: Any, sched: SchedulerConfig, drafter: DrafterMemory | None = None) -> float:
    """Tokens the replica's KV pool holds: memory left after weights, workspace and reserve
    (and a speculative ``drafter``'s weights; its KV per token added to the target's), sized
    the way the engine sizes it (see :class:`SchedulerConfig`)."""
    plan = plan_memory(dep.model, dep.hardware, dep.precision, parallel=dep.parallel, batch=np.array(1.0),
                       context=np.array(1.0), step_tokens=np.array(float(sched.max_num_batched_tokens)),
                       gpu_memory_utilization=1.0 if sched.kv_fraction_of_free else sched.gpu_memory_utilization,
                       kv_block_size=sched.kv_block_size)
    draft_weights, draft_kv = (drafter.weight_bytes, drafter.kv_bytes_per_token) if drafter else (0.0, 0.0)
    budget = (float(plan.kv_budget) - draft_weights) * (sched.gpu_memory_utilization if sched.kv_fraction_of_free
                                                        else 1.0)
    if budget <= 0:
        raise SpecError(f"{dep.model.id or dep.model.name} leaves no memory for a KV cache on {dep.hardware.id} "
                        f"as {dep.parallel}")
    return budget / (plan.kv_per_token + draft_kv) * dep.parallel.attention_groups


def serve_workload(dep: Any, engine: str, workload: Workload, sched: SchedulerConfig, *,
                   speculative: Any = None, prefix: Any = None) -> ServeResult:
    """Simulate a ready deployment, workload and scheduler (with speculation and prefixes, as :func:`serve`)."""
    streams = dep.parallel.dp * dep.parallel.pp  # replicas x batches in flight per replica
    replica = _replica_workload(workload, streams)
    # the simulated stream stands for ``scale`` of them: all, or for a closed loop the share
    # of the clients it holds (4 clients over 8 streams: 4 streams of one, not 8)
    scale = workload.concurrency / replica.concurrency if workload.concurrency else float(streams)
    limits = scheduler_for(dep, sched)
    shared = prefixes(prefix) if prefix is not None else None
    plan = shared.plan(replica) if shared is not None else None
    arrivals, isl, osl = (plan.arrivals, plan.isl, plan.osl) if plan is not None else replica.draw()
    model: Any = StepModel(dep, limits.max_num_batched_tokens + limits.max_num_seqs, limits.overlap_host)
    spec, decoding, drafter = None, None, None
    if speculative is not None:
        spec, model, decoding, drafter = _speculation(dep, model, speculative, limits, float(np.max(isl + osl)),
                                                      replica.seed)
    turnaround = None
    if replica.concurrency is not None:
        turnaround = replica.turnaround(_request_period_s(model, replica.concurrency, isl, osl))
    try:
        trace = simulate(model, limits, arrivals, isl.astype(float), osl.astype(float),
                         kv_capacity_tokens=kv_capacity_tokens(dep, sched, drafter) / dep.parallel.pp,
                         concurrency=replica.concurrency, turnaround=turnaround, decoding=decoding, prefixes=plan)
    except InfeasibleError as exc:
        if dep.parallel.pp == 1:
            raise
        raise InfeasibleError(f"{exc} (with pp={dep.parallel.pp} each of the {dep.parallel.pp} batches in flight "
                              "holds 1/pp of the replica's KV pool)") from None
    return ServeResult(dep, engine, replica, trace, scale, speculative=spec, prefix=shared)


def _speculation(dep: Any, model: StepModel, speculative: Any, limits: SchedulerConfig, max_context: float,
                 seed: int) -> tuple[Any, SpeculativeStepModel, SpeculativeDecoding, DrafterMemory]:
    """The speculative step model, token draws and drafter memory of ``speculative`` on ``dep``."""
    spec = speculative_config(speculative)
    if dep.parallel.pp > 1:
        raise SpecError("serve: speculative decoding with pipeline stages is not simulated; use pp=1")
    check_drafter(dep, spec)
    wrapped = SpeculativeStepModel(model, spec, limits.max_num_seqs, max_context)
    return spec, wrapped, SpeculativeDecoding(spec, seed), drafter_memory(dep, spec)


def _request_period_s(model: StepModel, clients: int, isl: np.ndarray, osl: np.ndarray) -> float:
    """Expected duration of one closed-loop request [s]: its prompt's prefill alone, then its
    output decoded in a batch of ``clients`` at the mean context."""
    p, o = float(np.mean(isl)), float(np.mean(osl))
    none = np.zeros(0)
    prefill = model.time(decode_context=none, prefill_context=np.zeros(1), prefill_tokens=np.array([p]), logits=1.0)
    step = model.time(decode_context=np.full(clients, p + o / 2.0), prefill_context=none, prefill_tokens=none,
                      logits=float(clients))
    return prefill + o * step


Mode = Literal["offline", "online", "closed_loop"]
