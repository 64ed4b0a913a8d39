"""``inferlab.serve``: a workload served by an in-flight-batching engine, request by request."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from .. import checks
from ..calibration.profile import Profile
from ..engines.window_options import check_model_windows
from ..engines.scheduler import ENGINE_SCHEDULERS, USER_LIMITS, SchedulerConfig  # noqa: F401 - importable from here as before
from ..errors import SpecError, option_name
from ..inputs.call import typed_call, with_inputs
from ..inputs.deployment import Deployment
from ..inputs.prefixes import Prefixes, prefixes
from ..inputs.resolve import deployment
from ..inputs.workload import Lengths, Workload
from ..specs.hardware import HardwareSpec
from ..specs.model import ModelSpec
from .overheads import ClientOverheads
from .replica import (engine_scheduler, kv_capacity_tokens, scheduler_for,  # noqa: F401 - kv_capacity_tokens, scheduler_for
                      serve_deployment, serve_workload)  # and serve_deployment: importable here as before
from .result import ServeResult


def serve(model: str | ModelSpec | Deployment, hardware: str | HardwareSpec | Workload | None = None, *, tp: int = 1,
          pp: int = 1, ep: int = 1,
          dp: int = 1,
          attention_dp: bool = False, precision: Any = None, engine: str = "generic",
          profile: str | Path | Profile = "default", attention_tp: int = 1,
          isl: int | list[int] | Lengths = 1024, osl: int | list[int] | Lengths = 128,
          rate: float | None = None, concurrency: int | None = None, trace: Any = None, offline: bool = False,
          max_concurrency: int | None = None, num_requests: int = 1000, seed: int = 0, scheduler: SchedulerConfig | None = None,
          max_num_seqs: int | None = None, max_num_batched_tokens: int | None = None,
          max_prefill_tokens: int | None = None, chunked_prefill: bool | None = None, mixed_prefill: bool | None = None,
          gpu_memory_utilization: float | None = None, kv_block_size: int | None = None,
          graph_max_batch: int | None = None, prefill_graph_tokens: int | None = None,
          max_model_len: int | None = None, reserve_output: bool | None = None,
          overlap_host: bool | None = None, state_pool_ratio: float | None = None, state_slots: int | None = None,
          state_pool_slots: int | None = None,
          hybrid_overlap: bool | None = None, window_kv: Any = None, window_pool_ratio: float | None = None,
          balance_timeout_iters: int | None = None, overheads: ClientOverheads | None = None,
          stagger: bool = True, disaggregation: Any = None, speculative: Any = None,
          prefix: Prefixes | str | dict | None = None, allow_long_context: bool = False,
          prompt_gpu_s: float = 0.0) -> ServeResult:
    """Simulate serving ``num_requests`` requests and return their latency distributions.

    Parameters
    ----------
    model, hardware, tp, pp, ep, dp, attention_dp, attention_tp, precision, engine, profile
        The deployment, as for :func:`inferlab.estimate`; or a
        :class:`~inferlab.inputs.deployment.Deployment` and a traffic
        :class:`~inferlab.inputs.workload.Workload`, which hold every other argument but
        ``overheads`` and ``scheduler`` (``serve(deployment, workload)``).
    isl, osl : int, list of int or Lengths [token]
        Prompt and output lengths: fixed, an empirical list, or a distribution.
    rate, concurrency, trace, offline
        Exactly one: Poisson arrivals per second, closed-loop clients, arrival times, or
        everything queued at once.
    max_concurrency : int, optional
        With a rate or a trace: at most that many requests in flight, the others held by the
        client until one finishes and timed from when they are sent (``vllm bench serve
        --request-rate R --max-concurrency C``).
    scheduler, max_num_seqs, max_num_batched_tokens, max_prefill_tokens, chunked_prefill, mixed_prefill, ...
        The engine's scheduling limits (defaults per engine, :data:`ENGINE_SCHEDULERS`);
        ``mixed_prefill=False`` runs prefill iterations without the decodes (SGLang's default);
        ``max_prefill_tokens`` stops an iteration taking prompts once that many prompt tokens
        are in it (SGLang's ``--max-prefill-tokens``; refused for vLLM, TensorRT-LLM and LMDeploy,
        whose iterations have the token budget alone); decode batches larger than
        ``graph_max_batch`` run without a CUDA graph (SGLang's ``--cuda-graph-max-bs``, 0 for
        ``--disable-cuda-graph``); iterations with prompt tokens of at most ``prefill_graph_tokens``
        tokens run in piecewise CUDA graphs, without the host's eager floor (SGLang's
        ``--piecewise-cuda-graph-max-tokens``; default: eagerly where the engine graphs decode only,
        refused where its profile has no eager rate); a request longer than ``max_model_len`` (prompt plus output)
        is refused, and SGLang sizes its request pool from it; ``reserve_output`` is the
        capacity policy: admit a request only when the KV of its whole output is free
        (TensorRT-LLM's ``GUARANTEED_NO_EVICT``, its default) or on its prompt, preempting
        when the cache fills (``False``: TensorRT-LLM's ``MAX_UTILIZATION``, vLLM's way);
        ``overlap_host`` plans each iteration on the host while the GPU runs the one before, hiding
        the host's step work and taking a request that arrives mid-iteration an iteration later
        (SGLang's and TensorRT-LLM's PyTorch-runtime default; vLLM's ``--async-scheduling``).
        A hybrid model's linear-attention states: ``state_pool_ratio`` (a pool of their own that
        many times the KV pool, SGLang's ``--mamba-full-memory-ratio``; or pinned at
        ``state_pool_slots`` states, its ``--max-mamba-cache-size``), ``state_slots`` (slots a
        running request takes there) and ``hybrid_overlap`` (the overlap scheduler kept on).
        A windowed-attention model's KV (:mod:`~inferlab.engines.window_options`): ``window_kv``,
        the windowed kinds (``"sliding"``, ``"chunked"``) the engine frees beyond their window (an
        empty list: every layer keeps every token, SGLang's ``--disable-hybrid-swa-memory``, vLLM's
        ``--disable-hybrid-kv-cache-manager``), and ``window_pool_ratio`` in (0, 1], the windowed
        layers' pool of their own (SGLang's ``--swa-full-tokens-ratio``; the other engines refuse
        it). Both change the KV pool as :func:`inferlab.estimate` plans it.
        ``balance_timeout_iters``: attention-DP context balancing (TensorRT-LLM's
        ``attention_dp_config``), new prompts held until every rank has one or that many
        iterations pass; 0 off (the LLM API's default; inferlab's ``trtllm-pytorch`` runs 60, as
        NVIDIA's DeepSeek recipes set it).
    overheads : ClientOverheads, optional
        Network, tokenizer, client and streaming costs added on top of the GPU side
        (``result.user``, and a line in ``explain()``).
    prompt_gpu_s : float [s]
        GPU work each request brings beside its prompt tokens, run on the replica in the
        iteration that starts its prefill: a vision-language model's encoder pass over its
        images (:func:`inferlab.modalities.vision.serve_images` sets it). 0 for text.
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
        :class:`~inferlab.inputs.prefixes.Prefixes`); ``result.prefix_hit_rate`` is the
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
                        offline=offline, max_concurrency=max_concurrency, seed=seed, stagger=stagger)
    overrides = {"max_num_seqs": max_num_seqs, "max_num_batched_tokens": max_num_batched_tokens,
                 "max_prefill_tokens": max_prefill_tokens, "chunked_prefill": chunked_prefill, "mixed_prefill": mixed_prefill,
                 "gpu_memory_utilization": gpu_memory_utilization, "kv_block_size": kv_block_size,
                 "graph_max_batch": graph_max_batch, "prefill_graph_tokens": prefill_graph_tokens,
                 "max_model_len": max_model_len, "reserve_output": reserve_output,
                 "overlap_host": overlap_host, "state_pool_ratio": state_pool_ratio, "state_slots": state_slots,
                 "hybrid_overlap": hybrid_overlap, "state_pool_slots": state_pool_slots, "window_kv": window_kv,
                 "window_pool_ratio": window_pool_ratio, "balance_timeout_iters": balance_timeout_iters}
    sched = engine_scheduler(engine, scheduler, **{k: v for k, v in overrides.items() if v is not None})
    if overheads is not None and not isinstance(overheads, ClientOverheads):
        raise SpecError(f"serve: overheads must be a ClientOverheads, got {overheads!r:.80}")
    gpu_s = checks.real(option_name("prompt_gpu_s"), prompt_gpu_s, minimum=0.0, maximum=3600.0, unit="s")
    unbounded = getattr(workload.osl, "kind", None) == "lognormal"  # (its longest_tokens is its mean)
    if overheads is not None and not unbounded \
            and overheads.preamble_tokens >= (longest := checks.longest_tokens(workload.osl)):
        raise SpecError(f"{option_name('preamble_tokens')} {overheads.preamble_tokens:,}: no request's output is longer "
                        f"than {longest:,.0f} tokens, so none would have a token after the preamble to count; a "
                        "preamble is the tokens before the first one the client counts, shorter than the output")
    dep = deployment(model, hardware, tp=tp, pp=pp, ep=ep, dp=dp, attention_dp=attention_dp, precision=precision,
                     engine=engine, profile=profile, attention_tp=attention_tp)
    check_model_windows(dep.model, window_kv, window_pool_ratio, engine)
    shared = prefixes(prefix) if prefix is not None else None
    turns = shared.turns if shared is not None and shared.kind == "sessions" else 1
    checks.context_within_model(dep.model, workload.isl, workload.osl, allow_long_context=allow_long_context, turns=turns)
    checks.engine_context_within_model(dep.model, sched.max_model_len, allow_long_context=allow_long_context)
    result = serve_workload(dep, engine, workload, sched, speculative=speculative, prefix=shared,
                            allow_long_context=allow_long_context, prompt_gpu_s=gpu_s)
    return result if overheads is None else replace(result, overheads=overheads)


#: What a disaggregated serve refuses (each argument at the value that leaves it out), and why.
_NOT_WITH_POOLS = (
    ({"hardware": None, "tp": 1, "pp": 1, "ep": 1, "dp": 1, "attention_dp": False, "attention_tp": 1},
     "the pools set the hardware and layout"),
    ({"speculative": None, "prefix": None, "max_concurrency": None, "state_pool_ratio": None, "state_slots": None,
      "hybrid_overlap": None, "state_pool_slots": None, "prompt_gpu_s": 0.0},
     "speculation, prefix caching, a client's concurrency cap, a state pool of its own and a prompt's encoder work "
     "are not simulated over separate pools"),
)


def _serve_disaggregated(model: Any, hardware: Any, disaggregation: Any, args: dict[str, Any]) -> ServeResult:
    """:func:`serve` with separate prefill and decode pools; the arguments that cannot apply are refused."""
    from .disaggregated import serve_disaggregated

    limits = {k: args[k] for k in USER_LIMITS if args[k] is not None}
    values = {**args, "hardware": hardware}
    refused = [(sorted(k for k, v in fixed.items() if values[k] != v), why) for fixed, why in _NOT_WITH_POOLS]
    given = sorted((k for keys, _ in refused for k in keys), key=lambda k: (k == "hardware", k))  # (the flags first)
    if given:  # say why for what was given only
        raise SpecError(f"serve with a disaggregation: {'; '.join(why for keys, why in refused if keys)}; drop "
                        f"{', '.join(map(option_name, given))}")
    result = serve_disaggregated(model, disaggregation, isl=args["isl"], osl=args["osl"], rate=args["rate"],
                                 trace=args["trace"], offline=args["offline"], concurrency=args["concurrency"],
                                 stagger=args["stagger"],
                                 num_requests=args["num_requests"],
                                 seed=args["seed"], engine=args["engine"], profile=args["profile"],
                                 precision=args["precision"], scheduler=args["scheduler"], limits=limits,
                                 allow_long_context=args["allow_long_context"])
    return result if args["overheads"] is None else replace(result, overheads=args["overheads"])
