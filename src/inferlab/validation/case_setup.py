"""A case's engine as it ran: the profile engine that times it, the engine release, and the
scheduler settings, from the case or, where it states none, from its source family.

Re-exported by :mod:`.cases`, which holds the case schema.
"""

from __future__ import annotations

import math
import re
from typing import TYPE_CHECKING, Any, Callable

from ..errors import InferlabError, UnknownNameError

if TYPE_CHECKING:
    from .cases import Case

#: Engines with a calibration profile of their own; the others run ``generic``'s.
PROFILE_ENGINES = ("generic", "trtllm", "trtllm-pytorch", "vllm", "sglang", "lmdeploy")
#: A case's engine when its run records TensorRT-LLM's compiled-engine (C++) backend, which
#: from 1.0 is not the default (``trtllm-bench --backend tensorrt``).
TRTLLM_CPP = "trtllm-cpp"
#: Every engine a case may name: those with a profile, ``trtllm-cpp``, and the ones the case
#: schema (``validation/SCHEMA.md``) lists without a profile, which run ``generic``'s.
CASE_ENGINES = (*PROFILE_ENGINES, TRTLLM_CPP, "gpt-fast", "mlc", "other")


def known_engine(engine: str) -> str:
    """``engine`` when a case may name it (:data:`CASE_ENGINES`), else a ValueError naming the
    closest and the allowed ones, the case's reason: an unknown name had run as ``generic``."""
    if engine not in CASE_ENGINES:
        raise ValueError(str(UnknownNameError("engine", engine, CASE_ENGINES)))
    return engine


def case_engine(case: Case) -> str:
    """The profile engine of a case: engines without a profile of their own use ``generic``;
    TensorRT-LLM from 1.0 on runs its PyTorch runtime (``trtllm-pytorch``: from 1.0
    ``trtllm-bench`` and ``trtllm-serve`` default to it), the version being the case's
    ``engine_version`` or, without one, the release its source family comes from
    (:func:`case_version`); ``trtllm-cpp`` (a run that records the compiled-engine backend)
    and ``trtllm-pytorch`` name their runtime whatever the version."""
    return runtime_engine(case.engine, case_version(case))


def runtime_engine(engine: str, version: Any) -> str:
    """The profile engine of ``engine`` at release ``version`` (None: unknown), as :func:`case_engine`
    reads a case's."""
    if engine == "trtllm" and _major_version(version) >= 1:
        return "trtllm-pytorch"
    if engine == TRTLLM_CPP:  # a run that records the compiled-engine backend, whatever the version
        return "trtllm"
    return engine if engine in PROFILE_ENGINES else "generic"


#: Scheduler settings a source family's runs used where its cases record none, each with where
#: the source says so: aiconfigurator deploys SGLang's aggregated servers with
#: ``--enable-mixed-chunk`` (ai-dynamo/aiconfigurator,
#: src/aiconfigurator/generator/rule_plugin/benchmark/sglang.rule: ``agg enable_mixed_chunk = true``),
#: where SGLang's own default runs prefill batches without the decodes.
SOURCE_SCHEDULERS: dict[tuple[str, str], dict[str, Any]] = {
    ("aiconfigurator-silicon-sample", "sglang"): {"mixed_prefill": True},
}


#: Engines whose KV cache, where a run does not set it (``--kv-cache-dtype auto``, their default),
#: is the checkpoint's: 16-bit unless the checkpoint's quantization config names a KV format
#: (ModelOpt's ``kv_cache_quant_algo: FP8``: SGLang's model runner, ``configure_kv_cache_dtype``;
#: vLLM since PR #29980, December 2025). TensorRT-LLM follows the checkpoint too (its
#: ``KvCacheConfig.dtype`` ``auto``), where the rule below reads FP8 beside FP8 and FP4 formats.
CHECKPOINT_KV_ENGINES = ("vllm", "sglang")


def unstated_kv_cache(case: Case, formats: dict[str, str]) -> str | None:
    """The KV cache of a run whose case does not state it, beside its stated ``formats``; None:
    the checkpoint's own (the catalog model's).

    A run whose activations are 8 bits or narrower (MXFP8's 8.25 a value included) loaded a
    quantized checkpoint. On TensorRT-LLM its cache is FP8 (FP8 and FP4 checkpoints carry one),
    as on vLLM and SGLang (:data:`CHECKPOINT_KV_ENGINES`) where an FP8 or FP4 checkpoint is a
    quantizer's (NVIDIA's ModelOpt checkpoints of Llama and NVFP4 ones declare
    ``kv_cache_quant_algo: FP8``); where its weights (and routed experts) are in the formats the
    model's makers release (DeepSeek-V3/R1, MiniMax-M2.5, Kimi-K2 in FP8), or another format
    (an INT8 W8A8 checkpoint of llm-compressor's), it names no KV format and those engines keep
    16 bits. Both kinds of evidence agree: Llama-3.1-70B FP8 on one B200 under vLLM at 64 clients
    of 1,024 + 8,192 tokens answered in 382 ms, which a 16-bit cache (320 KiB a token) could not
    hold without queueing (the simulation: 4.1 s); MiniMax-M2.5 FP8 under vLLM at 256-512 clients
    decoded 25-33% slower than an FP8 cache allows (aiconfigurator's April 2026 dump, out of
    sample). A model the catalog does not know is left to the case's own reason."""
    from ..precision import number_format
    from ..specs.catalog import load_model
    from ..techniques.deployed_precision import checkpoint_precision

    acts = formats.get("activations")
    if acts is None:
        return None
    if number_format(acts).bits_per_element >= 9:
        return "bf16" if case.engine not in CHECKPOINT_KV_ENGINES else None
    if case.engine not in CHECKPOINT_KV_ENGINES:
        return "fp8"
    try:
        released = checkpoint_precision(load_model(case.model))
    except InferlabError:
        return None
    kinds = [(formats.get("weights", released.weights), released.weights),
             (formats.get("moe_weights", formats.get("weights", released.experts)), released.experts)]
    # formats the makers do not ship (none: their own checkpoint, which names no KV format)
    quantized = {number_format(run).compute for run, _ in kinds} - {number_format(shipped).compute for _, shipped in kinds}
    return "fp8" if quantized & {"fp8", "fp6", "fp4"} else None


#: Weight formats a source family's runs used where its cases state one format for all: the
#: TensorRT-LLM min-latency DeepSeek-R1 blog's "mixed precision recipe" keeps the 64 attention
#: modules in BF16 ("low-precision attention computation doesn't help with performance") with
#: NVFP4 dense and MoE FFNs (NVIDIA/TensorRT-LLM tech blog 1, "Pushing Latency Boundaries:
#: Optimizing DeepSeek-R1 Performance on NVIDIA B200 GPUs", Precision Strategy); its MTP layers
#: and router GEMM are BF16 too (not expressible: the drafter runs the model's formats). Its
#: max-throughput runs load the same kind of checkpoint (nvidia/DeepSeek-R1-0528-FP4: the
#: ``self_attn`` projections q_a, q_b, kv_a, kv_b and o are stored BF16, every MLP, dense ones
#: included, NVFP4 with FP8 block scales; tech blog 3: the throughput recipe is the latency one
#: but for FP8 KV cache and attention kernels and an FP4 all-gather).
SOURCE_PRECISION: dict[str, dict[str, str]] = {
    "trtllm-deepseek-r1-min-latency": {"attention_weights": "bf16"},
    "trtllm-deepseek-r1-max-throughput": {"attention_weights": "bf16"},
}


#: Source families whose database dump wrote an expert-parallel layout's GPUs as ``moe_tp x
#: moe_ep`` with ``moe_tp`` set to the real tensor-parallel (or attention-DP) size, so that a run
#: on ``ep`` GPUs reads as ``ep x ep`` of them. aiconfigurator's silicon sample keeps two copies
#: of some runs: its ``db-dump/2026-04-27`` row of config 201 (workflow run 337: SGLang v0.5.9,
#: DeepSeek-R1 NVFP4, 1,024/1,024 tokens at 64 clients, TTFT 496.38 ms, TPOT 16.31 ms) reads
#: tp 64, moe_tp 8, moe_ep 8, its ``2026-03-25.csv`` row of the same run tp 8, moe_ep 8 on
#: 8 B200s; the dump's TensorRT-LLM attention-DP rows carry 64 ranks and a batch of 256 clients
#: over 64 (ai-dynamo/aiconfigurator, src/aiconfigurator/systems/silicon_sample.csv). Its config
#: generator writes ``tensor_parallel_size = moe_tensor_parallel_size * moe_expert_parallel_size``
#: (generator/rule_plugin/benchmark/trtllm.rule, "Enforce TensorRT-LLM MoE parallelism").
INFLATED_LAYOUT_SOURCES = ("aiconfigurator-silicon-sample",)


def misspelt(data: Any, fields: tuple[str, ...], layout: tuple[str, ...], kinds: tuple[str, ...]) -> None:
    """Refuse a case key that reads as a misspelling of a known one (``precision: {weight: fp8}``,
    ``parallelism: {tpp: 2}``, ``enigne``): it had been kept as an extra and the known key read as
    not given (BF16 weights, tp 1). A key close to none is kept, as a schema's later field."""
    import difflib

    if not isinstance(data, dict):
        return
    for where, given, known in (("", data, fields), ("parallelism.", data.get("parallelism"), layout),
                                ("precision.", data.get("precision"), kinds)):
        for key in given if isinstance(given, dict) else ():
            close = [] if key in known else difflib.get_close_matches(str(key), known, n=1, cutoff=0.75)
            if close:
                raise ValueError(f"unknown key {where}{key}; did you mean {where}{close[0]}? (read as not given)")


def source_layout(data: Any) -> Any:
    """A case's fields with its layout as it ran where its source family's dump wrote it inflated
    (:data:`INFLATED_LAYOUT_SOURCES`): ``moe_tp == ep > 1``, ``tp`` (or the attention-DP ranks)
    ``= ep x ep = num_gpus``, more GPUs than one NVLink domain of the hardware holds. The run had
    ``ep`` GPUs, each an attention (TP or DP) rank and an expert group of its own (``moe_tp`` 1).
    Anything else, or fields that do not read, comes back as given (the schema checks them)."""
    from ..specs.catalog import load_hardware

    par = data.get("parallelism") if isinstance(data, dict) else None
    if not isinstance(par, dict) or data.get("source") not in INFLATED_LAYOUT_SOURCES:
        return data
    try:
        tp, ep, moe_tp = int(par.get("tp", 1)), int(par.get("ep", 1)), int(par.get("moe_tp") or 0)
        ranks, gpus = int(par.get("attention_dp_size") or 1), int(data["num_gpus"])
        if not (ep > 1 and moe_tp == ep and tp * ranks == ep * ep == gpus) or \
                gpus <= load_hardware(str(data.get("hardware"))).scale_up.domain_size.si:
            return data
    except (InferlabError, KeyError, TypeError, ValueError):
        return data
    layout = {"tp": 1, "attention_dp_size": ep} if ranks > 1 else {"tp": ep}
    return {**data, "num_gpus": ep, "parallelism": {**par, **layout, "moe_tp": 1}}


#: Tokens aiconfigurator's benchmark rules give an iteration beyond one prompt
#: (ai-dynamo/aiconfigurator, src/aiconfigurator/generator/rule_plugin/benchmark/:
#: ``agg max_num_tokens = max_batch_size + SlaConfig.isl + 1500`` in trtllm.rule,
#: ``max_prefill_tokens = SlaConfig.isl + 1500`` in sglang.rule).
AICONFIGURATOR_TOKEN_MARGIN = 1500


def _aiconfigurator_trtllm(case: Case) -> dict[str, Any]:
    """The limits aiconfigurator's benchmark rules give an aggregated TensorRT-LLM server: a
    token budget of one prompt, :data:`AICONFIGURATOR_TOKEN_MARGIN` tokens and one decode
    token per sequence of its ``max_batch_size`` (the clients of a replica, as the sample's
    rows record ``batch_size`` = concurrency; as a sequence limit it binds nothing in a closed
    loop of that many clients, so it is not set), without chunked prefill (the ``extra_engine_args``
    templates, 1.0.0rc3 to 1.2: ``enable_chunked_prefill`` defaults to false), so a second
    prompt of 1,500 tokens or more waits for the next iteration; and, on the PyTorch runtime, a
    CUDA graph for every decode batch up to those clients (``cuda_graph_batch_sizes = range(1,
    max_batch_size + 1)``, where TensorRT-LLM's own default stops at 128).

    Not applied to vLLM, whose rule reads the same: with it the sample's vLLM rows
    (Llama-3.1-70B, untagged) move away from their measured TTFTs (8,192-token prompts no
    longer chunked) and the fitted vLLM request overhead runs to its bound."""
    limits: dict[str, Any] = {"chunked_prefill": False}
    clients = (case.load or {}).get("concurrency")
    if clients:
        per_replica = math.ceil(clients / max(case.parallelism.dp, 1))
        limits["max_num_batched_tokens"] = per_replica + case.isl + AICONFIGURATOR_TOKEN_MARGIN
        if case_engine(case) == "trtllm-pytorch":  # (the compiled engines' runtime has no graph setting)
            limits["graph_max_batch"] = per_replica
    return limits


def _aiconfigurator_sglang(case: Case) -> dict[str, Any]:
    """The same for SGLang: prompts are taken until one prompt and
    :data:`AICONFIGURATOR_TOKEN_MARGIN` tokens are in the iteration, the one that passes it
    whole (``max_prefill_tokens``, under its chunk), and every decode batch up to the clients
    runs from a CUDA graph (sglang.rule: ``cuda_graph_batch_sizes = range(1, max_batch_size +
    1)``, the sample's rows recording ``batch_size`` = concurrency)."""
    limits: dict[str, Any] = {"max_prefill_tokens": case.isl + AICONFIGURATOR_TOKEN_MARGIN}
    clients = (case.load or {}).get("concurrency")
    if clients:
        limits["graph_max_batch"] = math.ceil(clients / max(case.parallelism.dp, 1))
    return limits


#: Scheduler settings a source family's runs used that follow from each case's workload.
SOURCE_SCHEDULER_RULES: dict[tuple[str, str], Callable[[Case], dict[str, Any]]] = {
    ("aiconfigurator-silicon-sample", "trtllm"): _aiconfigurator_trtllm,
    ("aiconfigurator-silicon-sample", "sglang"): _aiconfigurator_sglang,
}


#: vLLM's defaults before the release that changed them, as (release, limit, earlier value): the
#: memory share before 0.22 raised it to 0.92 (vllm-project/vllm PR #38284, 2026-04;
#: :mod:`inferlab.engines.memory_share`), async scheduling before 0.14 turned it on (PR #27614).
#: A case run on an earlier release (:func:`case_version`) takes the earlier value.
VLLM_EARLIER_DEFAULTS = (((0, 22), "gpu_memory_utilization", 0.9), ((0, 14), "overlap_host", False))


def _version(text: Any) -> tuple[int, ...] | None:
    """``"0.12.0"`` -> (0, 12); None when it does not read as major.minor."""
    parts = str(text or "").split(".")
    return (int(parts[0]), int(parts[1])) if len(parts) > 1 and parts[0].isdigit() and parts[1].isdigit() else None


def _release_defaults(case: Case) -> dict[str, Any]:
    """Defaults of the engine release a case ran that differ from the current release's."""
    if case.engine != "vllm":
        return {}
    version = _version(case_version(case))
    return {name: value for release, name, value in VLLM_EARLIER_DEFAULTS if version is not None and version < release}


def case_limits(case: Case) -> dict[str, Any]:
    """The scheduler limits a case's run used: its own ``scheduler`` over its source family's
    settings (:data:`SOURCE_SCHEDULERS` and :data:`SOURCE_SCHEDULER_RULES`, aggregated runs
    only), over its engine release's defaults (vLLM's before 0.14 and 0.22)."""
    if case.disaggregation:
        return {**_release_defaults(case), **(case.scheduler or {})}
    key = (case.source, case.engine)
    rule = SOURCE_SCHEDULER_RULES.get(key)
    family = {**_bench_tool(case), **SOURCE_SCHEDULERS.get(key, {}), **(rule(case) if rule else {})}
    return {**_release_defaults(case), **family, **(case.scheduler or {})}


def case_version(case: Case) -> str | None:
    """The engine version a case ran: its ``engine_version``, else the release its source family
    comes from (:data:`SOURCE_VERSIONS`: ``trtllm-perf-overview-v1.0-offline`` -> ``"1.0"``; per
    engine, :data:`SOURCE_ENGINE_VERSIONS`), else None."""
    if case.engine_version:
        return case.engine_version
    if case.source in SOURCE_VERSIONS:
        return SOURCE_VERSIONS[case.source]
    if (case.source, case.engine) in SOURCE_ENGINE_VERSIONS:
        return SOURCE_ENGINE_VERSIONS[case.source, case.engine]
    page = _PERF_OVERVIEW.match(case.source)  # a release's performance-overview page not listed yet
    return page.group(1) if page else None


#: The engine release of each source family whose cases state no ``engine_version``: the page's or
#: the blog's. Listed, not read from the name, where a model's version (``llama-v3.1``,
#: ``vicuna-v1.5``) would read as the engine's and a v1.0+ tag pick the PyTorch runtime.
SOURCE_VERSIONS = {
    "trtllm-blog-h200-launch-v0.5": "0.5", "trtllm-blog-falcon180b-h200-v0.7a": "0.7",
    "trtllm-perf-overview-v0.9-static": "0.9", "trtllm-perf-overview-v0.9-ttft": "0.9",
    "trtllm-perf-overview-v0.14-online-serving": "0.14", "trtllm-perf-overview-v0.17-offline": "0.17",
    "trtllm-perf-overview-v0.20-offline": "0.20", "trtllm-perf-overview-v1.0-offline": "1.0",
}


#: The same for one engine of a source family that measured several: the aiconfigurator silicon
#: sample's TensorRT-LLM rows without a ``backend_version`` were measured on 2025-10-29
#: (Llama-3.1-70B) and 2025-11-02 (DeepSeek-R1), its ``silicon_data_source`` says, after
#: TensorRT-LLM 1.0, whose ``trtllm-serve`` runs the PyTorch runtime; every tagged TensorRT-LLM
#: row of that sample is 1.0.0rc3 or later, and DeepSeek-R1 runs only on the PyTorch runtime.
#: Its untagged vLLM rows (Llama-3.1-70B) were measured in 2025-10 too, on vLLM 0.11 (its tagged
#: vLLM rows are 0.12.0): before 0.14's async scheduling and 0.22's memory share.
SOURCE_ENGINE_VERSIONS = {("aiconfigurator-silicon-sample", "trtllm"): "1.0",
                          ("aiconfigurator-silicon-sample", "vllm"): "0.11"}


#: TensorRT-LLM's performance overview of a release, as the case files name its pages
#: (``trtllm-perf-overview-v1.2-offline``): the version there is the engine's, never a model's.
_PERF_OVERVIEW = re.compile(r"^trtllm-perf-overview-v(\d+(?:\.\d+)+)-")


def _bench_tool(case: Case) -> dict[str, Any]:
    """What the benchmark tool of a source family sets where its engine's default differs: the
    offline pages of TensorRT-LLM's performance overview run ``trtllm-bench throughput``, which
    never refuses a prompt for its budget: by release it chunks (``--enable_chunked_context``,
    on by default in some, for the C++ runtime only from TensorRT-LLM PR #6956) or raises
    ``max_num_tokens`` to hold the longest prompt; the pages record neither: read as chunked."""
    offline_page = _PERF_OVERVIEW.match(case.source) and case.source.endswith("-offline")
    return {"chunked_prefill": True} if offline_page and case.engine == "trtllm" else {}


def _major_version(version: Any) -> int:
    """``"1.1.0rc2.post2"`` -> 1; -1 when unknown."""
    head = str(version or "").split(".")[0]
    return int(head) if head.isdigit() else -1
