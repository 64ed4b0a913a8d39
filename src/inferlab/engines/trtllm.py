"""TensorRT-LLM's ``trtllm-serve`` flags and extra LLM-API options, read into an :class:`EngineLaunch` and written from one.

Flag and option names follow TensorRT-LLM 1.0-1.1 (``trtllm-serve MODEL --tp_size
--pp_size --ep_size --max_batch_size --max_num_tokens
--kv_cache_free_gpu_memory_fraction --extra_llm_api_options FILE.yaml``; the YAML holds
``LlmArgs`` fields: ``enable_attention_dp``, ``enable_chunked_prefill``,
``kv_cache_config``, ``speculative_config``, ``quant_config``, ``disable_overlap_scheduler``...,
the last with no trtllm-serve flag of its own). Options in the YAML
win over the command-line flags, as trtllm-serve applies them last. ``--backend
pytorch`` (the default) is inferlab's ``trtllm-pytorch``, ``tensorrt`` its ``trtllm``.
"""

from __future__ import annotations

from typing import Any

from ..errors import SpecError
from ..specs.catalog import checkpoint_format
from .command_line import Command, choice, read_flags, typo_of
from .common import (checkpoint_of, DTYPE_NAMES, DTYPES, drafter_for, launched_model, read_yaml_mapping, shell_form,
                     source_flags, speculation)
from .launch import EngineLaunch, Rendered
from .piecewise_graphs import trtllm_capture_list, trtllm_default_tokens, trtllm_options
from .scheduler import TRTLLM_GRAPH_BATCH, default_scheduler
from .speculation_limits import NO_OVERLAP_DRAFTERS
from .trtllm_flags import (BACKENDS, FLAGS, NO_EFFECT_SWITCH, NO_EFFECT_VALUE, UNMODELLED_FLAGS,  # noqa: F401
                           unmodelled_flags)

NAME = "trtllm"
CONFIG_FILE = "extra-llm-api-config.yml"
#: YAML key -> (field, kind) for the top level and ``kv_cache_config``.
TOP = {"tensor_parallel_size": ("tp", "int"), "pipeline_parallel_size": ("pp", "int"),
       "moe_expert_parallel_size": ("ep", "int"), "enable_attention_dp": ("attention_dp", "bool"),
       "max_batch_size": ("max_num_seqs", "int"), "max_num_tokens": ("max_num_batched_tokens", "int"),
       "max_seq_len": ("max_model_len", "int"), "enable_chunked_prefill": ("chunked_prefill", "bool"),
       "tokens_per_block": ("kv_block_size", "int"), "dtype": ("dtype", "text")}
KV = {"dtype": ("kv_cache", "text"), "free_gpu_memory_fraction": ("gpu_memory_utilization", "fraction"),
      "enable_block_reuse": ("prefix_caching", "bool"), "tokens_per_block": ("kv_block_size", "int")}
NO_EFFECT_KEYS = {"print_iter_log", "backend", "return_perf_metrics", "enable_iter_perf_stats",
                  "num_postprocess_workers"}  # the YAML form of --num_postprocess_workers
QUANT_ALGOS = {"fp8": ("fp8", "fp8"), "fp8_block_scales": ("fp8_block", "fp8_block"), "nvfp4": ("nvfp4", "nvfp4"),
               "w4a16_awq": ("int4", "bf16"), "w8a8_sq_per_channel": ("int8", "int8"),
               "w4a8_mxfp4_fp8": ("mxfp4", "fp8")}
_QUANT_NAME = {pair: name.upper() for name, pair in QUANT_ALGOS.items()}
KV_DTYPES = {"auto": None, "fp8": "fp8", "nvfp4": "nvfp4"}
DECODING = {"eagle": "eagle", "eagle3": "eagle", "mtp": "mtp", "ngram": "ngram", "drafttarget": "draft",
            "medusa": "medusa"}
#: The names written: ``Eagle`` is the EAGLE(-3) config in 1.0 (``DecodingBaseConfig.from_dict``
#: knows no ``Eagle3`` there) and an alias of ``Eagle3`` in later releases, whose docs spell it so.
_DECODING_NAME = {"eagle": "Eagle", "mtp": "MTP", "ngram": "NGram", "draft": "DraftTarget", "medusa": "Medusa"}
_SPEC_NO_EFFECT = {"max_matching_ngram_size", "is_keep_all", "is_use_oldest", "is_public_pool", "eagle3_one_model"}


def parse(cmd: Command, words: list[str]) -> EngineLaunch:
    """An :class:`EngineLaunch` from the words after ``trtllm-serve`` (and ``serve``)."""
    f = read_flags(words, FLAGS, NO_EFFECT_VALUE, NO_EFFECT_SWITCH, NAME, unmodelled=UNMODELLED_FLAGS)
    model, written, extra, note = launched_model(NAME, f)
    notes = ([note] if note else []) + unmodelled_flags(f)
    values = {k: v for k, (_, v) in f.values.items()}
    sources = source_flags(f, ())
    if "options" in f.values:
        options = read_yaml_mapping(NAME, f"--extra_llm_api_options {f.get('options')}", f.get("options"),
                                    dict(cmd.files), "LLM-API options")
        _apply_options(options, values, sources, f, notes, where=f.flag("options"))
    engine = choice(NAME, "--backend", values.pop("backend", "pytorch"), BACKENDS)
    for key, option in (("graph_max_batch", "cuda_graph_config"), ("prefill_graph_tokens", "piecewise CUDA graphs")):
        if engine == "trtllm" and key in values:  # options of the PyTorch runtime
            f.unknown.append(f"{option} (the pytorch backend's): {values.pop(key)}")
            sources.pop(key, None)
    if engine == "trtllm" and "overlap_host" in values:  # TorchLlmArgs', as cuda_graph_config
        f.unknown.append(f"disable_overlap_scheduler (the pytorch backend's): {not values.pop('overlap_host')}")
        sources.pop("overlap_host", None)
    if values.get("attention_dp") and "balance_timeout_iters" not in values:
        values["balance_timeout_iters"] = 0
        notes.append("attention DP without attention_dp_config: no context balancing (TensorRT-LLM's default; inferlab's "
                     "trtllm-pytorch without engine args balances with timeout_iters 60, as NVIDIA's DeepSeek recipes)")
    pair = values.pop("quant", (None, None))
    kv = values.pop("kv_cache", None)
    launch = EngineLaunch(
        engine=engine, model=model, checkpoint=written, tp=values.get("tp", 1), pp=values.get("pp", 1), ep=values.get("ep", 1),
        attention_dp=values.get("attention_dp", False), weights=pair[0], activations=pair[1],
        kv_cache=choice(NAME, "kv_cache_config.dtype", kv, KV_DTYPES) if kv is not None else values.get("kv_quant"),
        dtype=choice(NAME, "dtype", values["dtype"], DTYPES) if "dtype" in values else None,
        **{k: values.get(k) for k in ("max_num_seqs", "max_num_batched_tokens", "chunked_prefill",
                                      "gpu_memory_utilization", "kv_block_size", "max_model_len", "prefix_caching",
                                      "reserve_output", "graph_max_batch", "overlap_host", "prefill_graph_tokens",
                                      "balance_timeout_iters")},
        speculation=values.get("speculation"), unknown=tuple(f.unknown + extra), no_effect=tuple(f.no_effect),
        notes=tuple(notes))
    return launch.with_sources(**sources)


def _apply_options(options: dict, values: dict, sources: dict, f: Any, notes: list[str], where: str) -> None:
    """Fold the YAML's options into ``values`` (they win over the flags)."""
    def put(key: str, value: Any, label: str) -> None:
        if key in values and values[key] != value:
            notes.append(f"{label}: {value} in {where} wins over the command line's {values[key]}")
        values[key], sources[key] = value, label

    options, pieces = trtllm_options(options, where, f, notes)  # piecewise prefill graphs' keys taken out
    if pieces is not None and pieces[0] is not None:
        put("prefill_graph_tokens", *pieces)
    for key, value in options.items():
        label = f"{where}: {key}"
        if key in TOP:
            field, kind = TOP[key]
            put(field, _typed(label, value, kind), label)
        elif key == "kv_cache_config" and isinstance(value, dict):
            for sub, item in value.items():
                if sub in KV:
                    field, kind = KV[sub]
                    put(field, _typed(f"{label}.{sub}", item, kind), f"{label}.{sub}")
                else:
                    f.unknown.append(f"{key}.{sub}: {item}{typo_of(sub, KV)}")
        elif key == "quant_config" and isinstance(value, dict):
            _quant(value, values, sources, label, f)
        elif key == "speculative_config" and isinstance(value, dict):
            put("speculation", _speculation(value, label, f), label)
        elif key in NO_EFFECT_KEYS:
            f.no_effect.append(f"{where}: {key}")
        elif key == "attention_dp_config" and isinstance(value, dict):
            put("balance_timeout_iters", _balance(value, label, f), label)
        elif key in UNMODELLED or key == "moe_config" and isinstance(value, dict):
            _unmodelled(key, value, where, f, notes)
        elif key == "disable_overlap_scheduler":  # TorchLlmArgs: "Disable the overlap scheduler" (default false);
            put("overlap_host", not _typed(label, value, "bool"), label)  # trtllm-serve has no flag for it
        elif key == "cuda_graph_config" and (value is None or isinstance(value, dict)):
            put("graph_max_batch", _graph_limit(value or {}, label, f, notes) if value is not None else 0, label)
        elif key == "scheduler_config" and isinstance(value, dict):
            for sub, item in value.items():
                if sub == "capacity_scheduler_policy":
                    put("reserve_output", _capacity_policy(f"{label}.{sub}", item), f"{label}.{sub}")
                else:
                    f.unknown.append(f"{key}.{sub}: {item}")
        else:
            f.unknown.append(f"{key}: {value}{typo_of(key, _TOP_KEYS)}")
    if pieces is not None and pieces[0] is None:  # no capture list: the decode graphs' sizes, as configured above
        tokens = trtllm_default_tokens(pieces[1], values.get("graph_max_batch"), notes)
        if tokens is not None:
            put("prefill_graph_tokens", tokens, pieces[1])
    if "kv_cache" in values or "quant" in values:
        sources.setdefault("precision", sources.get("kv_cache") or sources.get("quant", where))
    if "max_num_batched_tokens" in sources:
        sources["max_num_tokens"] = sources["max_num_batched_tokens"]


#: LLM-API fields (TorchLlmArgs) that change speed in ways inferlab does not model, by the value that
#: is the default (changes nothing) and what another value would change. ``stream_interval``: "The
#: iteration interval to create responses under the streaming mode", larger "to reduce the streaming
#: overhead" at large batches; ``attn_backend``: "Attention backend to use" (TRTLLM by default);
#: ``moe_config.backend``: "MoE backend to use" (CUTLASS by default in 1.0-1.1, AUTO in later
#: releases; TRTLLM, DEEPGEMM, WIDEEP...).
_KERNELS = "; inferlab times them with efficiencies fitted per GPU and engine, not per backend"
UNMODELLED = {
    "stream_interval": (1, "a streamed response every so many iterations instead of each: less host work per "
                           "iteration and tokens reaching the client in bursts, neither measured; simulated as 1"),
    "attn_backend": ("TRTLLM", f"the attention kernels{_KERNELS}"),
    "moe_config.backend": ("CUTLASS", f"the kernels of the routed experts{_KERNELS} (WIDEEP's all-to-all "
                                      "dispatch is not modelled either)"),
}
#: The LLM-API options' top-level keys read (a misspelt one is named beside what it likely meant).
_TOP_KEYS = (*TOP, *NO_EFFECT_KEYS, *UNMODELLED, "kv_cache_config", "quant_config", "speculative_config",
             "attention_dp_config", "moe_config", "disable_overlap_scheduler", "cuda_graph_config", "scheduler_config")


def _unmodelled(key: str, value: Any, where: str, f: Any, notes: list[str]) -> None:
    """A field of :data:`UNMODELLED` (or each key of ``moe_config``): its default changes nothing
    inferlab models; another value stays unknown, with a note of what it would change."""
    items = {f"{key}.{sub}": item for sub, item in value.items()} if key == "moe_config" else {key: value}
    for name, item in items.items():
        default, what = UNMODELLED.get(name, (None, None))
        if default is not None and str(item).upper() == str(default).upper():
            f.no_effect.append(f"{where}: {name}")
            continue
        f.unknown.append(f"{name}: {item}")
        if what is not None:
            notes.append(f"{where}: {name}: {item}: {what}")


#: TensorRT-LLM's capacity scheduler policies as :attr:`~inferlab.engines.scheduler.SchedulerConfig.reserve_output`
#: (``GUARANTEED_NO_EVICT``, the default, reserves the KV of a request's whole output on
#: admission; ``MAX_UTILIZATION`` admits on what is needed now and pauses requests when the
#: cache fills). ``STATIC_BATCH`` (no new request until the batch ends) is not modelled.
CAPACITY_POLICIES = {"GUARANTEED_NO_EVICT": True, "MAX_UTILIZATION": False}


def _capacity_policy(label: str, value: Any) -> bool:
    text = str(value).upper()
    if text not in CAPACITY_POLICIES:
        raise SpecError(f"trtllm: {label}: {value!r:.40} is not modelled; allowed: {', '.join(CAPACITY_POLICIES)} "
                        "(STATIC_BATCH: estimate a static batch with inferlab estimate)")
    return CAPACITY_POLICIES[text]


def _graph_limit(value: dict, label: str, f: Any, notes: list[str]) -> int:
    """``cuda_graph_config`` as the largest decode batch run from a CUDA graph: the largest of
    ``batch_sizes``, else ``max_batch_size``, else the engine's default (``null``, graphs
    off, is 0: the caller's)."""
    sizes, largest = value.get("batch_sizes") or None, value.get("max_batch_size")  # [] is unset, as TensorRT-LLM reads it
    if sizes is not None and not (isinstance(sizes, list)
                                  and all(isinstance(n, int) and not isinstance(n, bool) and n >= 1 for n in sizes)):
        raise SpecError(f"trtllm: {label}.batch_sizes {sizes!r:.60} is not a list of whole numbers >= 1")
    if largest is not None and largest != 0:
        _typed(f"{label}.max_batch_size", largest, "int")
        if sizes and largest != max(sizes):  # TensorRT-LLM refuses to start with the two disagreeing
            raise SpecError(f"trtllm: {label}: max_batch_size {largest} is not the largest of batch_sizes "
                            f"({max(sizes)}); give one of them")
    limit = max(sizes) if sizes else (largest or TRTLLM_GRAPH_BATCH)
    if sizes and not value.get("enable_padding", False):
        notes.append(f"{label}: without enable_padding only the listed batch sizes run from a CUDA graph; inferlab "
                     f"graphs every decode batch up to {limit}")
    for key in sorted(set(value) - {"batch_sizes", "max_batch_size", "enable_padding"}):
        f.unknown.append(f"cuda_graph_config.{key}: {value[key]}")
    return limit


#: TensorRT-LLM's ``AttentionDpConfig`` defaults (``tensorrt_llm/llmapi/llm_args.py``): balancing
#: off; on, a 50-iteration timeout and 10 iterations' wait for batching.
BALANCE_DEFAULTS = {"enable_balance": False, "timeout_iters": 50, "batching_wait_iters": 10}


def _balance(value: dict, label: str, f: Any) -> int:
    """``attention_dp_config`` as the iterations a new prompt is held for balance (0: off,
    TensorRT-LLM's default); a wait for batching other than 0 (its default 10) is not modelled
    and said so, as are keys inferlab does not know."""
    f.unknown.extend(f"attention_dp_config.{k}: {v}" for k, v in value.items() if k not in BALANCE_DEFAULTS)
    given = {**BALANCE_DEFAULTS, **{k: v for k, v in value.items() if k in BALANCE_DEFAULTS}}
    if not _typed(f"{label}.enable_balance", given["enable_balance"], "bool"):
        return 0
    if given["batching_wait_iters"] != 0:
        f.unknown.append(f"attention_dp_config.batching_wait_iters: {given['batching_wait_iters']} (a wait for batching "
                         "is not modelled: inferlab holds prompts for balance only, as batching_wait_iters 0)")
    timeout = given["timeout_iters"]
    return 0 if timeout == 0 and not isinstance(timeout, bool) else _typed(f"{label}.timeout_iters", timeout, "int")


def _quant(value: dict, values: dict, sources: dict, label: str, f: Any) -> None:
    for sub, item in value.items():
        if sub == "quant_algo" and item is not None:
            values["quant"] = choice(NAME, f"{label}.quant_algo", str(item), QUANT_ALGOS)
            sources["quant"] = f"{label}.quant_algo"
        elif sub == "kv_cache_quant_algo" and item is not None:
            values["kv_quant"] = choice(NAME, f"{label}.kv_cache_quant_algo", str(item), {"fp8": "fp8", "nvfp4": "nvfp4"})
        elif item is not None:
            f.unknown.append(f"quant_config.{sub}: {item}")


def _typed(label: str, value: Any, kind: str) -> Any:
    ok = {"int": isinstance(value, int) and not isinstance(value, bool) and value >= 1,
          "bool": isinstance(value, bool), "text": isinstance(value, str),
          "fraction": isinstance(value, (int, float)) and not isinstance(value, bool) and 0 < value <= 1}[kind]
    if not ok:
        what = {"int": "a whole number >= 1", "bool": "true or false", "text": "text", "fraction": "a number in (0, 1]"}
        raise SpecError(f"trtllm: {label} {value!r} is not {what[kind]}")
    return float(value) if kind == "fraction" else value


def _speculation(value: dict, label: str, f: Any) -> object:
    method = choice(NAME, f"{label}.decoding_type", str(value.get("decoding_type", "")), DECODING)
    k = value.get("num_nextn_predict_layers") if method == "mtp" else value.get("max_draft_len")
    for key in sorted(set(value) - {"decoding_type", "max_draft_len", "num_nextn_predict_layers",
                                    "speculative_model_dir", "speculative_model"}):
        (f.no_effect if key in _SPEC_NO_EFFECT else f.unknown).append(f"speculative_config.{key}")
    # the drafter: speculative_model (a Hub id or a path; 1.x) or speculative_model_dir (earlier)
    drafter = value.get("speculative_model") or value.get("speculative_model_dir")
    return speculation(NAME, label, method, k, drafter, named=value.get("decoding_type"),
                       length="num_nextn_predict_layers" if method == "mtp" else "max_draft_len")


def render(launch: EngineLaunch) -> Rendered:
    """``trtllm-serve`` with its flags and the extra-options YAML as a here-document."""
    import yaml

    backend = "tensorrt" if launch.engine == "trtllm" else "pytorch"
    words = ["trtllm-serve", checkpoint_of(launch), "--backend", backend, "--tp_size", str(launch.tp)]
    missing: list[tuple[str, str]] = []
    for flag, value in (("--pp_size", launch.pp if launch.pp > 1 else None), ("--ep_size", launch.ep if launch.ep > 1 else None),
                        ("--max_batch_size", launch.max_num_seqs), ("--max_num_tokens", launch.max_num_batched_tokens),
                        ("--max_seq_len", launch.max_model_len),
                        ("--kv_cache_free_gpu_memory_fraction", launch.gpu_memory_utilization)):
        if value is not None:
            words += [flag, f"{value:g}" if isinstance(value, float) else str(value)]
    if launch.dp > 1:
        missing.append(("dp", f"{launch.dp} replicas: launch this command {launch.dp} times behind a load balancer"))
    options = _options(launch, missing)
    if options:
        words += ["--extra_llm_api_options", CONFIG_FILE]
    text = yaml.safe_dump(options, sort_keys=False) if options else ""
    notes = ["--kv_cache_free_gpu_memory_fraction is a share of the memory left after weights and activations "
             "(vLLM's --gpu-memory-utilization and SGLang's --mem-fraction-static: of all memory)"] \
        if launch.gpu_memory_utilization is not None else []
    if "quant_config" in options and checkpoint_format(checkpoint_of(launch)) is None:
        algo = options['quant_config']['quant_algo']
        notes.append(f"quant_config {algo}: TensorRT-LLM's PyTorch runtime reads the format from a pre-quantized "
                     "(ModelOpt) checkpoint; point the command at one in that format" if backend == "pytorch" else
                     f"quant_config {algo}: the TensorRT backend quantizes the checkpoint while it builds the engine "
                     "(a calibration pass at start-up); a pre-quantized (ModelOpt) checkpoint skips it")
    return shell_form(NAME, words, {CONFIG_FILE: text} if options else {}, missing, notes)


def _options(launch: EngineLaunch, missing: list) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if launch.attention_dp:
        out["enable_attention_dp"] = True
        timeout = launch.balance_timeout_iters
        if timeout is None:  # the engine's default here: NVIDIA's recipes' balancing
            timeout = default_scheduler("trtllm-pytorch").balance_timeout_iters
        if timeout:  # the balancing the simulation runs (none written: off, the LLM API's default)
            out["attention_dp_config"] = {"enable_balance": True, "batching_wait_iters": 0, "timeout_iters": timeout}
        if launch.attention_tp > 1:
            missing.append(("attention_tp", f"attention ranks of {launch.attention_tp} GPUs: TensorRT-LLM's attention "
                                            "DP runs each GPU as its own rank (attention_tp=1)"))
    if launch.chunked_prefill is not None:
        out["enable_chunked_prefill"] = launch.chunked_prefill
    if launch.state is not None:
        missing.append(("state", f"a {launch.state} linear-attention state: inferlab writes no TensorRT-LLM option "
                                 "for a hybrid model's state format"))
    if launch.mixed_prefill is False:
        missing.append(("mixed_prefill", "prefill iterations without the decodes: TensorRT-LLM's in-flight batching "
                                         "always runs the context requests with the generation ones"))
    if launch.max_prefill_tokens is not None:
        missing.append(("max_prefill_tokens", "a prompt-token limit beside the token budget: TensorRT-LLM has the "
                                              "budget (max_num_tokens) alone"))
    if launch.window_kv is not None and launch.window_kv != default_scheduler("trtllm-pytorch").window_kv:
        missing.append(("window_kv", "windows freed other than the sliding ones: TensorRT-LLM sizes its pools by "
                                     "max_attention_window, which sets the windows themselves, not where they are kept"))
    if launch.window_pool_ratio is not None:
        missing.append(("window_pool_ratio", "a windowed layers' pool of their own (SGLang's --swa-full-tokens-ratio): "
                                             "TensorRT-LLM keeps a pool per window size"))
    if launch.graph_max_batch == 0:
        out["cuda_graph_config"] = None  # CUDA graphs off
    elif launch.graph_max_batch is not None:
        out["cuda_graph_config"] = {"enable_padding": True, "max_batch_size": launch.graph_max_batch}
    if launch.prefill_graph_tokens is not None and launch.engine == "trtllm":
        missing.append(("prefill_graph_tokens", "piecewise CUDA graphs: the PyTorch runtime's (--backend pytorch)"))
    elif launch.prefill_graph_tokens is not None:  # 1.x's spelling (later: prefill_cuda_graph_backend: piecewise)
        out["torch_compile_config"] = {"enable_piecewise_cuda_graph": True,
                                       "capture_num_tokens": trtllm_capture_list(launch.prefill_graph_tokens)}
    if launch.overlap_host is False and launch.engine != "trtllm":
        out["disable_overlap_scheduler"] = True  # on is the PyTorch runtime's default: said by saying nothing
    elif launch.overlap_host and launch.engine == "trtllm":
        missing.append(("overlap_host", "overlap scheduling: disable_overlap_scheduler is the PyTorch runtime's "
                                        "(--backend pytorch); the TensorRT engine runtime is modelled without it"))
    elif launch.overlap_host and launch.speculation and \
            launch.speculation.method in NO_OVERLAP_DRAFTERS[BACKENDS["pytorch"]]:
        missing.append(("overlap_host", "overlap scheduling with an NGram drafter: the PyTorch runtime turns its "
                                        "overlap scheduler off for one (create_py_executor)"))
    if launch.reserve_output is not None:
        policy = next(name for name, reserve in CAPACITY_POLICIES.items() if reserve == launch.reserve_output)
        out["scheduler_config"] = {"capacity_scheduler_policy": policy}
    kv: dict[str, Any] = {}
    if launch.kv_cache in ("fp8", "nvfp4"):
        kv["dtype"] = launch.kv_cache
    elif launch.kv_cache is not None:
        missing.append(("kv_cache", f"a {launch.kv_cache} KV cache other than the model's dtype (kv_cache_config.dtype: "
                                    "auto, fp8, nvfp4); auto written"))
    if launch.prefix_caching is not None:
        kv["enable_block_reuse"] = launch.prefix_caching
    if launch.kv_block_size is not None:
        kv["tokens_per_block"] = launch.kv_block_size
    if kv:
        out["kv_cache_config"] = kv
    if launch.dtype is not None:
        out["dtype"] = DTYPE_NAMES[launch.dtype]
    pair = (launch.weights, launch.activations)
    if pair in _QUANT_NAME:
        out["quant_config"] = {"quant_algo": _QUANT_NAME[pair]}
    elif pair != (None, None):
        missing.append(("weights", f"weights {launch.weights} with activations {launch.activations}: no quant_algo "
                                   "stores them; serve a checkpoint quantized that way (ModelOpt)"))
    spec = launch.speculation
    if spec is not None:
        config: dict[str, Any] = {"decoding_type": _DECODING_NAME[spec.method]}
        config["num_nextn_predict_layers" if spec.method == "mtp" else "max_draft_len"] = spec.k
        if spec.method in ("eagle", "draft", "medusa"):
            config["speculative_model_dir"] = drafter_for(spec)  # 1.0-1.1's field (later: speculative_model)
        out["speculative_config"] = config
    return out
