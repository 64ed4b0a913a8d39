"""One replica serving a workload: the engine's scheduler and its limits, the KV pool they
leave, speculation's drafter, and the simulation of the replica's share of the requests
(:func:`inferlab.serve` resolves names and dispatches here)."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import numpy as np

from ..engines.graph_limits import checked_graph_limit, checked_prefill_graphs
from ..engines.scheduler import (ENGINE_SCHEDULERS, SchedulerConfig, for_hardware, STATE_LIMITS, USER_LIMITS,
                                 prompt_cap, unchunked_token_budget)
from ..engines.speculation_limits import for_speculation
from ..engines.sglang_sizing import graph_batch_limit, running_requests as sglang_running_requests
from ..engines.state_pool import overlap_off, page_tokens
from ..engines.window_options import window_limits
from ..errors import InfeasibleError, SpecError, did_you_mean, option_name
from ..inputs.prefixes import prefixes
from ..inputs.workload import Workload
from .kv_pool import (hybrid_sequences, kv_capacity_tokens, require_request_fits, state_slots,  # noqa: F401 - theirs
                      state_tokens, window_slots)
from .result import ServeResult
from .simulator import simulate
from .speculation import (
    DrafterMemory,
    SpeculativeDecoding,
    SpeculativeStepModel,
    check_drafter,
    drafter_memory,
    speculative_config,
)
from .stepmodel import StepModel


#: Engines whose iterations take prompts within the token budget alone (no SGLang-style
#: ``--max-prefill-tokens`` beside it: vLLM's ``max_num_batched_tokens``, TensorRT-LLM's and
#: LMDeploy's ``max_num_tokens``), so a prompt-token limit is refused for them.
PREFILL_BUDGET_ENGINES = ("vllm", "trtllm", "trtllm-pytorch", "lmdeploy")


def engine_scheduler(engine: Any, scheduler: SchedulerConfig | None = None, **limits: Any) -> SchedulerConfig:
    """The scheduler of ``engine`` (or ``scheduler``) with ``limits`` overriding its fields."""
    if scheduler is not None and not isinstance(scheduler, SchedulerConfig):
        raise SpecError(f"serve: scheduler must be a SchedulerConfig, got {scheduler!r:.80}")
    base = scheduler or (ENGINE_SCHEDULERS.get(engine, SchedulerConfig()) if isinstance(engine, str)
                         else SchedulerConfig())
    unknown = sorted(str(k) for k in limits if k not in SchedulerConfig.__dataclass_fields__)
    if unknown:  # (replace() would raise a TypeError)
        raise SpecError(f"scheduler: unknown limit {unknown[0]!r}{did_you_mean(unknown[0], USER_LIMITS)}; the "
                        f"limits an engine sets: {', '.join(USER_LIMITS)}")
    states = sorted(k for k in STATE_LIMITS if limits.get(k) is not None)
    if states and base.state_pool_ratio is None and scheduler is None:
        raise SpecError(f"{', '.join(states)}: a hybrid model's state pool of its own is SGLang's; "
                        f"{engine if isinstance(engine, str) else 'this engine'} keeps the states in its KV pool")
    if limits.get("balance_timeout_iters") and not base.balance_timeout_iters and scheduler is None:
        raise SpecError(f"{option_name('balance_timeout_iters')} {limits['balance_timeout_iters']}: attention-DP "
                        f"balancing is TensorRT-LLM's (attention_dp_config); "
                        f"{engine if isinstance(engine, str) else 'this engine'} admits each rank's prompts as they "
                        "come (0 or none)")
    if limits.get("max_prefill_tokens") is not None and scheduler is None and engine in PREFILL_BUDGET_ENGINES:
        raise SpecError(f"{option_name('max_prefill_tokens')} {limits['max_prefill_tokens']}: a prompt-token limit "
                        f"beside the token budget is SGLang's (--max-prefill-tokens); {engine} has the token budget "
                        f"alone: set {option_name('max_num_batched_tokens')}")
    if limits.get("hybrid_overlap") is not None and limits.get("state_slots") is None:  # the strategy it names
        limits = {**limits, "state_slots": (4 if limits.get("overlap_host") is False else 5) if limits["hybrid_overlap"]
                  else 3}
    sched = replace(base, **window_limits(base, limits, engine, custom=scheduler is not None))
    if sched.context_budget and sched.chunked_prefill is False and "max_num_batched_tokens" not in limits \
            and scheduler is None:
        sched = replace(sched, max_num_batched_tokens=None)  # sized from the context: unchunked_budget
    return sched


def unchunked_budget(dep: Any, sched: SchedulerConfig) -> SchedulerConfig:
    """``sched`` with the token budget of a scheduler whose budget holds the longest context
    without chunked prefill (vLLM's; :func:`~inferlab.engines.scheduler.unchunked_token_budget`,
    the model's positions standing for an unset ``max_model_len``); other limits as they are.
    Such a scheduler (vLLM's ``SchedulerConfig``) also refuses a budget below ``max_num_seqs``:
    every running sequence takes a token of it each step. The budget compared is the one it
    runs: as set, or its default for the GPU (a set ``max_num_seqs`` of 4,096 is refused on an
    L40S, whose default budget is 2,048)."""
    context = int(sched.max_model_len or dep.model.max_position_embeddings)
    budget = unchunked_token_budget(sched, context, sched.max_num_batched_tokens)
    seqs = sched.max_num_seqs  # as set (unset, vLLM takes the smaller of its default and the budget)
    # the budget it runs: as set, else its default for the GPU (for_hardware)
    runs = budget if budget is not None or not sched.context_budget else \
        for_hardware(sched, dep.hardware).max_num_batched_tokens
    if sched.context_budget and runs is not None and seqs is not None and runs < seqs:
        said = "" if budget is not None else ", its default on this GPU"
        raise SpecError(f"max_num_batched_tokens ({runs:,}{said}) is below max_num_seqs ({seqs:,}): vLLM refuses to "
                        "start with it (each running sequence needs a token of the budget every step); raise the "
                        "budget or lower the sequences")
    return sched if budget == sched.max_num_batched_tokens else replace(sched, max_num_batched_tokens=budget)


def serve_deployment(dep: Any, engine: str, *, isl: Any, osl: Any, rate: float | None = None,
                     concurrency: int | None = None, trace: Any = None, offline: bool = False,
                     max_concurrency: int | None = None, num_requests: int = 1000, seed: int = 0, scheduler: SchedulerConfig | None = None,
                     stagger: bool = True, speculative: Any = None, prefix: Any = None,
                     allow_long_context: bool = False, **limits: Any) -> ServeResult:
    """:func:`serve` on a ready :class:`ResolvedDeployment`; ``limits`` override scheduler fields."""
    sched = engine_scheduler(engine, scheduler, **limits)
    workload = Workload(isl=isl, osl=osl, num_requests=num_requests, rate=rate, concurrency=concurrency,
                        trace=trace, offline=offline, max_concurrency=max_concurrency, seed=seed,
                        stagger=stagger)
    return serve_workload(dep, engine, workload, sched, speculative=speculative, prefix=prefix,
                          allow_long_context=allow_long_context)


def scheduler_for(dep: Any, sched: SchedulerConfig) -> SchedulerConfig:
    """The limits of one simulated stream from the engine's per-scheduler limits.

    With attention data parallelism every rank runs its own scheduler over its own
    requests: where the limits are a rank's (``limits_per_rank``: TensorRT-LLM's
    ``max_batch_size`` and ``max_num_tokens``), the replica holds ``attention_groups`` times
    the sequences and tokens of one rank; where they are the replica's (SGLang divides them
    over its ranks), it holds them once. A hybrid model's states in a pool of their own cap
    the running requests (:func:`state_slots`). With ``pp`` pipeline stages the stream is one of the
    ``pp`` batches in flight: it holds ``1/pp`` of the sequences, and each of its iterations
    takes up to the token budget.
    """
    sched = with_running_requests(dep, for_hardware(sched, dep.hardware))
    for slots in (state_slots(dep, sched), window_slots(dep, sched)):
        if slots is not None:  # a pool of states (or of windowed layers) holds no more running requests than this
            per = slots // (dep.parallel.attention_groups if sched.limits_per_rank else 1)
            sched = replace(sched, max_num_seqs=max(1, min(sched.max_num_seqs, per)))  # type: ignore[type-var]
    if overlap_off(dep.model, sched):
        sched = replace(sched, overlap_host=False)
    sched = replace(sched, kv_block_size=page_tokens(dep, sched, sched.kv_block_size))
    if sched.graph_max_batch is None:  # sized by the engine for the GPU and the TP size
        sched = replace(sched, graph_max_batch=graph_batch_limit(dep.hardware.usable_memory_capacity.si,
                                                                 dep.parallel.tp))
    ranks, stages = dep.parallel.attention_groups, dep.parallel.pp
    if ranks == 1 and stages == 1:
        return sched
    scale = ranks if sched.limits_per_rank else 1
    # pipeline stages: the engine's sequences spread over the pp batches in flight
    soft = sched.max_prefill_tokens  # each rank's in SGLang (its scheduler reads it undivided)
    return replace(sched, max_num_seqs=max(1, sched.max_num_seqs * scale // stages),
                   max_num_batched_tokens=sched.max_num_batched_tokens * scale,
                   max_prefill_tokens=None if soft is None else soft * ranks)


def replica_limits(dep: Any, engine: str, sched: SchedulerConfig) -> SchedulerConfig:
    """:func:`scheduler_for` of ``engine``'s limits, refusing a CUDA-graph limit (decode or
    piecewise prefill) its profile cannot price (no measured eager host rate)."""
    checked_graph_limit(sched.graph_max_batch, dep.profile, engine)
    checked_prefill_graphs(sched.prefill_graph_tokens, dep.profile, engine, option_name("prefill_graph_tokens"))
    return scheduler_for(dep, sched)


def check_lengths(sched: SchedulerConfig, isl: np.ndarray, osl: np.ndarray, ranks: int = 1) -> None:
    """Refuse requests longer (prompt plus output) than the engine's ``max_model_len``, and
    prompts longer than a token budget that takes none longer (:func:`prompt_cap`, a rank's of
    ``ranks``), as it does."""
    longest = float(np.max(isl + osl)) if len(isl) else 0.0
    if sched.max_model_len is not None and longest > sched.max_model_len:
        raise SpecError(f"requests of up to {longest:,.0f} tokens (prompt plus output) are longer than "
                        f"max_model_len={sched.max_model_len:,}: the engine refuses them; raise it or shorten them")
    cap, prompt = prompt_cap(sched, ranks), float(np.max(isl)) if len(isl) else 0.0
    if cap is not None and prompt > cap:
        raise SpecError(f"prompts of up to {prompt:,.0f} tokens are longer than the token budget "
                        f"(max_num_batched_tokens={cap:,}, TensorRT-LLM's max_num_tokens) without chunked prefill: "
                        f"no iteration can take them whole (TensorRT-LLM refuses them); turn chunked prefill on (chunked_prefill=True, --chunked-prefill; "
                        f"enable_chunked_prefill: true) or raise the budget to at least {prompt:,.0f}")


def check_context(model: Any, sched: SchedulerConfig, isl: np.ndarray, osl: np.ndarray, *,
                  allow_long_context: bool = False, ranks: int = 1) -> None:
    """Refuse what no engine of ``sched`` would serve: requests longer than the model's trained
    positions or than ``max_model_len``, and a ``max_model_len`` beyond the positions, unless
    ``allow_long_context`` (RoPE scaling) lifts the model's bound; prompts beyond an unchunked
    budget that takes none longer (``ranks``: the attention-DP ranks whose budgets ``sched`` holds)."""
    from ..checks import context_within_model, engine_context_within_model

    if len(isl):
        context_within_model(model, isl, osl, allow_long_context=allow_long_context)
    engine_context_within_model(model, sched.max_model_len, allow_long_context=allow_long_context)
    check_lengths(sched, isl, osl, ranks)


def with_running_requests(dep: Any, sched: SchedulerConfig) -> SchedulerConfig:
    """``sched`` with the running requests the engine sizes from its KV pool where it leaves
    them to the engine (``max_num_seqs`` None: SGLang's :func:`~inferlab.engines.sglang_sizing.running_requests`
    for each attention-DP rank's pool, the replica holding every rank's)."""
    if sched.max_num_seqs is not None:
        return sched
    ranks = dep.parallel.attention_groups
    per_rank = kv_capacity_tokens(dep, sched) / ranks
    context = sched.max_model_len or dep.model.max_position_embeddings
    return replace(sched, max_num_seqs=sglang_running_requests(per_rank, context) * ranks)


def _replica_workload(workload: Workload, dp: int) -> Workload:
    if dp == 1:
        return workload
    if workload.max_concurrency:
        return _capped_share(workload, dp)
    # a closed loop of fewer clients than streams runs one client on each of that many streams
    streams = min(dp, workload.concurrency) if workload.concurrency else dp
    n = max(1, math.ceil(workload.num_requests / streams))
    if workload.trace is not None:
        mine = tuple(sorted(workload.trace)[::dp])
        return replace(workload, trace=mine, num_requests=len(mine))
    return replace(workload, num_requests=n,
                   rate=workload.rate / dp if workload.rate else None,
                   concurrency=max(1, math.ceil(workload.concurrency / dp)) if workload.concurrency else None)


def _capped_share(workload: Workload, dp: int) -> Workload:
    """One stream's share of a rate or trace capped at ``C`` requests in flight over ``dp``
    streams: the cap spreads over the ``s = min(dp, C)`` streams that can hold a request, each
    holding ``c = ceil(C / s)``, and the stream takes ``c / C`` of the requests (of the rate, or
    every trace arrival whose running count of ``c / C`` steps up), so that it stands for
    ``C / c`` streams (:func:`serve_workload`): ``C`` in flight and the whole rate in all. One in
    flight over two replicas is one replica serving every request in turn, not two."""
    total = int(workload.max_concurrency)  # type: ignore[arg-type]
    cap = -(-total // min(dp, total))
    if workload.trace is not None:
        ordered = sorted(workload.trace)  # arrival i is this stream's when ceil((i + 1) c / C) > ceil(i c / C)
        mine = [t for i, t in enumerate(ordered) if -(-(i + 1) * cap // total) > -(-i * cap // total)]
        return replace(workload, trace=tuple(mine), num_requests=len(mine), max_concurrency=cap)
    return replace(workload, num_requests=max(1, -(-workload.num_requests * cap // total)), max_concurrency=cap,
                   rate=workload.rate * cap / total)


def serve_workload(dep: Any, engine: str, workload: Workload, sched: SchedulerConfig, *,
                   speculative: Any = None, prefix: Any = None, allow_long_context: bool = False,
                   prompt_gpu_s: float = 0.0) -> ServeResult:
    """Simulate a ready deployment, workload and scheduler (with speculation and prefixes, as :func:`serve`).
    The drawn requests are checked as the engine checks them: one longer than it takes (its
    ``max_model_len``, or the model's positions unless ``allow_long_context``) is refused
    request by request (:func:`within_context`), a run whose every request is is refused
    whole (:func:`check_context`). ``prompt_gpu_s``: GPU work each prompt brings beside its
    tokens, in the iteration that starts its prefill (:class:`~.stepmodel.StepModel`'s notes)."""
    streams = dep.parallel.dp * dep.parallel.pp  # replicas x batches in flight per replica
    replica = _replica_workload(workload, streams)
    # the simulated stream stands for ``scale`` of them: all, or for a closed loop the share
    # of the clients it holds (4 clients over 8 streams: 4 streams of one, not 8), for a capped
    # rate the share of the cap (:func:`_capped_share`)
    if workload.concurrency:
        scale = workload.concurrency / replica.concurrency
    elif workload.max_concurrency:
        scale = workload.max_concurrency / replica.max_concurrency
    else:
        scale = float(streams)
    if speculative is not None:  # an engine may run speculation with other limits (SGLang: 48 requests)
        sched = for_speculation(engine, sched, speculative_config(speculative).method)
    sched = unchunked_budget(dep, sched)
    limits = replica_limits(dep, engine, sched)
    shared = prefixes(prefix) if prefix is not None else None
    if shared is not None and shared.kind == "sessions" and workload.max_concurrency is not None:
        raise SpecError("serve: a conversation's turns follow each other, not a rate: max_concurrency caps a rate or "
                        "a trace without sessions; drop one of them")
    plan = shared.plan(replica) if shared is not None else None
    arrivals, isl, osl = (plan.arrivals, plan.isl, plan.osl) if plan is not None else replica.draw()
    refused, ranks = 0, dep.parallel.attention_groups
    if plan is None:  # drawn lengths: the engine answers a request longer than it takes with an error
        arrivals, isl, osl, refused = within_context(dep.model, limits, replica, arrivals, isl, osl, allow_long_context,
                                                      ranks)
    else:  # a prefix plan's too: a conversation ends at a refused turn, its later turns not sent
        keep = taken(dep.model, limits, isl, osl, allow_long_context, ranks)
        refused = refused_alone(keep)
        if refused:
            plan = plan.without(~keep)
            if replica.concurrency is not None:  # a closed loop's clients start together whatever was refused
                plan = replace(plan, arrivals=replica.client_starts(len(plan.isl)))
            arrivals, isl, osl = plan.arrivals, plan.isl, plan.osl
    check_context(dep.model, limits, isl, osl, allow_long_context=allow_long_context, ranks=ranks)
    model: Any = StepModel(dep, limits.max_num_batched_tokens + limits.max_num_seqs, limits.overlap_host,
                           limits.graph_max_batch, limits.prefill_graph_tokens)
    model.prompt_gpu_s = prompt_gpu_s  # (a request's images through the vision encoder: StepModel's notes)
    spec, decoding, drafter = None, None, None
    if speculative is not None:
        spec, model, decoding, drafter = _speculation(dep, model, speculative, limits, float(np.max(isl + osl)),
                                                      replica.seed)
    turnaround = None
    if replica.concurrency is not None:
        turnaround = replica.turnaround(_request_period_s(model, replica.concurrency, isl, osl))
    length = float(np.mean(isl + osl)) if len(isl) else None
    if len(isl):  # the longest request beside the weights: refused with the layout that holds it, as estimate says
        longest = int(np.argmax(isl + osl))
        require_request_fits(dep, sched, float(isl[longest]), float(osl[longest]), drafter)
    try:
        trace = simulate(model, limits, arrivals, isl.astype(float), osl.astype(float),
                         kv_capacity_tokens=kv_capacity_tokens(dep, sched, drafter, length) / dep.parallel.pp,
                         state_tokens=state_tokens(dep, sched, drafter, length),
                         concurrency=replica.concurrency, turnaround=turnaround,
                         max_in_flight=replica.max_concurrency, decoding=decoding, prefixes=plan)
    except InfeasibleError as exc:
        if dep.parallel.pp == 1:
            raise
        raise InfeasibleError(f"{exc} (with pp={dep.parallel.pp} each of the {dep.parallel.pp} batches in flight "
                              "holds 1/pp of the replica's KV pool)") from None
    asked = len(workload.trace) if workload.trace is not None else workload.num_requests
    return ServeResult(dep, engine, replica, trace, scale, speculative=spec, prefix=shared, refused=refused, asked=asked,
                       limits=limits)


def taken(model: Any, limits: SchedulerConfig, isl: np.ndarray, osl: np.ndarray, allow_long_context: bool,
          ranks: int) -> np.ndarray:
    """Which requests the engine takes: prompt plus output within the tighter of its
    ``max_model_len`` and the model's positions (unless ``allow_long_context``), and the prompt
    within a rank's budget where it refuses longer ones unchunked (:func:`prompt_cap`)."""
    bounds = [b for b in (limits.max_model_len,
                          None if allow_long_context else getattr(model, "max_position_embeddings", None)) if b]
    limit, cap = min(bounds) if bounds else np.inf, prompt_cap(limits, ranks)
    return (np.asarray(isl) + np.asarray(osl) <= limit) & (np.asarray(isl) <= (np.inf if cap is None else cap))


def refused_alone(keep: np.ndarray) -> int:
    """How many requests an engine refuses one by one, given which it takes: none where it takes
    every one, or none of them (:func:`check_context` then refuses the run whole)."""
    refused = int(len(keep) - np.count_nonzero(keep))
    return refused if refused < len(keep) else 0


def within_context(model: Any, limits: SchedulerConfig, replica: Workload, arrivals: np.ndarray, isl: np.ndarray,
                    osl: np.ndarray, allow_long_context: bool,
                    ranks: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """The drawn requests the engine takes (prompt plus output within ``max_model_len``, or the
    model's positions unless ``allow_long_context``; the prompt within a rank's budget where the
    engine refuses longer ones unchunked, :func:`prompt_cap`) and how many it refuses. A length
    distribution's tail past the limit is refused request by request, as engines answer such a
    request with an error and serve the others; when every request is too long,
    :func:`check_context` refuses the run."""
    keep = taken(model, limits, isl, osl, allow_long_context, ranks)
    refused = refused_alone(keep)
    if not refused:
        return arrivals, isl, osl, 0
    arrivals, isl, osl = arrivals[keep], isl[keep], osl[keep]
    if replica.concurrency is not None:  # a closed loop: its clients start together and send on as they finish
        arrivals = replica.client_starts(len(isl))
    return arrivals, isl, osl, refused


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
