"""The core's view of one configuration for the fluid search: the decode step at each
concurrency of :data:`_BATCHES`, the prefill of one prompt and the sequences the KV memory
holds, as :func:`inferlab.estimate` computes them and a serving engine runs them (each
iteration with its host work per in-flight-batching iteration), without the static-batch
waves and costs the search does not use.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from ..core.memory import plan_memory, require_weights_fit
from ..engines.memory_share import iteration_tokens, memory_keywords, prefill_chunks
from ..engines.graph_limits import decode_graph_limit
from ..engines.scheduler import default_scheduler, token_budget
from ..engines.speculation_limits import for_speculation
from ..engines.state_pool import overlap_off
from ..inputs.resolve import deployment
from ..memo import IdentityMemo
from ..serving.replica import hybrid_sequences
from ..techniques.prefix_cache import PrefixCache, effective_cached_tokens, prefill_with_cache
from ..techniques.speculative import SpeculativeConfig, drafter_prefill_s, mean_speculative_tpot_s
from ..techniques.serving_overhead import eager_prefill_s, serving_iteration_s
from ..techniques.speculative_memory import check_drafter, drafter_memory
from ..techniques.step import graph_limited_decode_s, mean_decode_step_s
from .ttft_mix import TAIL_EDGES
from .scenario import Scenario

#: Concurrencies (decode batches) the search evaluates.
_BATCHES = np.unique(np.round(np.geomspace(1, 4096, 36)))
#: Engine settings the search assumes (the :func:`inferlab.estimate` defaults; the token budget
#: is the engine's on each GPU, :func:`~inferlab.engines.scheduler.token_budget`, and its memory
#: share the engine's, :mod:`~inferlab.engines.memory_share`).
_KV_BLOCK = 16


@dataclass(frozen=True)
class _Curve:
    """What the search needs of one candidate: the decode step at each concurrency of
    :data:`_BATCHES`, the prefill of one prompt (its iterations; alone at each of the traffic's
    prompt lengths ``prompt_lengths``, the quantiles at :data:`~.ttft_mix.TAIL_EDGES`; its share
    of a budget-filling batch, :func:`batched_prefill_s`), and how many sequences the KV
    memory holds."""

    deployment: Any
    max_sequences: np.ndarray
    prefill_1_s: float
    tpot_s: np.ndarray
    prefill_iterations: int = 1
    prompt_lengths: np.ndarray = field(default_factory=lambda: np.zeros(0))
    prompt_times_s: np.ndarray = field(default_factory=lambda: np.zeros(0))
    batched_prefill_s: float = float("nan")
    overlap: bool = False
    #: Prompts of the mean length one iteration's token budget holds (:func:`budget_prompts`).
    batched_prompts: int = 1
    #: What an iteration carrying a prompt's chunk shares with the decodes beside it, at each
    #: concurrency of :data:`_BATCHES` [s] (:func:`shared_step_s`; 0 where the engine does not mix them).
    shared_step_s: np.ndarray = field(default_factory=lambda: np.zeros(0))
    #: What a second prompt of the mean length adds to a prefill iteration [s] (:func:`next_prompt_s`;
    #: NaN where the engine mixes prompts into a pipeline stage's batch, each in its own iteration).
    next_prompt_s: float = float("nan")


def _capacity_curve(sc: Scenario, config: dict[str, Any], isl: int, osl: int) -> _Curve:
    """The core's view of a candidate, as :func:`inferlab.estimate` computes it (same memory
    plan, prefill with the prefix cache, decode integral with or without speculation) without
    the static-batch waves and costs the search does not use. The aggregated and the
    disaggregated variant of a configuration share it.

    The decode steps run over the contexts of the requests in flight, which a request holds
    for as long as it decodes: a request of ``o`` output tokens is in flight ``o`` steps, so
    the ones in flight are weighted by their output length and their mean context is
    ``isl + E[o^2] / (2 E[o])``, not ``isl + E[o] / 2`` (lognormal answers of mean 1,000 and
    sigma 0.8: 1,000 + 948 tokens, not 1,000 + 500). The steps are timed over contexts
    ``isl .. isl + E[o^2] / E[o]``; the memory plan keeps ``isl + osl`` a sequence.
    """
    decode_osl = max(round(osl * sc.traffic.osl.second_moment_ratio), 2)
    lengths = tuple(float(x) for x in sc.traffic.isl.quantiles(TAIL_EDGES))
    return _cached_curve(config["model"], config["hardware"], config["tp"], config.get("pp", 1), config["ep"],
                         config["precision"], config["speculative"], sc.engine, sc.profile, sc.traffic.prefix_hit,
                         isl, osl, decode_osl, lengths, bool(config.get("attention_dp", False)))


def _curve(model: str, hardware: str, tp: int, pp: int, ep: int, precision: str, speculative: Any, engine: str,
           profile: Any, prefix_hit: float, isl: int, osl: int, decode_osl: int | None = None,
           prompt_lengths: tuple[float, ...] | None = None, attention_dp: bool = False) -> _Curve:
    spec = SpeculativeConfig.parse(speculative) if isinstance(speculative, str) else speculative
    dep, max_sequences, prefill_1, chunks = _prefill_and_memory(model, hardware, tp, pp, ep, precision, engine,
                                                                profile, prefix_hit, isl, osl, attention_dp)
    if spec is not None:  # the drafter's weights and KV share the GPU
        check_drafter(dep, spec)
        max_sequences = np.broadcast_to(_kv_plan(dep, engine, isl, osl, drafter_memory(dep, spec)).max_sequences,
                                        _BATCHES.shape)
    b, i, o = _BATCHES, np.asarray(float(isl)), np.asarray(float(osl if decode_osl is None else decode_osl))
    def per_token(d: Any) -> np.ndarray:
        return mean_decode_step_s(d, b, i, o) if spec is None else mean_speculative_tpot_s(d, b, i, o, spec)

    # the engine's overlap scheduling, off beside the drafters it turns it off for (as serve() runs them)
    overlap = _overlap(engine, spec, dep.model)
    if overlap != default_scheduler(engine).overlap_host:
        prefill_1, chunks = (float(x) for x in prompt_prefill_s(dep, engine, prefix_hit, np.asarray(float(isl)),
                                                                  overlap))
        chunks = int(chunks)
    # decode batches beyond the engine's largest CUDA graph run eagerly; each iteration of an
    # in-flight-batching engine also costs its host work beyond a static step's, as in serve()
    tpot = graph_limited_decode_s(_serving(dep, overlap), b, decode_graph_limit(engine, dep.hardware, dep.parallel.tp),
                                  per_token)
    if overlap:  # the host's work hides behind the GPU's, showing where it is the longer
        tpot = np.maximum(tpot, dep.profile.step_overhead_s + serving_iteration_s(dep))
    lengths, times, batched = _prompts(model, hardware, tp, pp, ep, precision, engine, profile, prefix_hit, isl, osl,
                                       prompt_lengths, overlap, attention_dp)
    if spec is not None:  # the drafter's own pass over each prompt (a draft model's prefill)
        drafted = _drafter_prefill_s(dep, spec, prefix_hit, np.concatenate([[float(isl)], lengths]))
        prefill_1, times, batched = prefill_1 + float(drafted[0]), times + drafted[1:], batched + float(drafted[0])
    # what a further prompt adds to an iteration that prefills one (a prompt mixed into a pipeline
    # stage's batch sits in that stage's iteration alone), and, where the engine mixes prompts into
    # the decodes' iterations, what a chunk shares with them
    shared, mixed = np.zeros(b.shape), default_scheduler(engine).mixed_prefill
    nxt = next_prompt_s(dep, prefix_hit, isl) if dep.parallel.pp == 1 or not mixed else float("nan")
    if mixed and dep.parallel.pp > 1:  # a chunk sits in one stage's batch, not spread as an iteration of b + c
        shared = np.full(b.shape, float(np.ravel(tpot)[0]))  # tokens: the weights read of a step of one sequence
    elif mixed:  # under attention DP on one rank: as g chunks, one a rank (:func:`shared_step_s`)
        chunk = float(_uncached(np.asarray(float(isl)), _cache(prefix_hit))) / max(chunks, 1)
        shared = shared_step_s(_serving(dep, overlap), b, chunk * dep.parallel.attention_groups,
                               None if spec is not None else np.broadcast_to(tpot, b.shape))
    return _Curve(dep, max_sequences, prefill_1, np.broadcast_to(tpot, b.shape), chunks, lengths, times, batched,
                  overlap, budget_prompts(dep, engine, prefix_hit, isl), shared, nxt)


def next_prompt_s(dep: Any, prefix_hit: float, isl: float) -> float:
    """What a second prompt of ``isl`` tokens (less the prefix cache's hits) adds to an iteration
    that prefills one [s]: nothing where the iteration lasts as long as its kernels take to issue
    (an eager prefill of short prompts: Llama-3.1-8B FP8's 200-token iteration takes 20 ms on an
    H100 under SGLang with one prompt or two), its share of the GPU's work beyond that."""
    cache = _cache(prefix_hit)
    # (one step of both batches: the op graph evaluated once)
    one, two = np.ravel(prefill_with_cache(dep, np.array([1.0, 2.0]), np.full(2, float(isl)), cache,
                                           block_size=_KV_BLOCK).time_s)[:2]
    return max(float(two - one), 0.0)


def shared_step_s(dep: Any, batch: np.ndarray, chunk: float, decode_s: np.ndarray | None = None) -> np.ndarray:
    """What an iteration of ``batch`` decodes and a prompt's chunk of ``chunk`` tokens shares
    between them at each batch [s]: ``L(c) + L(b) - L(b + c)``, ``L(n)`` an iteration of ``n``
    tokens at no context, whose part that does not grow with its tokens (the weights read, the
    host's work per iteration) both would pay alone. The chunk adds the rest to the decodes'
    iteration. An iteration with prompt tokens that the engine runs eagerly lasts at least its
    kernels' issue (:func:`~inferlab.techniques.serving_overhead.eager_prefill_s`), alone and
    mixed. Of a mixture of experts the decodes' tokens have touched most experts already at a
    large batch, so a chunk beside them reads few more: Qwen3-30B-A3B FP8 on an H100, a
    200-token prompt alone 15.6 ms (128 experts read for its 200 x 8 routings) but beside 186
    decodes 17.2 ms -> about 19 ms (the fluid model had charged 11.2 ms, the prompt less a
    decode step of one sequence: a P99 TPOT of 31 ms where the simulation reads 20). Under
    attention DP the chunk runs on one rank, whose dense layers and attention carry it while
    the others carry only their decodes: the caller passes ``g`` chunks, one a rank (``L`` of an
    attention-DP deployment spreads its tokens over the ranks; the routed experts see the ``g``
    of them, ``g - 1`` more than they run, on both sides of the difference). The fluid model had
    kept a decode step of one sequence there: gpt-oss-120b FP8 over two B200s with attention DP
    on vLLM, 200/200 at 150 req/s, TPOT 27.8 ms where the simulation reads 16.9 (now 16.8).
    Not under pipeline stages, where the chunk sits in one stage's batch (the curve keeps a
    decode step of one sequence). ``decode_s``, the decodes' iterations with their context (the
    curve's), adds what their context adds (its KV read) to ``L(b)`` and ``L(b + c)`` alike: hidden
    under an eager iteration's issue time as the rest is (Llama-3.1-8B FP8 on an H100 under
    TensorRT-LLM's PyTorch runtime: 190 decodes and a 200-token prompt 20.5 ms, the prompt's
    iteration alone; a shared part of the decodes' 8.1 ms without context had left 1.4 ms of
    their KV read to add)."""
    b = np.asarray(batch, float)

    def step(tokens: np.ndarray) -> np.ndarray:
        return mean_decode_step_s(dep, tokens, np.ones(tokens.shape), np.full(tokens.shape, 2.0))

    # an iteration with prompt tokens that runs eagerly lasts at least its kernels' issue: alone and mixed
    floor = eager_prefill_s(dep)
    alone = max(float(step(np.asarray([chunk]))[0]), floor)
    decodes = step(b)
    context = 0.0 if decode_s is None else np.maximum(np.asarray(decode_s, float) - decodes, 0.0)
    shared = alone + decodes + context - np.maximum(step(b + chunk) + context, floor)
    return np.clip(shared, 0.0, np.minimum(alone, decodes + context))


def _overlap(engine: str, spec: SpeculativeConfig | None, model: Any = None) -> bool:
    """Whether ``engine`` overlaps its host's step work with the GPU's, beside ``spec``'s drafter
    (:func:`~inferlab.engines.speculation_limits.for_speculation`) and for ``model`` (a hybrid model's
    states can turn it off: SGLang's)."""
    sched = default_scheduler(engine)
    hybrid = model is not None and overlap_off(model, sched)
    return bool((sched if spec is None else for_speculation(engine, sched, spec.method)).overlap_host) and not hybrid


def _drafter_prefill_s(dep: Any, spec: SpeculativeConfig, prefix_hit: float, isl: np.ndarray) -> np.ndarray:
    """The drafter's pass over one prompt at each length [s], the prefix cache's hits left out."""
    cache = _cache(prefix_hit)
    cached = 0.0 if cache is None else np.asarray(effective_cached_tokens(isl, cache, block_size=_KV_BLOCK), float)
    return np.asarray(drafter_prefill_s(dep, spec, np.ones(isl.shape), isl, cached), float)


def _serving(dep: Any, overlap: bool = False) -> Any:
    """``dep`` whose steps cost a serving iteration's own work as well (an in-flight-batching
    engine's beyond a static step's: building the mixed batch, updating request state, the
    kernels it runs beyond the op graph's; :func:`serving_iteration_s`), as the serving
    simulation charges each iteration;
    under an ``overlap`` scheduler the step's own host work (``step_overhead_s``) runs beside
    the GPU's instead (:meth:`~inferlab.serving.stepmodel.StepModel._with_host`)."""
    prof = dep.profile
    host = 0.0 if overlap else prof.step_overhead_s
    return replace(dep, profile=prof.model_copy(update={"step_overhead_s": host + serving_iteration_s(dep)}))


@functools.lru_cache(maxsize=64)
def _prefill_and_memory(model: str, hardware: str, tp: int, pp: int, ep: int, precision: str, engine: str,
                        profile: Any, prefix_hit: float, isl: int, osl: int, attention_dp: bool = False
                        ) -> tuple[Any, np.ndarray, float, int]:
    """The deployment, the sequences its KV memory holds at each batch of :data:`_BATCHES`,
    the prefill of one prompt [s] and its iterations (chunks of the token budget): what a
    configuration with and without speculation share."""
    dep = deployment(model, hardware, tp=tp, pp=pp, ep=ep, attention_dp=attention_dp, precision=precision,
                     engine=engine, profile=profile)
    plan = _kv_plan(dep, engine, isl, osl)
    require_weights_fit(plan, dep.model, dep.hardware, dep.parallel, dep.precision)
    prefill_1, chunks = prompt_prefill_s(dep, engine, prefix_hit, np.asarray(float(isl)))
    held = hybrid_sequences(dep, default_scheduler(engine), float(isl) + float(osl))  # a state pool of its own
    seqs = plan.max_sequences if held is None else np.minimum(plan.max_sequences, np.floor(held))
    return dep, np.broadcast_to(seqs, _BATCHES.shape), float(prefill_1), int(chunks)


@functools.lru_cache(maxsize=64)
def _prompts(model: str, hardware: str, tp: int, pp: int, ep: int, precision: str, engine: str, profile: Any,
             prefix_hit: float, isl: int, osl: int, prompt_lengths: tuple[float, ...] | None, overlap: bool,
             attention_dp: bool = False) -> tuple[np.ndarray, np.ndarray, float]:
    """What a configuration with and without speculation also share: the prompt lengths (``isl``
    alone when not given), each one's prefill alone (:func:`prompt_prefill_s`) and a prompt's
    share of a budget-filling batch (:func:`batched_prefill_s`), under ``overlap`` scheduling or not."""
    dep = _prefill_and_memory(model, hardware, tp, pp, ep, precision, engine, profile, prefix_hit, isl, osl,
                              attention_dp)[0]
    lengths = np.asarray(prompt_lengths if prompt_lengths is not None else (float(isl),), float)
    times, _ = prompt_prefill_s(dep, engine, prefix_hit, lengths, overlap)
    for shared in (lengths, times):  # held by every curve of the configuration
        shared.setflags(write=False)
    return lengths, times, batched_prefill_s(dep, engine, prefix_hit, isl, overlap)


def prompt_prefill_s(dep: Any, engine: str, prefix_hit: float, isl: np.ndarray, overlap: bool | None = None
                     ) -> tuple[np.ndarray, np.ndarray]:
    """A prompt's prefill alone at each length of ``isl`` [s], and its iterations: the prefix
    cache's hits left out, the rest in chunks of the engine's token budget, each chunk past
    the first a step overhead (none under an ``overlap`` scheduler, the first's too; None: the
    engine's default) and each one the serving iteration's host work."""
    cache, i = _cache(prefix_hit), np.asarray(isl, float)
    pre = prefill_with_cache(dep, np.ones(i.shape), i, cache, block_size=_KV_BLOCK)
    replica_tokens = iteration_tokens(default_scheduler(engine), dep.parallel, engine_budget(engine, dep.hardware))
    chunks = prefill_chunks(1.0, _uncached(i, cache), dep.parallel, replica_tokens)
    prof = dep.profile
    # under an overlap scheduler each chunk's host work runs beside the GPU's longer prefill
    overlap = default_scheduler(engine).overlap_host if overlap is None else overlap
    host = -prof.step_overhead_s if overlap else (chunks - 1.0) * prof.step_overhead_s
    return np.asarray(pre.time_s, float) + host + chunks * serving_iteration_s(dep), chunks


def _kv_plan(dep: Any, engine: str, isl: int, osl: int, drafter: Any = None) -> Any:
    """The memory plan of one GPU at each batch of :data:`_BATCHES` (with a speculative
    ``drafter``'s weights, KV and lookahead slots beside the target's)."""
    return plan_memory(dep.model, dep.hardware, dep.precision, parallel=dep.parallel, batch=_BATCHES,
                       context=float(isl) + float(osl), kv_block_size=_KV_BLOCK,
                       **memory_keywords(default_scheduler(engine), dep.hardware, dep.parallel,
                                         float(engine_budget(engine, dep.hardware)),
                                         drafter="" if drafter is None else drafter.method, model=dep.model),
                       **({} if drafter is None else drafter.plan_keywords))


#: Curves of recent configurations (a plan asks for each twice: aggregated and disaggregated).
_cached_curve = functools.lru_cache(maxsize=64)(_curve)


def batched_prefill_s(dep: Any, engine: str, prefix_hit: float, isl: float, overlap: bool | None = None) -> float:
    """A prompt's share of the prefill of as many prompts of ``isl`` tokens as fill the engine's
    token budget in one iteration [s] (the prefix cache's hits left out; one prompt when one
    fills it): what a prompt that queues behind others costs the engine."""
    cache = _cache(prefix_hit)
    k = budget_prompts(dep, engine, prefix_hit, isl)
    pre = prefill_with_cache(dep, np.asarray(float(k)), np.asarray(float(isl)), cache, block_size=_KV_BLOCK)
    overlap = default_scheduler(engine).overlap_host if overlap is None else overlap
    hidden = dep.profile.step_overhead_s if overlap else 0.0  # beside the GPU's
    return (float(pre.time_s) - hidden) / k + serving_iteration_s(dep) / k


def budget_prompts(dep: Any, engine: str, prefix_hit: float, isl: float) -> int:
    """How many prompts of ``isl`` tokens (less the prefix cache's hits) fill the engine's
    token budget in one iteration (at least one)."""
    uncached = float(_uncached(np.asarray(float(isl)), _cache(prefix_hit)))
    return max(math.floor(engine_budget(engine, dep.hardware) / max(uncached, 1.0)), 1)


#: Token budgets by GPU and engine: every configuration on a GPU asks for the same one.
_BUDGETS = IdentityMemo(256)


def engine_budget(engine: str, hw: Any) -> int:
    """The tokens per iteration ``engine`` runs with on ``hw``
    (:func:`~inferlab.engines.scheduler.token_budget`), sized once for each GPU."""
    budget = _BUDGETS.get((hw,), engine)
    return budget if budget is not None else _BUDGETS.put((hw,), engine, token_budget(engine, hw))


def _cache(prefix_hit: float) -> PrefixCache | None:
    """The scenario's prefix cache (None without hits)."""
    return PrefixCache(hit_rate=prefix_hit) if prefix_hit else None


def _uncached(isl: np.ndarray, cache: PrefixCache | None) -> np.ndarray:
    """Prompt tokens left to prefill after the cache's hits [token]."""
    return isl if cache is None else isl - np.asarray(effective_cached_tokens(isl, cache, block_size=_KV_BLOCK), float)
