"""SGLang's ``python -m sglang.launch_server`` flags, read into an :class:`EngineLaunch` and written from one.

Flag names follow SGLang 0.4.10-0.5 (``--tp``/``--tp-size``, ``--dp``/``--dp-size``,
``--ep-size``, ``--enable-dp-attention``...). Layout rules from SGLang's server
arguments: ``--tp N`` is the GPUs of one replica; ``--dp M`` without
``--enable-dp-attention`` runs M replicas, with it M attention data-parallel groups inside
the ``tp`` GPUs; ``--ep-size`` splits the experts inside them. ``--chunked-prefill-size``
is the prefill token budget per iteration (-1: no chunking, the budget then
``--max-prefill-tokens``).
"""

from __future__ import annotations

from ..errors import SpecError
from ..specs.catalog import load_model
from .command_line import Command, Spec, choice, read_flags
from .common import (check_quantization, checkpoint_notes, checkpoint_of, DTYPES, drafter_for, eagle3_of,
                     kv_spelling_note, launched_model, shell_form, source_flags, precision_words, speculation,
                     STATE_DTYPES, state_format, state_words, unmodelled_notes)
from .launch import EngineLaunch, Rendered
from .piecewise_graphs import SGLANG_FLAGS, SGLANG_RULE_FLAGS, sglang_tokens, sglang_words
from .scheduler import WINDOW_KINDS
from .speculation_limits import SPECULATIVE_RESETS

NAME = "sglang"
FLAGS = {
    "--model-path": Spec("model"), "--model": Spec("model"),
    "--tp-size": Spec("tp", "int"), "--tp": Spec("tp", "int"), "--dp-size": Spec("dp", "int"), "--dp": Spec("dp", "int"),
    "--pp-size": Spec("pp", "int"), "--pp": Spec("pp", "int"), "--ep-size": Spec("ep", "int"), "--ep": Spec("ep", "int"),
    "--tensor-parallel-size": Spec("tp", "int"), "--data-parallel-size": Spec("dp", "int"),
    "--pipeline-parallel-size": Spec("pp", "int"), "--expert-parallel-size": Spec("ep", "int"),
    "--moe-a2a-backend": Spec("a2a"), "--enable-deepep-moe": Spec("deepep_moe", "on"),
    "--enable-ep-moe": Spec("ep_moe", "on"), "--enable-dp-attention": Spec("attention_dp", "on"),
    "--chunked-prefill-size": Spec("chunk", "signed"), "--max-prefill-tokens": Spec("max_prefill_tokens", "int"),
    "--max-running-requests": Spec("max_num_seqs", "int"), "--mem-fraction-static": Spec("gpu_memory_utilization", "fraction"),
    "--kv-cache-dtype": Spec("kv_cache"), "--quantization": Spec("quantization"), "--dtype": Spec("dtype"),
    "--speculative-algorithm": Spec("speculation"), "--speculative-num-steps": Spec("spec_steps", "int"),
    "--speculative-eagle-topk": Spec("spec_topk", "int"), "--speculative-num-draft-tokens": Spec("spec_tokens", "int"),
    "--speculative-draft-model-path": Spec("spec_model"), "--disable-radix-cache": Spec("prefix_caching", "off"),
    "--page-size": Spec("kv_block_size", "int"), "--context-length": Spec("max_model_len", "int"),
    "--enable-mixed-chunk": Spec("mixed_prefill", "on"),
    "--cuda-graph-max-bs": Spec("graph_max_batch", "int"), "--disable-cuda-graph": Spec("no_graphs", "on"),
    # "Disable the overlap scheduler, which overlaps the CPU scheduler with GPU model worker" (server
    # arguments; the overlap scheduler is on by default since v0.4)
    "--disable-overlap-schedule": Spec("overlap_host", "off"),
    "--schedule-policy": Spec("schedule_policy"),
    "--mamba-full-memory-ratio": Spec("state_pool_ratio", "positive"),
    "--mamba-scheduler-strategy": Spec("mamba_strategy"),
    "--mamba-ssm-dtype": Spec("state"), "--max-mamba-cache-size": Spec("state_pool_slots", "int"),
    # a windowed model's KV (server arguments: the windowed layers' tokens for each of the full
    # layers', "between 0 and 1", 0.8 by default; or one pool where every layer keeps every token)
    "--swa-full-tokens-ratio": Spec("window_pool_ratio", "fraction"),
    "--disable-hybrid-swa-memory": Spec("window_kv", "on"),
    **SGLANG_FLAGS,  # piecewise CUDA graphs of prefill and mixed iterations
    # the nodes the tp x pp GPUs span: inferlab places them by the hardware's node size, so only checked
    "--nnodes": Spec("nnodes", "int"),
}
NO_EFFECT_VALUE = ("--host", "--port", "--api-key", "--served-model-name", "--log-level", "--log-level-http",
                   "--tokenizer-path", "--random-seed", "--chat-template", "--tool-call-parser", "--reasoning-parser",
                   "--download-dir", "--revision", "--load-format", "--dist-init-addr", "--node-rank",
                   "--nccl-port", "--file-storage-path", "--tokenizer-mode", "--log-requests-level")
NO_EFFECT_SWITCH = ("--trust-remote-code", "--log-requests", "--enable-metrics", "--skip-server-warmup",
                    "--enable-cache-report", "--show-time-cost", "--skip-tokenizer-init")
QUANTIZATION = {"fp8": ("fp8", "fp8"), "w8a8_fp8": ("fp8", "fp8"), "modelopt": ("fp8", "fp8"),
                "modelopt_fp4": ("nvfp4", "nvfp4"), "mxfp4": ("mxfp4", "mxfp4"), "w8a8_int8": ("int8", "int8"),
                "awq": ("int4", "bf16"), "awq_marlin": ("int4", "bf16"), "gptq": ("int4", "bf16"),
                "gptq_marlin": ("int4", "bf16"), "compressed-tensors": None}
_QUANT_NAME = {("fp8", "fp8"): "fp8", ("nvfp4", "nvfp4"): "modelopt_fp4", ("mxfp4", "mxfp4"): "mxfp4",
               ("int8", "int8"): "w8a8_int8", ("int4", "bf16"): "awq"}
KV_DTYPES = {"auto": None, "fp8_e4m3": "fp8", "fp8_e5m2": "fp8", "bf16": "bf16", "bfloat16": "bf16"}
_KV_NAME = {"fp8": "fp8_e4m3", "bf16": "bf16"}
ALGORITHMS = {"eagle": "eagle", "eagle3": "eagle", "nextn": "mtp", "standalone": "draft", "ngram": "ngram",
              "lookahead": "ngram"}
#: Default chunk size written when chunked prefill is on with no budget given (SGLang's default).
DEFAULT_CHUNK = 8192
_KERNELS = ("attention kernels; inferlab times attention with efficiencies fitted per GPU (and engine, where "
            "measured), not per backend: another backend's speed is not modelled")
#: Flags that change speed in ways inferlab does not model: kept unknown, with what they would change
#: (server arguments: --enable-torch-compile "Optimize the model with torch.compile. Experimental
#: feature.", applied to decode batches up to --torch-compile-max-bs, 32 by default).
#: ``--mamba-scheduler-strategy``: state slots a running request takes with the radix cache on and
#: whether the overlap scheduler stays on (kv_cache_configurator: the cap of 3 slots a request,
#: ``MAMBA_CACHE_V2_ADDITIONAL_RATIO_OVERLAP`` 2 more for extra_buffer's ping-pong states with
#: overlap, ``..._NO_OVERLAP`` 1 without; ``no_buffer`` "does not support overlap scheduler").
MAMBA_STRATEGIES = {"auto": (3, False), "no_buffer": (3, False), "extra_buffer": (5, True)}
UNMODELLED = {
    "--attention-backend": f"the backend of the {_KERNELS}",
    "--prefill-attention-backend": f"the backend of the prefill {_KERNELS}",
    "--decode-attention-backend": f"the backend of the decode {_KERNELS}",
    "--enable-torch-compile": "torch.compile of the decode batches up to --torch-compile-max-bs (32 by default): "
                              "fused kernels whose speed is not measured; the steps are simulated without it",
}
#: ``--schedule-policy`` (SGLang's default fcfs, inferlab's order): how the others order the
#: waiting requests (schedule_policy.py: lpm and dfs-weight are cache-aware and run as fcfs when the
#: radix cache is off; lpm runs as fcfs too while more than 128 requests wait).
SCHEDULE_POLICIES = {
    "lpm": "by the longest prefix already in the radix cache (first come, first served again while more than 128 "
           "wait)",
    "dfs-weight": "by a depth-first walk of the radix tree, weighted by the waiting requests under each node",
    "lof": "with the longest output first", "random": "at random", "priority": "by the priority each request carries",
    "routing-key": "by how often their routing key is in the running batch",
}


def parse(cmd: Command, words: list[str]) -> EngineLaunch:
    """An :class:`EngineLaunch` from the words after ``python -m sglang.launch_server``."""
    f = read_flags(words, FLAGS, NO_EFFECT_VALUE, NO_EFFECT_SWITCH, NAME, _abbreviation,
                   unmodelled=(*UNMODELLED, *SGLANG_RULE_FLAGS))  # read by their names and values
    model, written, extra, note = launched_model(NAME, f)
    notes = [note] if note else []
    tp, dp, attention_dp, attention_tp = f.get("tp", 1), f.get("dp", 1), f.get("attention_dp", False), 1
    ep = tp if f.get("ep_moe") else f.get("ep", 1)
    # --enable-deepep-moe (SGLang 0.4.x; later an alias of --moe-a2a-backend deepep) sets ep_size = tp_size too
    a2a = "deepep" if f.get("deepep_moe") and "a2a" not in f.values else str(f.get("a2a", "none")).lower()
    if a2a not in ("none", ""):  # SGLang's server args set ep_size = tp_size for an all-to-all MoE backend
        ep = tp
        how = "--enable-deepep-moe" if "a2a" not in f.values else f"--moe-a2a-backend {a2a}"
        notes.append(f"{how}: SGLang sets the expert-parallel size to --tp ({tp})")
    if attention_dp:
        if tp % dp:
            raise SpecError(f"sglang: --tp {tp} with --dp {dp} --enable-dp-attention: SGLang requires the tensor-"
                            f"parallel size to divide by the DP size; give a --dp that divides {tp}")
        attention_tp, ranks, dp = tp // dp, dp, 1  # --dp attention ranks of tp / dp GPUs each
        if ranks == 1 and tp > 1:  # one rank of all the GPUs: the heads split over them, as without the flag
            attention_dp, attention_tp = False, 1
            notes.append(f"--enable-dp-attention with --dp 1: one attention rank of all {tp} GPUs, which is "
                         "tensor-parallel attention (give --dp for several ranks)")
    chunk, chunked, budget, prompts = f.get("chunk"), None, None, None
    if chunk is not None and chunk <= 0:
        chunked, budget = False, f.get("max_prefill_tokens")
    else:
        chunked, budget = (True, chunk) if chunk is not None else (None, None)
        prompts = f.get("max_prefill_tokens")  # with chunking: the prompt tokens an iteration stops taking at
    mixed = f.get("mixed_prefill")
    if mixed and chunked is False:  # SGLang: is_mixed_chunk = chunked_prefill_size is not None and enable_mixed_chunk
        mixed = False
        notes.append("--enable-mixed-chunk with --chunked-prefill-size -1: SGLang mixes the decodes into chunked "
                     "prefill batches only, so a whole prompt's prefill batch runs without them")
    pair = choice(NAME, f.flag("quantization"), f.get("quantization"), QUANTIZATION) if "quantization" in f.values \
        else (None, None)
    if "quantization" in f.values and check_quantization(NAME, f.flag("quantization"), f.get("quantization"),
                                                         (pair or (None, None))[0], model, written, notes):
        pair = None  # the checkpoint's own method: its formats
    graphs = 0 if f.get("no_graphs") else f.get("graph_max_batch")  # --disable-cuda-graph: no decode batch graphed
    if spelling := kv_spelling_note(f):
        notes.append(spelling)
    slots, hybrid_overlap = (None, None)
    if "mamba_strategy" in f.values:
        slots, hybrid_overlap = choice(NAME, f.flag("mamba_strategy"), f.get("mamba_strategy"), MAMBA_STRATEGIES)
        if hybrid_overlap and f.get("overlap_host") is False:  # extra_buffer without overlap: one ping-pong slot
            slots = 4
    _schedule_policy(f, notes)
    window_kv, window_ratio = _windows(f, notes)
    pieces, pieces_flag = sglang_tokens(f, model, chunk, DEFAULT_CHUNK, notes, a2a)
    notes += unmodelled_notes(f.unknown, UNMODELLED)
    pp = f.get("pp", 1)
    if f.get("nnodes", 1) > tp * pp:
        raise SpecError(f"sglang: --nnodes {f.get('nnodes')} is more nodes than the {tp * pp} GPUs of --tp {tp} x "
                        f"--pp {pp} (each node runs a share of them)")
    launch = EngineLaunch(
        engine=NAME, model=model, checkpoint=written, tp=tp, pp=pp, ep=ep, dp=dp, attention_dp=attention_dp,
        attention_tp=attention_tp, weights=(pair or (None, None))[0], activations=(pair or (None, None))[1],
        kv_cache=choice(NAME, f.flag("kv_cache"), f.get("kv_cache"), KV_DTYPES) if "kv_cache" in f.values else None,
        state=state_format(NAME, f, model, notes, STATE_DTYPES),
        dtype=choice(NAME, f.flag("dtype"), f.get("dtype"), DTYPES) if "dtype" in f.values else None,
        max_num_seqs=f.get("max_num_seqs"), max_num_batched_tokens=budget, max_prefill_tokens=prompts,
        chunked_prefill=chunked,
        mixed_prefill=mixed, graph_max_batch=graphs, prefill_graph_tokens=pieces,
        gpu_memory_utilization=f.get("gpu_memory_utilization"), kv_block_size=f.get("kv_block_size"),
        max_model_len=f.get("max_model_len"), prefix_caching=f.get("prefix_caching"),
        overlap_host=f.get("overlap_host"), state_pool_ratio=f.get("state_pool_ratio"),
        state_pool_slots=f.get("state_pool_slots"), state_slots=slots,
        hybrid_overlap=hybrid_overlap, window_kv=window_kv, window_pool_ratio=window_ratio,
        speculation=_speculation(f, notes, model) if "speculation" in f.values else None,
        unknown=tuple(f.unknown + extra), no_effect=tuple(f.no_effect) + (("--nnodes",) if "nnodes" in f.values else ()),
        notes=tuple(notes))
    sources = source_flags(f, ("quantization", "kv_cache", "state", "dtype"))
    if chunk is not None:
        sources.update(chunked_prefill="--chunked-prefill-size", max_num_batched_tokens="--chunked-prefill-size",
                       max_num_tokens="--chunked-prefill-size")
    if "mixed_prefill" in f.values:
        sources["mixed_prefill"] = "--enable-mixed-chunk"
    if prompts is not None:
        sources["max_prefill_tokens"] = "--max-prefill-tokens"
    if graphs is not None:
        sources["graph_max_batch"] = "--disable-cuda-graph" if f.get("no_graphs") else "--cuda-graph-max-bs"
    if pieces_flag is not None:
        sources["prefill_graph_tokens"] = pieces_flag
    if slots is not None:
        sources.update(state_slots="--mamba-scheduler-strategy", hybrid_overlap="--mamba-scheduler-strategy")
    if window_kv == ():  # the ratio sizes nothing beside it (a note says so)
        sources.pop("window_pool_ratio", None)
    return launch.with_sources(**sources)


def _windows(f, notes: list[str]) -> tuple[tuple[str, ...] | None, float | None]:
    """``window_kv`` and ``window_pool_ratio`` of the flags: ``()`` with ``--disable-hybrid-swa-memory``
    (one pool, every layer keeping every token), which leaves ``--swa-full-tokens-ratio`` nothing to size."""
    ratio = f.get("window_pool_ratio")
    if not f.get("window_kv"):
        return None, ratio
    if ratio is not None:
        notes.append(f"--swa-full-tokens-ratio {ratio:g} with --disable-hybrid-swa-memory: one pool where every layer "
                     "keeps every token, so the ratio sizes nothing")
    return (), None


def _schedule_policy(f, notes: list[str]) -> None:
    """``--schedule-policy``: fcfs (or a cache-aware policy without the radix cache, which SGLang
    runs as fcfs) changes nothing inferlab models; the others order the waiting requests otherwise,
    which is not modelled: unknown, with how."""
    if "schedule_policy" not in f.values:
        return
    policy = str(f.get("schedule_policy"))  # argparse choices: case as written (FCFS is refused)
    if policy == "fcfs" or policy in ("lpm", "dfs-weight") and f.get("prefix_caching") is False:
        f.no_effect.append(f"--schedule-policy {policy}")
        return
    if policy not in SCHEDULE_POLICIES:  # SGLang's parser takes these choices only
        raise SpecError(f"sglang: --schedule-policy {policy!r:.40} is not one of SGLang's: fcfs, "
                        f"{', '.join(SCHEDULE_POLICIES)}")
    how = SCHEDULE_POLICIES[policy]
    f.unknown.append(f"--schedule-policy {policy}")
    same = " (the same order where no prompts share a prefix)" if policy == "lpm" else ""
    notes.append(f"--schedule-policy {policy}: SGLang orders the waiting requests {how}; inferlab admits them first "
                 f"come, first served{same}")


def _abbreviation(flag: str) -> str:
    """The flag a unique prefix stands for (SGLang's argparse takes ``--mem-fraction`` for
    ``--mem-fraction-static``); any other flag as written."""
    names = (*FLAGS, *NO_EFFECT_VALUE, *NO_EFFECT_SWITCH)
    if not flag.startswith("--") or flag in names:
        return flag
    longer = [n for n in names if n.startswith(flag)]
    return longer[0] if len(longer) == 1 else flag


def _speculation(f, notes: list[str], model: str) -> object:
    where = f.flag("speculation")
    method = choice(NAME, where, f.get("speculation"), ALGORITHMS)
    steps, topk, tokens = f.get("spec_steps"), f.get("spec_topk", 1), f.get("spec_tokens")
    # a chain drafts num_draft_tokens - 1 tokens; a tree (topk > 1) is num_steps deep, its
    # num_draft_tokens the tree's nodes verified together, not the tokens one request can gain
    k = steps if topk > 1 and steps is not None else tokens - 1 if tokens is not None else steps
    if k is None:
        k = 0  # refused below with the flags to give
        where = "--speculative-num-steps or --speculative-num-draft-tokens"
    if topk > 1:
        notes.append(f"--speculative-eagle-topk {topk}: tree drafting read as a chain of its depth, {k} drafts "
                     f"(--speculative-num-steps; the tree's {tokens or '?'} nodes are verified together)")
    elif steps is not None and tokens is not None and tokens != steps + 1:
        notes.append(f"--speculative-num-draft-tokens {tokens} with --speculative-num-steps {steps}: k={k} "
                     "(the tokens verified per step, less one)")
    head = str(f.get("spec_model") or "").lower()
    if method == "eagle" and "nextn" in head:  # SGLang's DeepSeek recipe: EAGLE with the NextN (MTP) weights
        notes.append(f"{where} {f.get('speculation')} with the NextN head {f.get('spec_model')}: the model's own "
                     "multi-token prediction module (read as mtp)")
        return speculation(NAME, where, "mtp", k, f.get("spec_model"))
    if method == "eagle" and not head and load_model(model).num_mtp_layers:
        # SGLang's server args: EAGLE (NEXTN) on a DeepseekV3ForCausalLM with no draft path drafts
        # with the model's own checkpoint, its NextN (MTP) layers
        notes.append(f"{where} {f.get('speculation')} with no --speculative-draft-model-path on {model}: SGLang "
                     "drafts with the model's own multi-token prediction layers (read as mtp)")
        return speculation(NAME, where, "mtp", k, None)
    return speculation(NAME, where, method, k, f.get("spec_model"), named=f.get("speculation"))


def render(launch: EngineLaunch) -> Rendered:
    """``python -m sglang.launch_server`` with the flags of ``launch``."""
    words = ["python", "-m", "sglang.launch_server", "--model-path", checkpoint_of(launch), "--tp", str(launch.tp)]
    missing: list[tuple[str, str]] = []
    if launch.attention_dp:
        words += ["--dp", str(launch.tp // launch.attention_tp), "--enable-dp-attention"]
    if launch.dp > 1 and launch.attention_dp:
        missing.append(("dp", f"{launch.dp} replicas next to attention DP: launch this command {launch.dp} times "
                              "behind a router"))
    elif launch.dp > 1:
        words += ["--dp", str(launch.dp)]
    if launch.ep > 1:
        words += ["--ep-size", str(launch.ep)]
    if launch.pp > 1:
        words += ["--pp-size", str(launch.pp)]
    words += _precision(launch, missing) + _limits(launch, missing)
    if launch.speculation is not None:
        words += _speculation_words(launch, missing)
    return shell_form(NAME, words, {}, missing, checkpoint_notes(launch, words))


def _precision(launch: EngineLaunch, missing: list) -> list[str]:
    return (precision_words(launch, missing, _QUANT_NAME, _KV_NAME, "auto, fp8_e4m3, bf16", "")
            + state_words(launch, "--mamba-ssm-dtype"))


def _limits(launch: EngineLaunch, missing: list) -> list[str]:
    out = []
    if launch.chunked_prefill is False:
        out += ["--chunked-prefill-size", "-1"]
        if launch.max_num_batched_tokens is not None:
            out += ["--max-prefill-tokens", str(launch.max_num_batched_tokens)]
        if launch.max_prefill_tokens is not None:
            missing.append(("max_prefill_tokens", "a prompt-token limit beside a whole-prompt budget: without "
                                                  "chunking SGLang's --max-prefill-tokens is the budget"))
    elif launch.max_num_batched_tokens is not None or launch.chunked_prefill:
        out += ["--chunked-prefill-size", str(launch.max_num_batched_tokens or DEFAULT_CHUNK)]
        if launch.chunked_prefill is None:
            missing.append(("chunked_prefill", "the engine default for chunking: a chunk size turns it on"))
        elif launch.max_num_batched_tokens is None:
            missing.append(("max_num_batched_tokens", f"chunking without a size: SGLang's default {DEFAULT_CHUNK} "
                                                      "written"))
    if launch.chunked_prefill is not False and launch.max_prefill_tokens is not None:
        out += ["--max-prefill-tokens", str(launch.max_prefill_tokens)]
    for flag, value in (("--max-running-requests", launch.max_num_seqs),
                        ("--mem-fraction-static", launch.gpu_memory_utilization),
                        ("--page-size", launch.kv_block_size), ("--context-length", launch.max_model_len)):
        if value is not None:
            out += [flag, f"{value:g}" if isinstance(value, float) else str(value)]
    if launch.graph_max_batch == 0:
        out.append("--disable-cuda-graph")
    elif launch.graph_max_batch is not None:
        out += ["--cuda-graph-max-bs", str(launch.graph_max_batch)]
    out += sglang_words(launch)
    if launch.reserve_output:
        missing.append(("reserve_output", "admission only when the KV of the whole output is free: SGLang admits on "
                                          "an estimate of the outputs and retracts requests when the cache fills"))
    if launch.balance_timeout_iters:
        missing.append(("balance_timeout_iters", "attention-DP balancing (TensorRT-LLM's): SGLang admits each rank's "
                                                 "prompts as they come"))
    if launch.mixed_prefill and launch.chunked_prefill is False:
        missing.append(("mixed_prefill", "decodes in a whole prompt's prefill batch: SGLang's --enable-mixed-chunk "
                                         "mixes them into chunked prefill batches only"))
    elif launch.mixed_prefill:
        out.append("--enable-mixed-chunk")
    if launch.overlap_host is False:
        out.append("--disable-overlap-schedule")
    elif launch.overlap_host and launch.speculation and launch.speculation.method in SPECULATIVE_RESETS[NAME]:
        missing.append(("overlap_host", "overlap scheduling with an EAGLE, NEXTN or STANDALONE drafter: SGLang "
                                        "turns its overlap scheduler off for one (server_args, unless "
                                        "SGLANG_ENABLE_SPEC_V2)"))
    if launch.state_pool_ratio is not None:
        out += ["--mamba-full-memory-ratio", f"{launch.state_pool_ratio:g}"]
    if launch.state_pool_slots is not None:
        out += ["--max-mamba-cache-size", str(launch.state_pool_slots)]
    strategy = {(3, False): "no_buffer", (5, True): "extra_buffer", (4, True): "extra_buffer"}
    if launch.state_slots is not None or launch.hybrid_overlap is not None:
        pair = (launch.state_slots or 3, bool(launch.hybrid_overlap))
        if pair in strategy:
            out += ["--mamba-scheduler-strategy", strategy[pair]]
        else:
            missing.append(("state_slots", f"{pair[0]} state slots a request with the overlap scheduler "
                                           f"{'on' if pair[1] else 'off'}: no --mamba-scheduler-strategy gives it"))
    out += _window_words(launch, missing)
    if launch.prefix_caching is False:
        out.append("--disable-radix-cache")
    elif launch.prefix_caching:
        missing.append(("prefix_caching", "prefix caching asked for explicitly: the radix cache is on by default"))
    return out


def _window_words(launch: EngineLaunch, missing: list) -> list[str]:
    """``--disable-hybrid-swa-memory`` for ``window_kv=()``, ``--swa-full-tokens-ratio`` for the ratio."""
    kinds, ratio = launch.window_kv, launch.window_pool_ratio
    if kinds == ():
        if ratio is not None:
            missing.append(("window_pool_ratio", "a windowed layers' pool beside one where every layer keeps every "
                                                 "token: --disable-hybrid-swa-memory leaves the ratio nothing to size"))
        return ["--disable-hybrid-swa-memory"]
    if kinds is not None and kinds != WINDOW_KINDS:
        missing.append(("window_kv", f"windows freed for {', '.join(kinds)} attention only: SGLang keeps every "
                                     "windowed kind in its windowed layers' pool, or none (--disable-hybrid-swa-memory)"))
    return [] if ratio is None else ["--swa-full-tokens-ratio", f"{ratio:g}"]


def _speculation_words(launch: EngineLaunch, missing: list) -> list[str]:
    spec = launch.speculation
    if spec is None or spec.method == "medusa":
        missing.append(("speculation", "Medusa heads (SGLang drafts with EAGLE, NEXTN, STANDALONE or NGRAM)"))
        return []
    if spec.method == "eagle":
        algorithm = "EAGLE3" if eagle3_of(spec) else "EAGLE"
    else:
        algorithm = {"mtp": "NEXTN", "draft": "STANDALONE", "ngram": "NGRAM"}[spec.method]
    out = ["--speculative-algorithm", algorithm]
    if spec.method in ("eagle", "draft"):
        out += ["--speculative-draft-model-path", drafter_for(spec)]
    elif spec.drafter:
        out += ["--speculative-draft-model-path", spec.drafter]
    if spec.method != "ngram":
        out += ["--speculative-num-steps", str(spec.k), "--speculative-eagle-topk", "1"]
    return out + ["--speculative-num-draft-tokens", str(spec.k + 1)]
