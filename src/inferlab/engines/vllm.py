"""vLLM's ``vllm serve`` flags, read into an :class:`EngineLaunch` and written from one.

Flag names follow vLLM 0.10-0.11 (``vllm serve MODEL``, or ``python -m
vllm.entrypoints.openai.api_server --model MODEL``); underscores and dashes are the same
(``--max_num_seqs``). Layout rules, from vLLM's parallelism documentation: ``-dp N`` on a
dense model runs N replicas; on a mixture-of-experts model the N ranks run attention
data-parallel while the expert layers span all ``dp x tp`` GPUs, as one tensor-parallel
group or, with ``--enable-expert-parallel``, one expert-parallel group; without ``-dp``,
``--enable-expert-parallel`` spreads the experts over the ``tp`` GPUs.
"""

from __future__ import annotations

import json

from ..errors import SpecError
from .command_line import Command, Spec, choice, read_flags
from .common import (check_quantization, checkpoint_notes, checkpoint_of, DTYPES, drafter_for, eagle3_of, is_moe,
                     known_model, kv_spelling_note, launched_model, read_yaml_mapping, shell_form, source_flags,
                     precision_words, speculation, STATE_DTYPES, state_format, state_words)
from .launch import EngineLaunch, Rendered
from .scheduler import default_scheduler
from .speculation_limits import NO_OVERLAP_DRAFTERS
from .vllm_compile import EAGER, read_compilation, split_compilation

NAME = "vllm"
FLAGS = {
    "--model": Spec("model"), "--tensor-parallel-size": Spec("tp", "int"), "-tp": Spec("tp", "int"),
    "--pipeline-parallel-size": Spec("pp", "int"), "-pp": Spec("pp", "int"),
    "--data-parallel-size": Spec("dp", "int"), "-dp": Spec("dp", "int"),
    "--enable-expert-parallel": Spec("expert_parallel", "on"), "--no-enable-expert-parallel": Spec("expert_parallel", "off"),
    "--max-num-seqs": Spec("max_num_seqs", "int"), "--max-num-batched-tokens": Spec("max_num_batched_tokens", "int"),
    # vLLM before 0.10 took an optional true/false after these two (StoreBoolean); later, switches
    "--enable-chunked-prefill": Spec("chunked_prefill", "bool"), "--no-enable-chunked-prefill": Spec("chunked_prefill", "off"),
    "--kv-cache-dtype": Spec("kv_cache"), "--quantization": Spec("quantization"), "-q": Spec("quantization"),
    "--dtype": Spec("dtype"), "--speculative-config": Spec("speculation"),
    # a hybrid model's SSM state (CacheConfig.mamba_ssm_cache_dtype; auto: the config's, else the model's dtype)
    "--mamba-ssm-cache-dtype": Spec("state"),
    "--gpu-memory-utilization": Spec("gpu_memory_utilization", "fraction"),
    "--enable-prefix-caching": Spec("prefix_caching", "bool"), "--no-enable-prefix-caching": Spec("prefix_caching", "off"),
    "--block-size": Spec("kv_block_size", "int"), "--max-model-len": Spec("max_model_len", "int"),
    "--enforce-eager": Spec("no_graphs", "on"),
    # the scheduler one step ahead of the GPU (vllm PR #19970, v0.10; SchedulerConfig.async_scheduling:
    # "perform async scheduling ... avoid gaps in GPU utilization"), off by default through 0.13, on
    # from v0.14 (vllm PR #27614, inferlab's default); a bool field, so the parser takes the --no- form
    "--async-scheduling": Spec("overlap_host", "on"), "--no-async-scheduling": Spec("overlap_host", "off"),
    # one KV pool where every layer keeps every token (SchedulerConfig.disable_hybrid_kv_cache_manager;
    # the --no- form keeps the hybrid manager, which frees what leaves a sliding window)
    "--disable-hybrid-kv-cache-manager": Spec("window_kv", "on"),
    "--no-disable-hybrid-kv-cache-manager": Spec("window_kv", "off"),
}
#: vLLM turned its hybrid KV-cache manager off beside any KV connector (``VllmConfig.__post_init__``:
#: "Turning off hybrid kv cache manager because `--kv-transfer-config` is set"), later unless
#: ``--no-disable-hybrid-kv-cache-manager`` was given; since vllm PR #41847 (May 2026) it stays on beside
#: a connector that declares ``SupportsHMA``, which NixlConnector does (vllm PR #35758, March 2026).
KV_TRANSFER = "--kv-transfer-config"
#: Connectors beside which the hybrid manager stays on (the others turn it off).
HMA_CONNECTORS = ("NixlConnector",)
NO_EFFECT_VALUE = ("--host", "--port", "--api-key", "--served-model-name", "--uvicorn-log-level", "--tokenizer",
                   "--download-dir", "--chat-template", "--tool-call-parser", "--reasoning-parser", "--seed",
                   "--revision", "--tokenizer-revision", "--load-format", "--root-path", "--ssl-keyfile",
                   "--ssl-certfile", "--allowed-origins", "--max-log-len", "--generation-config", "--tokenizer-mode",
                   "--data-parallel-address", "--data-parallel-rpc-port", "--data-parallel-size-local",
                   "--distributed-executor-backend", "--api-server-count", "--response-role", "--hf-config-path")
NO_EFFECT_SWITCH = ("--trust-remote-code", "--disable-log-requests", "--enable-log-requests", "--disable-log-stats",
                    "--enable-auto-tool-choice", "--disable-uvicorn-access-log", "--disable-fastapi-docs",
                    "--enable-prompt-tokens-details", "--headless")
#: ``--quantization`` -> (weights, activations); None: read from the checkpoint.
QUANTIZATION = {"fp8": ("fp8", "fp8"), "fbgemm_fp8": ("fp8", "fp8"), "ptpc_fp8": ("fp8", "fp8"),
                "modelopt": ("fp8", "fp8"), "modelopt_fp4": ("nvfp4", "nvfp4"), "mxfp4": ("mxfp4", "mxfp4"),
                "awq": ("int4", "bf16"), "awq_marlin": ("int4", "bf16"), "gptq": ("int4", "bf16"),
                "gptq_marlin": ("int4", "bf16"), "compressed-tensors": None}
_QUANT_NAME = {("fp8", "fp8"): "fp8", ("nvfp4", "nvfp4"): "modelopt_fp4", ("mxfp4", "mxfp4"): "mxfp4",
               ("int4", "bf16"): "awq"}
KV_DTYPES = {"auto": None, "fp8": "fp8", "fp8_e4m3": "fp8", "fp8_e5m2": "fp8", "bfloat16": "bf16"}
_KV_NAME = {"fp8": "fp8", "bf16": "bfloat16"}
#: ``--speculative-config`` method -> inferlab's method.
METHODS = {"eagle": "eagle", "eagle3": "eagle", "medusa": "medusa", "mtp": "mtp", "deepseek_mtp": "mtp",
           "ngram": "ngram", "draft_model": "draft"}
_SPEC_KEYS = {"method", "model", "num_speculative_tokens"}
_SPEC_NO_EFFECT = {"prompt_lookup_max", "prompt_lookup_min", "draft_tensor_parallel_size"}


#: ``--block-size`` values vLLM's argument parser takes (its ``choices``; 64 and 128 since
#: vllm PR #11259, 1 in the V1 engine): any other is refused before the server starts.
BLOCK_SIZES = (1, 8, 16, 32, 64, 128)


def _normalize(flag: str) -> str:
    return "--" + flag[2:].replace("_", "-") if flag.startswith("--") else flag


def parse(cmd: Command, words: list[str]) -> EngineLaunch:
    """An :class:`EngineLaunch` from the words after ``vllm serve``."""
    words, notes = _with_config(cmd, words)
    words, compilation = split_compilation(words, _normalize)
    f = read_flags(words, FLAGS, NO_EFFECT_VALUE, NO_EFFECT_SWITCH, NAME, _normalize, unmodelled=(KV_TRANSFER,))
    read_compilation(compilation, f.unknown, f.no_effect, notes)
    model, written, extra, note = launched_model(NAME, f)
    notes = ([note] if note else []) + notes
    tp, pp, dp, ep_on = f.get("tp", 1), f.get("pp", 1), f.get("dp", 1), f.get("expert_parallel", False)
    layout = {"tp": tp, "pp": pp, "dp": dp, "ep": 1, "attention_dp": False}
    if is_moe(model) and dp > 1:  # dp attention ranks of tp GPUs each, the experts over all of them
        layout.update(tp=tp * dp, dp=1, attention_dp=True, attention_tp=tp, ep=tp * dp if ep_on else 1)
    elif is_moe(model) and ep_on:
        layout["ep"] = tp
    elif ep_on:
        f.no_effect.append("--enable-expert-parallel")
    block = f.get("kv_block_size")
    if block is not None and block not in BLOCK_SIZES:
        raise SpecError(f"vllm: {f.flag('kv_block_size')} {block}: vLLM takes "
                        f"{', '.join(map(str, BLOCK_SIZES[:-1]))} or {BLOCK_SIZES[-1]} tokens per KV block")
    seqs, budget = f.get("max_num_seqs"), f.get("max_num_batched_tokens")
    if seqs is not None and budget is not None and budget < seqs and f.get("chunked_prefill") is not False:
        raise SpecError(f"vllm: --max-num-batched-tokens {budget} is below --max-num-seqs {seqs}: vLLM refuses to start "
                        "(each running sequence needs a token of the budget every step); raise the budget or "
                        "lower the sequences")
    if f.get("overlap_host"):
        notes += _async_notes(pp, "speculation" in f.values)
    if f.get("no_graphs"):
        notes.append(f"--enforce-eager: {EAGER}")
    weights = activations = None
    if "quantization" in f.values:
        pair = choice(NAME, f.flag("quantization"), f.get("quantization"), QUANTIZATION)
        if pair is None:
            notes.append("--quantization compressed-tensors: formats from the checkpoint")
        else:
            weights, activations = pair
        if check_quantization(NAME, f.flag("quantization"), f.get("quantization"), weights, model, written, notes):
            weights = activations = None  # the checkpoint's own method: its formats
    if spelling := kv_spelling_note(f):
        notes.append(spelling)
    window_kv, window_flag = _windows(f, model, notes)
    launch = EngineLaunch(
        engine=NAME, model=model, checkpoint=written, **layout, weights=weights, activations=activations,
        kv_cache=choice(NAME, f.flag("kv_cache"), f.get("kv_cache"), KV_DTYPES) if "kv_cache" in f.values else None,
        state=state_format(NAME, f, model, notes, {"auto": None, **STATE_DTYPES}),
        dtype=choice(NAME, f.flag("dtype"), f.get("dtype"), DTYPES) if "dtype" in f.values else None,
        max_num_seqs=f.get("max_num_seqs"), max_num_batched_tokens=f.get("max_num_batched_tokens"),
        chunked_prefill=f.get("chunked_prefill"), gpu_memory_utilization=f.get("gpu_memory_utilization"),
        kv_block_size=f.get("kv_block_size"), max_model_len=f.get("max_model_len"),
        prefix_caching=f.get("prefix_caching"), overlap_host=f.get("overlap_host"), window_kv=window_kv,
        speculation=_speculation(f.get("speculation"), f) if "speculation" in f.values else None,
        unknown=tuple(f.unknown + extra), no_effect=tuple(f.no_effect), notes=tuple(notes))
    sources = {k: v for k, v in source_flags(f, ("quantization", "kv_cache", "state", "dtype")).items()
               if k != "window_kv"}
    if window_flag:
        sources["window_kv"] = window_flag
    if ep_on:
        sources["ep"] = "--enable-expert-parallel"
    if is_moe(model) and dp > 1:  # the layout read from both: tp x dp GPUs, attention data-parallel over dp ranks
        sources["tp"] = f"{f.flag('tp')} x {f.flag('dp')}" if "tp" in f.values else f.flag("dp")
        sources["attention_dp"] = sources.pop("dp")
    return launch.with_sources(**sources)


def _windows(f, model: str | None, notes: list[str]) -> tuple[tuple[str, ...] | None, str | None]:
    """``window_kv`` of the flags and the flag that set it: ``()`` (every layer keeps every token)
    with ``--disable-hybrid-kv-cache-manager``, or for a windowed (or unknown) model with a
    ``--kv-transfer-config`` whose connector is not one of :data:`HMA_CONNECTORS`, unless the
    ``--no-`` form keeps the hybrid manager; None (the engine's) otherwise."""
    off = f.get("window_kv")
    if off:
        return (), f.flag("window_kv")
    transfer = next((entry for entry in f.unknown if entry.split()[0] == KV_TRANSFER), None)
    if transfer is None or off is False or not _windowed(model):
        return None, None
    connectors = _connectors(transfer[len(KV_TRANSFER):])
    if connectors and set(connectors) <= set(HMA_CONNECTORS):
        notes.append(f"{KV_TRANSFER}: read as a release that keeps its hybrid KV-cache manager beside "
                     f"{', '.join(connectors)} (vllm PR #41847, May 2026); earlier ones turn it off, every layer "
                     "keeping every token (--disable-hybrid-kv-cache-manager models them)")
        return None, None
    notes.append(f"{KV_TRANSFER}: vLLM keeps its hybrid KV-cache manager only beside a connector that supports it "
                 f"({', '.join(HMA_CONNECTORS)}, from vllm PR #41847); beside {', '.join(connectors) or 'this connector'} "
                 "every layer keeps every token (sliding windows no longer freed); the transfer itself is not modelled")
    return (), KV_TRANSFER


def _connectors(text: str) -> list[str]:
    """The connectors of a ``--kv-transfer-config`` value (JSON, quotes as the shell left them): its
    ``kv_connector``, or a MultiConnector's children (``kv_connector_extra_config.connectors``)."""
    try:
        value = json.loads(text.strip().strip("'"))
    except ValueError:
        return []
    if not isinstance(value, dict):
        return []
    children = (value.get("kv_connector_extra_config") or {}).get("connectors") \
        if value.get("kv_connector") == "MultiConnector" else None
    if isinstance(children, list):
        return [str(c.get("kv_connector")) for c in children if isinstance(c, dict)]
    return [str(value["kv_connector"])] if value.get("kv_connector") else []


def _windowed(model: str | None) -> bool:
    """Whether ``model`` has layers whose windows vLLM's hybrid manager frees (an unknown model may)."""
    spec = known_model(model)
    return spec is None or spec.kv_share_held_whole(default_scheduler(NAME).window_kv) < 1.0


def _async_notes(pp: int, speculates: bool, how: str = "read as a later release that runs it") -> list[str]:
    """What vLLM 0.10-0.11 says of async scheduling beside pipeline stages or a drafter: its engine
    args refuse both ("Async scheduling is not supported with pipeline-parallel-size > 1",
    "speculative decoding is not supported with async scheduling"); later releases run them
    (vllm PR #31998 a drafter, #32359 pipeline stages), so the command is read as one of those."""
    said = [what for what, on in (("--pipeline-parallel-size > 1", pp > 1), ("--speculative-config", speculates)) if on]
    return [f"--async-scheduling with {' and '.join(said)}: vLLM 0.10-0.11 refuses to start with it; {how} "
            "(overlap scheduling on)"] if said else []


def _with_config(cmd: Command, words: list[str]) -> tuple[list[str], list[str]]:
    """``words`` with the options of ``--config FILE.yaml`` put in, as vLLM's argument parser
    does (its ``load_config_file``, 0.10-0.11): each key a long flag, ``true`` the switch alone,
    ``false`` left out, a list its items; placed before the command line's own flags, which win
    (the docs: "command line > config file values > defaults", a positional model over
    ``model``)."""
    at = next((i for i, w in enumerate(words) if w == "--config" or w.startswith("--config=")), None)
    if at is None:
        return words, []
    word = words[at]
    path = word.partition("=")[2] if "=" in word else (words[at + 1] if at + 1 < len(words) else None)
    if not path:
        raise SpecError("vllm: --config needs a value (a YAML file of vllm serve options)")
    rest = words[:at] + words[at + (1 if "=" in word else 2):]
    options = read_yaml_mapping(NAME, f"--config {path}", path, dict(cmd.files), "vllm serve options")
    head = rest[:1] if rest and not rest[0].startswith("-") else []  # the positional model
    added, notes = [], []
    for key, value in options.items():
        flag = "--" + str(key)
        if key == "model" and head:
            notes.append(f"--config {path}: model {value} gives way to the command line's {head[0]}")
        elif value is False:
            notes.append(f"--config {path}: {key}: false is passed as nothing by vLLM's config reader; "
                         "its default holds (write the no- form, e.g. no-enable-prefix-caching: true)")
        elif value is True:
            added.append(flag)
        elif isinstance(value, list):
            added += [flag, *map(str, value)]
        elif value is not None:
            added += [flag, json.dumps(value) if isinstance(value, dict) else str(value)]
    return head + added + rest[len(head):], notes


def _speculation(text: str, f) -> object:
    where = "--speculative-config"
    try:
        data = json.loads(text)
    except ValueError:
        raise SpecError(f"vllm: {where} {text!r:.80} is not JSON; e.g. "
                        "'{\"method\": \"eagle3\", \"model\": \"REPO\", \"num_speculative_tokens\": 3}'") from None
    if not isinstance(data, dict):
        raise SpecError(f"vllm: {where} must be a JSON object, got {text!r:.80}")
    method = str(data.get("method") or ("draft_model" if data.get("model") else ""))
    method = "mtp" if method.endswith("_mtp") else method
    inferlab_method = choice(NAME, f"{where} method", method, METHODS)
    for key in sorted(set(data) - _SPEC_KEYS):
        (f.no_effect if key in _SPEC_NO_EFFECT else f.unknown).append(f"{where}.{key}")
    return speculation(NAME, where, inferlab_method, data.get("num_speculative_tokens"), data.get("model"),
                       named=method, length="num_speculative_tokens")


def render(launch: EngineLaunch) -> Rendered:
    """``vllm serve`` with the flags of ``launch`` (see :func:`inferlab.engines.launch_command`)."""
    words = ["vllm", "serve", checkpoint_of(launch)]
    missing: list[tuple[str, str]] = []
    moe = is_moe(launch.model)
    if launch.attention_dp:
        if launch.attention_tp > 1:
            words += ["--tensor-parallel-size", str(launch.attention_tp)]
        words += ["--data-parallel-size", str(launch.tp // launch.attention_tp)]
    elif launch.tp > 1:
        words += ["--tensor-parallel-size", str(launch.tp)]
    if launch.ep == launch.tp and launch.tp > 1:
        words.append("--enable-expert-parallel")
    elif launch.ep != 1:
        missing.append(("ep", f"ep={launch.ep} groups under attention DP: vLLM's experts span all {launch.tp} GPUs "
                              f"as one group (ep=1 or ep={launch.tp})" if launch.attention_dp else
                              f"ep={launch.ep} expert groups of {launch.tp // launch.ep} GPUs: vLLM spreads the "
                              f"experts over all {launch.tp} (ep={launch.tp}) or splits each (ep=1)"))
    if launch.pp > 1:
        words += ["--pipeline-parallel-size", str(launch.pp)]
    if launch.dp > 1 and not moe and not launch.attention_dp:
        words += ["--data-parallel-size", str(launch.dp)]
    elif launch.dp > 1:
        missing.append(("dp", f"{launch.dp} replicas of a mixture-of-experts model (-dp means attention DP there): "
                              f"launch this command {launch.dp} times behind a load balancer"))
    words += _precision(launch, missing)
    words += _limits(launch, missing)
    if launch.mixed_prefill is False:
        missing.append(("mixed_prefill", "prefill iterations without the decodes: vLLM always decodes the running "
                                         "requests in the iterations that prefill"))
    if launch.reserve_output:
        missing.append(("reserve_output", "admission only when the KV of the whole output is free: vLLM admits on "
                                          "the prompt and preempts (recomputes) a request when the cache fills"))
    if launch.balance_timeout_iters:
        missing.append(("balance_timeout_iters", "attention-DP balancing (TensorRT-LLM's): vLLM admits each rank's "
                                                 "prompts as they come"))
    if launch.max_prefill_tokens is not None:
        missing.append(("max_prefill_tokens", "a prompt-token limit beside the token budget: vLLM has the budget "
                                              "(--max-num-batched-tokens) alone"))
    if launch.graph_max_batch is not None:
        missing.append(("graph_max_batch", "a largest CUDA-graph decode batch: vLLM sizes its captures from "
                                           "--max-num-seqs (--enforce-eager turns them off)"))
    if launch.prefill_graph_tokens is not None:
        missing.append(("prefill_graph_tokens", "a limit on piecewise-graphed prefill iterations: vLLM runs prefill "
                                                "from its compiled piecewise graphs by default"))
    words += _window_words(launch, missing)
    if launch.speculation is not None:
        words += ["--speculative-config", _speculative_json(launch)]
    if launch.overlap_host is False:  # on is vLLM's default from 0.14: said by saying nothing
        words.append("--no-async-scheduling")
    elif launch.overlap_host and launch.speculation and launch.speculation.method in NO_OVERLAP_DRAFTERS[NAME]:
        missing.append(("overlap_host", f"overlap scheduling with a {launch.speculation.method} drafter: vLLM runs "
                                        "draft-model, n-gram and Medusa drafting without async scheduling"))
    read = any(n.startswith("--async-scheduling with") for n in launch.notes)  # said as read already
    notes = _async_notes(launch.pp, launch.speculation is not None, "written for a later release that runs it") \
        if launch.overlap_host and not read else []
    return shell_form(NAME, words, {}, missing, notes + checkpoint_notes(launch, words))


def _precision(launch: EngineLaunch, missing: list) -> list[str]:
    return (precision_words(launch, missing, _QUANT_NAME, _KV_NAME, "auto, fp8, bfloat16", " (vLLM reads its format)")
            + state_words(launch, "--mamba-ssm-cache-dtype"))


def _limits(launch: EngineLaunch, missing: list) -> list[str]:
    out, budget = [], launch.max_num_batched_tokens
    seqs = launch.max_num_seqs
    if budget is not None and seqs is not None and budget < seqs and launch.chunked_prefill is not False:
        missing.append(("max_num_batched_tokens", f"a token budget of {budget} below {seqs} sequences: vLLM refuses "
                                                  f"to start with it, so the budget is written as {seqs}"))
        budget = seqs
    block = launch.kv_block_size
    if block is not None and block not in BLOCK_SIZES:
        missing.append(("kv_block_size", f"{block} tokens per KV block: vLLM takes "
                                         f"{', '.join(map(str, BLOCK_SIZES))}; left at its default"))
        block = None
    for flag, value in (("--max-num-seqs", seqs), ("--max-num-batched-tokens", budget),
                        ("--gpu-memory-utilization", launch.gpu_memory_utilization),
                        ("--block-size", block), ("--max-model-len", launch.max_model_len)):
        if value is not None:
            out += [flag, f"{value:g}" if isinstance(value, float) else str(value)]
    for on, off, value in (("--enable-chunked-prefill", "--no-enable-chunked-prefill", launch.chunked_prefill),
                           ("--enable-prefix-caching", "--no-enable-prefix-caching", launch.prefix_caching)):
        if value is not None:
            out.append(on if value else off)
    return out


def _window_words(launch: EngineLaunch, missing: list) -> list[str]:
    """``--disable-hybrid-kv-cache-manager`` for ``window_kv=()``; vLLM's own (sliding windows
    freed) said by saying nothing; what else a launch sets, named."""
    if launch.window_pool_ratio is not None:
        missing.append(("window_pool_ratio", "a windowed layers' pool of their own (SGLang's --swa-full-tokens-ratio): "
                                             "vLLM keeps every layer in one pool"))
    if launch.window_kv == ():
        return ["--disable-hybrid-kv-cache-manager"]
    if launch.window_kv is not None and launch.window_kv != default_scheduler(NAME).window_kv:
        missing.append(("window_kv", f"windows freed for {', '.join(launch.window_kv)} attention: vLLM's hybrid "
                                     "KV-cache manager frees sliding windows and keeps chunked layers whole (unless "
                                     "VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE=1 is set)"))
    return []


def _speculative_json(launch: EngineLaunch) -> str:
    spec = launch.speculation
    if spec is None:
        return ""
    name = {"draft": "draft_model", "mtp": "mtp", "ngram": "ngram", "medusa": "medusa"}.get(spec.method)
    if spec.method == "eagle":
        name = "eagle3" if eagle3_of(spec) else "eagle"
    data: dict[str, object] = {"method": name}
    if spec.method in ("draft", "eagle", "medusa"):
        data["model"] = drafter_for(spec)
    data["num_speculative_tokens"] = spec.k
    if spec.method == "ngram":
        data["prompt_lookup_max"] = 4
    return json.dumps(data)
