"""``inferlab.estimate``: latency, throughput, memory and cost of one deployment.

Inputs that are arrays (batch size, ISL, OSL) broadcast: one call evaluates a grid.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any, Literal

import numpy as np

from .. import checks
from ..calibration.profile import Profile
from ..core.cost import cost_of
from ..core.memory import plan_memory
from ..engines.memory_share import memory_keywords, prefill_chunks
from ..engines.graph_limits import checked_graph_limit, checked_prefill_graphs, decode_graph_limit
from ..engines.scheduler import MAX_SEQS, default_scheduler, token_budget
from ..engines.state_pool import page_tokens, state_pool_limits
from ..engines.window_options import check_model_windows, window_scheduler
from ..errors import SpecError, option_name
from ..inputs import resolve as inputs
from ..inputs.call import typed_call, with_inputs
from ..inputs.deployment import Deployment
from ..inputs.resolve import ENGINES, deployment  # noqa: F401 - ENGINES importable from here as before
from ..inputs.workload import Workload
from ..specs.hardware import HardwareSpec
from ..specs.model import ModelSpec
from ..techniques.disaggregation import Disaggregation
from ..techniques.prefix_cache import PrefixCache, effective_cached_tokens, prefill_with_cache
from ..techniques.speculative import SpeculativeConfig, drafter_prefill_s, mean_speculative_tpot_s
from ..techniques.speculative_memory import check_drafter, drafter_memory
from ..techniques.prefill_graphs import chunked_prefill_s, graphed_prefill, prefill_graphed
from ..techniques.step import ResolvedDeployment, StepResult, graph_limited_decode_s, mean_decode_step_s
from .feasibility import context_reasons, model_len_reasons, prefix_reasons, require_feasible, static_batch_reasons
from .result import Estimate


def estimate(model: str | ModelSpec | Deployment, hardware: str | HardwareSpec | Workload | None = None, *,
             num_gpus: int | None = None, tp: int = 1,
             pp: int = 1, ep: int = 1, dp: int = 1, attention_dp: bool = False, expert_imbalance: float = 1.0,
             micro_batches: int | None = None, attention_tp: int = 1,
             precision: Any = None, isl: Any = 1024, osl: Any = 128, batch_size: Any = 1,
             engine: str = "generic", profile: str | Path | Profile = "default",
             attention: Literal["flash", "naive"] = "flash", cuda_graphs: bool = True,
             gpu_memory_utilization: float | None = None, kv_block_size: int = 16, max_num_tokens: int | None = None,
             graph_max_batch: int | None = None, max_num_seqs: int | None = None, max_model_len: int | None = None,
             prefill_graph_tokens: int | None = None, window_kv: Any = None, window_pool_ratio: float | None = None,
             price_per_gpu_hour: float | None = None, utilization: float = 1.0,
             waves: bool = False, speculative: SpeculativeConfig | str | None = None,
             prefix_cache: PrefixCache | str | float | None = None,
             disaggregation: Disaggregation | str | None = None, prefill_batch: Any = None,
             allow_long_context: bool = False) -> Estimate:
    """Predict a static batch: ``batch_size`` requests of ``isl`` prompt and ``osl`` output tokens.

    Parameters
    ----------
    model, hardware : str or spec
        Catalog ids (or a config.json path for the model) or loaded specs; or a
        :class:`~inferlab.inputs.deployment.Deployment` and a static-batch
        :class:`~inferlab.inputs.workload.Workload` (``batch_size`` set), which hold every
        other argument (``estimate(deployment, workload)``).
    num_gpus : int, optional
        GPUs of the deployment; must equal ``tp x pp x dp`` (a check on the layout).
    tp, pp, ep, dp : int
        Tensor-parallel GPUs per pipeline stage, pipeline stages, expert-parallel groups
        within a stage (``ep`` divides ``tp``), and replicas.
    attention_dp : bool
        Attention data-parallel over a stage's GPUs, experts over expert parallelism.
    attention_tp : int
        With ``attention_dp``, the GPUs each attention rank splits its heads over (default 1;
        SGLang's ``--tp 8 --dp 4 --enable-dp-attention`` is ``tp=8, attention_tp=2``; vLLM's
        ``-tp 2 -dp 4`` with expert parallelism, ``tp=2, dp=4, ep=8``, becomes the same).
    expert_imbalance : float
        Load of the busiest expert group over the mean (1: balanced).
    micro_batches : int, optional
        Pipeline micro-batches (default ``pp``).
    precision : None, str or mapping
        None (default): the formats of the model's shipped checkpoint per tensor kind
        (gpt-oss: MXFP4 experts, BF16 elsewhere); a format name (``"fp8"``, ``"int4"``);
        text or a mapping of the kinds it sets (``"fp8 kv:bf16"``, ``{"weights": "fp8",
        "activations": "fp8", "kv_cache": "bf16"}``; kinds left out are the checkpoint's);
        see :mod:`inferlab.techniques.deployed_precision`.
    isl, osl, batch_size : int or array [token, token, request]
        Broadcast together into a grid; ``batch_size`` counts all requests (split over replicas).
    engine : str
        Selects the calibrated efficiencies (``generic`` is the datasheet-only fallback).
    profile : str or path
        ``"default"`` (shipped calibration), ``"roofline"`` (speed of light) or a profile YAML.
    attention : {"flash", "naive"}
        ``naive`` writes and reads the score matrix.
    gpu_memory_utilization : float, optional
        The engine's memory share, as the engine reads it (:mod:`inferlab.engines.memory_share`:
        vLLM's of all memory, TensorRT-LLM's and LMDeploy's of what the weights leave, SGLang's
        for weights and KV cache). Default: the engine's (vLLM 0.92, TensorRT-LLM 0.9, LMDeploy
        0.8, SGLang sized by the GPU and the launch, the generic engine 0.9).
    max_num_tokens : int, optional [token]
        Tokens per iteration: prompts are prefilled in chunks of it, and the activation
        workspace is sized for it. Default: the engine's on this GPU (8,192 for TensorRT-LLM;
        vLLM 8,192 on a GPU of 70 GiB or more that is not an A100, else 2,048; SGLang sizes its
        chunk by the GPU's memory), as :func:`inferlab.serve` runs.
    max_num_seqs : int, optional [request]
        Sequences the engine runs at once (vLLM's ``--max-num-seqs``, SGLang's
        ``--max-running-requests``, TensorRT-LLM's ``max_batch_size``): a larger batch runs in
        waves of it, as the engine admits it. Default: the batch runs together (a static-batch
        benchmark sets the limit to the batch), in waves only where its KV cache does not fit.
    graph_max_batch : int, optional [request]
        Largest decode batch (on one attention-DP rank, per pipeline micro-batch) run from a CUDA
        graph; larger ones run eagerly where the engine's eager rate is known (SGLang's
        ``--cuda-graph-max-bs``, 0 for ``--disable-cuda-graph``). Default: the engine's on this
        GPU and TP (SGLang's by GPU memory and TP; every batch elsewhere).
    max_model_len : int, optional [token]
        The engine's longest request (vLLM's ``--max-model-len``, SGLang's ``--context-length``,
        TensorRT-LLM's ``max_seq_len``): a point whose prompt plus output exceeds it does not run,
        as the engine refuses such a request. Default: the model's positions bound it.
    prefill_graph_tokens : int, optional [token]
        Prefill iterations (chunks) of at most this many tokens run in piecewise CUDA graphs,
        without the host's eager floor; longer ones eagerly (SGLang's
        ``--piecewise-cuda-graph-max-tokens``, TensorRT-LLM's ``capture_num_tokens``). Default:
        eagerly where the engine graphs decode only; refused where its profile has no eager rate.
    window_kv, window_pool_ratio : optional
        Where the engine keeps a windowed-attention model's KV, as :func:`inferlab.serve` takes
        them (:mod:`~inferlab.engines.window_options`): the windowed kinds it frees beyond their
        window (empty: every layer keeps every token), and SGLang's windowed layers' pool of
        their own (``--swa-full-tokens-ratio``). Default: the engine's.
    waves : bool
        When the batch's KV cache does not fit, run it in waves as engines do, instead of
        marking the point infeasible.
    speculative : SpeculativeConfig or str, optional
        Speculative decoding, e.g. ``"eagle:k=4,accept=0.7"`` or a preset name (see
        :mod:`inferlab.techniques.speculative`); output quality is unchanged.
    prefix_cache : PrefixCache, str or float, optional
        A cached prompt prefix: a hit rate (``0.5``) or ``"tokens=1500"``.
    disaggregation : Disaggregation or str, optional
        Separate prefill and decode pools, e.g. ``"prefill=h200x4,decode=h200x8"``; the
        result is then a :class:`~inferlab.phases.disaggregated.DisaggEstimate` (``batch_size`` is
        the decode batch, ``prefill_batch`` the prefill one; only with a disaggregation).
    allow_long_context : bool
        Accept ``isl + osl`` beyond the model's ``max_position_embeddings``, as a deployment
        with RoPE scaling does; ``explain()`` then says so. Refused otherwise.

    Returns
    -------
    Estimate
        TTFT, TPOT, throughput, memory, cost, per-op tables and ``explain()``. In a grid,
        points that cannot run are marked (``feasible`` false, ``reason``) and their times
        and costs are NaN in the arrays, null in ``to_dict()``, missing (``<NA>``) in
        ``to_frame()`` and ``-`` in the text table.

    Raises
    ------
    SpecError
        Bad input: a wrong type, a value out of range, a meaningless combination.
    InfeasibleError
        Nothing to show: a single point that does not run, or a grid none of whose points
        runs; with the bytes needed and available per GPU and what would fit.
    """
    typed = typed_call(estimate, "estimate", locals())
    if typed is not None:  # estimate(Deployment, Workload): the same call, written out
        return with_inputs(estimate(**typed), model, hardware)
    cache = _prefix_cache(prefix_cache)
    if disaggregation is not None:
        return _disaggregated(model, hardware, disaggregation, locals())
    if prefill_batch is not None:
        raise SpecError(f"{option_name('prefill_batch')}={prefill_batch!r:.40} applies only to a disaggregated deployment (the prefill "
                        f"pool's batch); an aggregated static batch prefills its {option_name('batch_size')} together: "
                        f"drop it, or give {option_name('disaggregation')}")
    if hardware is None:
        raise SpecError("estimate: give the hardware (a catalog id such as h100-sxm), or a disaggregation with its "
                        "pools; with a Deployment, give the Workload second")
    spec = _speculative(speculative)
    dep = deployment(model, hardware, tp=tp, precision=precision, engine=engine, profile=profile,
                     attention=attention, cuda_graphs=cuda_graphs, pp=pp, ep=ep, dp=dp, attention_dp=attention_dp,
                     expert_imbalance=expert_imbalance, micro_batches=micro_batches, attention_tp=attention_tp)
    if num_gpus is not None and checks.integer(option_name("num_gpus"), num_gpus, maximum=inputs.MAX_GPUS_PER_AXIS,
                                               what="GPUs", whole_floats=True) != dep.num_gpus:
        raise SpecError(f"num_gpus={num_gpus} but the layout {dep.parallel} uses tp x pp x dp = {dep.num_gpus} GPUs")
    memory = inputs.memory_options(gpu_memory_utilization, kv_block_size, max_num_tokens)
    if memory["max_num_tokens"] is None:
        memory["max_num_tokens"] = token_budget(engine, dep.hardware)
    use = checks.fraction(option_name("utilization"), utilization)
    price = inputs.unit_price(price_per_gpu_hour, dep.hardware)
    b, i, o = inputs.workload(batch_size, isl, osl)
    split = dep.parallel.micro_batches
    if split is not None and split > float(np.max(b)):
        raise SpecError(f"{option_name('micro_batches')} {split}: above the largest batch ({float(np.max(b)):,.0f}); "
                        "each micro-batch holds at least one sequence")
    total, limit = np.asarray(i, float) + np.asarray(o, float), int(dep.model.max_position_embeddings or 0)
    if allow_long_context or not limit or float(np.min(total)) > limit:  # every point beyond: one line
        long_context = checks.context_within_model(dep.model, i, o, allow_long_context=allow_long_context)
    else:  # some points beyond the trained length: those are marked, the grid keeps the rest
        long_context = False
    graphs = checked_graph_limit(graph_max_batch, dep.profile, engine, option_name("graph_max_batch"))
    pieces = checked_prefill_graphs(prefill_graph_tokens, dep.profile, engine, option_name("prefill_graph_tokens"))
    seqs = None if max_num_seqs is None else checks.integer(
        option_name("max_num_seqs"), max_num_seqs, maximum=MAX_SEQS, what="requests", whole_floats=True)
    if max_model_len is not None:
        checks.integer(option_name("max_model_len"), max_model_len, what="tokens", whole_floats=True)
        checks.engine_context_within_model(dep.model, max_model_len, allow_long_context=bool(allow_long_context))
    windows = window_scheduler(engine, window_kv, window_pool_ratio)
    check_model_windows(dep.model, window_kv, window_pool_ratio, engine)
    est = static_batch(dep, engine, b, i, o, **memory, price_per_gpu_hour=price, utilization=use,
                       waves=checks.boolean(option_name("waves"), waves), speculative=spec, prefix_cache=cache,
                       graph_max_batch=graphs, max_num_seqs=seqs, allow_long_context=bool(allow_long_context),
                       prefill_graph_tokens=pieces, scheduler=windows if max_model_len is None else
                       replace(windows or default_scheduler(engine), max_model_len=int(max_model_len)))
    require_feasible(est)
    return replace(est, long_context=long_context) if long_context else est


#: Arguments of :func:`estimate` that only an aggregated deployment uses, with their defaults.
_AGGREGATED_ONLY = {"num_gpus": None, "tp": 1, "pp": 1, "ep": 1, "dp": 1, "attention_dp": False, "attention_tp": 1,
                    "expert_imbalance": 1.0, "micro_batches": None, "attention": "flash", "cuda_graphs": True,
                    "utilization": 1.0, "waves": False, "speculative": None,
                    "max_num_seqs": None}


def _disaggregated(model: Any, hardware: Any, disaggregation: Any, args: dict[str, Any]) -> Any:
    """:func:`estimate` with separate pools; refuses the arguments the pools would ignore."""
    from .disaggregated import estimate_disaggregated

    if not isinstance(disaggregation, (Disaggregation, str)):
        raise SpecError(f"disaggregation must be a text like 'prefill=h200x4,decode=h200x8' or a Disaggregation, "
                        f"got {disaggregation!r:.60}")
    d = disaggregation if isinstance(disaggregation, Disaggregation) else Disaggregation.parse(disaggregation)
    ignored = {k: not checks.is_default(args[k], v) for k, v in _AGGREGATED_ONLY.items()}
    inputs.refuse_with_disaggregation(hardware, (d.prefill.hardware_id, d.decode.hardware_id), ignored)
    memory = inputs.memory_options(args["gpu_memory_utilization"], args["kv_block_size"], args["max_num_tokens"])
    prefill_batch = 1 if args["prefill_batch"] is None else args["prefill_batch"]
    return estimate_disaggregated(model, d, isl=args["isl"], osl=args["osl"], prefill_batch=prefill_batch,
                                  decode_batch=args["batch_size"], engine=args["engine"], profile=args["profile"],
                                  prefix_cache=args["cache"], precision=args["precision"],
                                  allow_long_context=args["allow_long_context"],
                                  graph_max_batch=args["graph_max_batch"], window_kv=args["window_kv"],
                                  prefill_graph_tokens=args["prefill_graph_tokens"],
                                  window_pool_ratio=args["window_pool_ratio"], max_model_len=args["max_model_len"],
                                  price_per_gpu_hour=args["price_per_gpu_hour"], **memory)


def _speculative(value: Any) -> SpeculativeConfig | None:
    return None if value is None else SpeculativeConfig.of(value)


_prefix_cache = PrefixCache.optional


def _in_waves(replica: np.ndarray, limit: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``replica`` requests run ``limit`` at a time, as an engine admits them: the number of
    waves, the size of a full wave and of the last one (the rest, at most a full wave)."""
    limit = np.maximum(np.floor(limit), 1.0)
    n = np.ceil(replica / limit)
    full = np.minimum(replica, limit)
    return n, full, replica - (n - 1.0) * full


def _groups_after(replica: np.ndarray, first: np.ndarray, full: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The groups that follow a first one of ``first`` requests, ``full`` at a time: ``q`` full
    groups, then one of ``r`` requests (0: none)."""
    rest = replica - first
    q = np.floor(rest / full)
    return q, rest - q * full


def _prompt_admission(dep: ResolvedDeployment, replica: np.ndarray, i: np.ndarray, memory: dict[str, Any],
                      full: np.ndarray, cap: float) -> np.ndarray:
    """Requests of a static batch an engine that admits on the prompt prefills at once.

    Notes
    -----
    vLLM, SGLang and LMDeploy admit a request while KV blocks for its prompt are free and
    preempt when decoding fills the pool (:class:`~inferlab.engines.scheduler.SchedulerConfig`
    ``reserve_output``), so a batch whose prompts fit is prefilled at once even when its
    whole outputs do not: those requests have their first token after one prefill, and the
    preempted ones recompute later (time that shows in throughput, not TTFT). The requests
    whose prompts do not fit wait for the ones ahead to finish, a full wave (what the pool
    holds with whole outputs) at a time. At least a full wave, at most the sequence limit.
    """
    admit = plan_memory(dep.model, dep.hardware, dep.precision, parallel=dep.parallel, batch=replica,
                        context=i + memory["kv_block_size"], **memory)
    return np.clip(np.floor(np.minimum(admit.max_sequences, cap)), full, replica)


def _state_pool_reasons(limits: Any, feasible: np.ndarray, reason: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``feasible`` and ``reason`` with the points where one of the two pools holds no request marked."""
    if limits is None:
        return feasible, reason
    shape = np.shape(feasible)
    slots, kv = (np.ravel(np.broadcast_to(x, shape)) for x in limits)
    empty = ((slots < 1) | (kv < 1)) & np.ravel(feasible)
    if not np.any(empty):
        return feasible, reason
    reason = np.ravel(reason).copy()
    reason[empty] = ["the engine's pool of linear-attention states holds no running request" if a < 1 else
                     "one sequence does not fit the engine's KV pool beside its pool of linear-attention states "
                     "(the KV pool is 1 / (1 + r) of what the weights leave, r = --mamba-full-memory-ratio)"
                     for a in slots[empty]]
    return (np.ravel(feasible) & ~empty).reshape(shape), reason.reshape(shape)


def static_batch(dep: ResolvedDeployment, engine: str, b: np.ndarray, i: np.ndarray, o: np.ndarray, *,
                 gpu_memory_utilization: float | None, kv_block_size: int, max_num_tokens: int,
                 price_per_gpu_hour: float | None, utilization: float, waves: bool,
                 speculative: SpeculativeConfig | None = None, prefix_cache: PrefixCache | None = None,
                 graph_max_batch: int | None = None, max_num_seqs: int | None = None,
                 allow_long_context: bool = True, scheduler: Any = None,
                 prefill_graph_tokens: int | None = None) -> Estimate:
    """The static-batch model on already-validated arrays (shared by :func:`estimate` and sweeps).

    The ``b`` requests split evenly over the ``dp`` replicas, which run side by side; each runs
    at most ``max_num_seqs`` (the engine's per-rank limit times its attention-DP ranks where its
    limits are a rank's) at once, and beyond it (or its KV pool) full waves of that many, then the
    rest: TPOT is the mean over the requests, TTFT the mean wait for the waves ahead. Points
    that cannot run (:mod:`inferlab.phases.feasibility`) are marked in ``feasible`` and ``reason``
    and hold NaN in their times and costs; nothing is raised here. ``scheduler``: the engine's
    with its window settings (:func:`~inferlab.engines.window_options.window_scheduler`; None: its default).
    A prefill chunk of at most ``prefill_graph_tokens`` tokens runs in piecewise CUDA graphs
    (:mod:`~inferlab.techniques.prefill_graphs`).
    """
    par = dep.parallel
    sched = scheduler or default_scheduler(engine)
    replica = np.ceil(b / par.dp)
    graph_limit = float(decode_graph_limit(engine, dep.hardware, par.tp, graph_max_batch))
    kv_block_size = page_tokens(dep, sched, kv_block_size)  # vLLM's pages hold a hybrid's state
    memory = {"kv_block_size": kv_block_size,
              **memory_keywords(sched, dep.hardware, par, max_num_tokens,
                                share=gpu_memory_utilization, graph_max_batch=graph_max_batch,
                                drafter=speculative.method if speculative is not None else "", model=dep.model)}
    if speculative is not None:  # the drafter's weights and KV share the GPU
        check_drafter(dep, speculative)
        memory.update(drafter_memory(dep, speculative).plan_keywords)
    plan = plan_memory(dep.model, dep.hardware, dep.precision, parallel=par, batch=replica, context=i + o, **memory)
    cap = np.inf if max_num_seqs is None else float(
        max_num_seqs * (par.attention_groups if sched.limits_per_rank else 1))
    pools = state_pool_limits(dep, engine, plan)
    if pools is not None:  # the engine's pool of linear-attention states and its KV pool beside it
        cap = np.minimum(cap, np.minimum(*pools))
    # the KV cache holds one wave of the engine's sequence limit at a time
    feasible, reason = static_batch_reasons(plan, par.dp, np.minimum(replica, cap), i + o, np.shape(b), waves)
    feasible, reason = prefix_reasons(prefix_cache, i, feasible, reason)
    feasible, reason = _state_pool_reasons(pools, feasible, reason)
    if not allow_long_context:
        feasible, reason = context_reasons(dep.model, i, o, feasible, reason)
    feasible, reason = model_len_reasons(sched.max_model_len, i + o, feasible, reason)
    # full waves of what the engine holds at once (its sequence limit or its KV pool), then the rest
    n_waves, full, last = _in_waves(replica, np.minimum(plan.max_sequences, cap))
    split = bool(np.any(n_waves > 1))
    if (waves or np.any(cap < np.inf)) and split:  # the memory in use is a full wave's
        plan = plan_memory(dep.model, dep.hardware, dep.precision, parallel=par, batch=full, context=i + o,
                           **memory)
    prefix_cache = prefix_cache and prefix_cache.over_ranks(par.dp * par.attention_groups)  # each caches apart
    cached = 0.0 if prefix_cache is None else effective_cached_tokens(i, prefix_cache, block_size=kv_block_size)

    def prefill(x: np.ndarray) -> tuple[StepResult, np.ndarray, np.ndarray]:
        """The prefill step of ``x`` requests together, their first-token time, and whether its
        chunks (the largest: the budget, or the whole batch's prompts) run in piecewise CUDA graphs."""
        pre = prefill_with_cache(dep, x, i, prefix_cache, block_size=kv_block_size)
        chunks = prefill_chunks(x, i - cached, par, memory["step_tokens"])
        graphed = prefill_graphed(dep, np.minimum(x * (i - cached), memory["step_tokens"]), prefill_graph_tokens)
        first = chunked_prefill_s(dep, pre, chunks, graphed, memory["step_tokens"])
        if speculative is not None:  # the drafter's own pass over the prompts
            first = first + drafter_prefill_s(dep, speculative, x, i, cached)
        return graphed_prefill(dep, pre, graphed), first, graphed

    def decode(x: np.ndarray) -> np.ndarray:
        """The mean decode step of ``x`` requests; batches beyond the largest CUDA graph run eagerly."""
        def per_token(d: ResolvedDeployment) -> np.ndarray:
            return (mean_decode_step_s(d, x, i, o) if speculative is None
                    else mean_speculative_tpot_s(d, x, i, o, speculative))

        return graph_limited_decode_s(dep, x, graph_limit, per_token)

    pre, ttft_full, graphed = prefill(full)
    step_full = decode(full)
    ttft_last, step_last = (prefill(last)[1], decode(last)) if split else (ttft_full, step_full)
    runs = lambda x: np.where(feasible, x, np.nan)  # a point that cannot run has no time and no cost
    wave_full = ttft_full + (o - 1.0) * step_full
    earlier = (n_waves - 1.0) * full  # requests in the full waves before the last
    tpot = runs(np.where(o > 1, (earlier * step_full + last * step_last) / replica, 0.0))
    total = runs((n_waves - 1.0) * wave_full + ttft_last + (o - 1.0) * step_last)
    # a first group, then full waves a wave apart: group g of the later ones waits g full waves
    # (an output-reserving engine's first group is a full wave, its last group the last wave)
    first, ttft_first, ttft_rest = full, ttft_full, ttft_last
    if waves and split and not sched.reserve_output:
        first = _prompt_admission(dep, replica, i, memory, full, cap)
        ttft_first = prefill(first)[1]
    q, r = _groups_after(replica, first, full)
    if first is not full and np.any(r > 0):
        ttft_rest = prefill(np.maximum(r, 1.0))[1]
    ttft = (first * ttft_first + q * full * ttft_full + r * ttft_rest
            + wave_full * (full * q * (q + 1.0) / 2.0 + r * (q + 1.0))) / replica
    cost = cost_of(price_per_gpu_hour, dep.num_gpus, utilization, batch=b, isl=i, osl=o,
                   prefill_s=runs((n_waves - 1.0) * ttft_full + ttft_last), total_s=total)
    return Estimate(deployment=dep, engine=engine, batch_size=b, isl=i, osl=o, waves=runs(n_waves),
                    ttft_s=runs(ttft), tpot_s=tpot, total_s=total,
                    memory=plan, cost=cost, prefill_step=pre, wave_batch=full, speculative=speculative,
                    prefix_cache=prefix_cache, feasible=feasible, reason=reason,
                    graph_max_batch=graph_limit, scheduler=scheduler, prefill_graph_tokens=prefill_graph_tokens,
                    prefill_graphed=graphed, max_num_tokens=max_num_tokens)
