"""Piecewise CUDA graphs of prefill and mixed iterations in the engines' options, read into
``prefill_graph_tokens`` (:class:`~inferlab.engines.scheduler.SchedulerConfig`) and written back.

SGLang (server arguments; docs, advanced_features/piecewise_cuda_graph): ``--enable-piecewise-cuda-graph``
turns them on (opt-in in earlier releases; deprecated in later ones, which turn them on by default
"for supported configurations", sglang PR #16331), ``--enforce-piecewise-cuda-graph`` too (skipping
the auto-disable conditions, :data:`SGLANG_RULE_FLAGS`), ``--disable-piecewise-cuda-graph`` off, and
``--piecewise-cuda-graph-max-tokens N`` is the largest iteration captured. Which release turned them
on by default is not established here, so inferlab's SGLang runs prefill eagerly unless a command
turns them on. TensorRT-LLM's PyTorch runtime: ``torch_compile_config: {enable_piecewise_cuda_graph:
true, capture_num_tokens: [...]}`` (1.x docs, "Torch Compile & Piecewise CUDA Graph") or, in later
releases, ``prefill_cuda_graph_backend: piecewise`` with ``prefill_capture_num_tokens``: the largest
listed number of tokens (none listed: the decode CUDA graphs' batch sizes, :func:`trtllm_default_tokens`).
"""

from __future__ import annotations

from typing import Any

from ..errors import SpecError
from .command_line import Spec
from .common import known_model
from .launch import EngineLaunch

#: SGLang's flags, as :func:`~inferlab.engines.command_line.read_flags` reads them.
SGLANG_FLAGS = {"--enable-piecewise-cuda-graph": Spec("piecewise_on", "on"),
                "--enforce-piecewise-cuda-graph": Spec("piecewise_enforced", "on"),
                "--disable-piecewise-cuda-graph": Spec("piecewise_off", "on"),
                "--piecewise-cuda-graph-max-tokens": Spec("piecewise_tokens", "int")}
#: SGLang's largest captured iteration for a model on an MLA backend when
#: ``--piecewise-cuda-graph-max-tokens`` is not given; other models' is the chunked-prefill size.
#: SGLang docs, advanced_features/piecewise_cuda_graph, server arguments: "Defaults to
#: chunked_prefill_size (non-MLA) or 2048 (MLA)"; server_args.py ``_handle_gpu_memory_settings``
#: ("Refer to pr #15927 ... For MLA backend ... we set the max tokens to 2048 by default"). Releases
#: before sglang PR #15700 (2025-12-23: "--piecewise-cuda-graph-max-tokens == --chunk-prefill-size
#: ... we should use this default setting") captured up to 4,096 tokens for every model.
SGLANG_MLA_TOKENS = 2048
# TensorRT-LLM's capture list, where piecewise graphs are on and none is given, is its decode CUDA
# graphs' batch sizes (tensorrt_llm/_torch/pyexecutor/model_engine.py at NVIDIA/TensorRT-LLM
# 1a0dc5f7: "torch_compile_piecewise_cuda_graph_num_tokens or cuda_graph_batch_sizes or []"; later
# releases the same for prefill_capture_num_tokens: "if prefill_cuda_graph_num_tokens is None: ... =
# cuda_graph_batch_sizes or []"): up to cuda_graph_config's largest batch, 128 by default, none with
# cuda_graph_config: null (:func:`trtllm_default_tokens`). The docs' list ending at 3,072 is an example.

#: SGLang's auto-disable rules for piecewise CUDA graphs (server_args.py ``_handle_piecewise_cuda_graph``,
#: read at AjAnubolu/sglang 4c1ce863 and BBuf/sglang 0a6356ae, forks of sgl-project/sglang; the same
#: conditions in ``_disable_tc_piecewise_cudagraph_if_incompatible`` at sgl-project/sglang 001067ff).
#: ``--enforce-piecewise-cuda-graph`` returns before them ("Skip auto-disable when enforce flag is set
#: (for testing)"). Without it the graphs are off with ``enable_dp_attention``, ``pp_size > 1``,
#: ``moe_a2a_backend != "none"`` (DeepEP included), LoRA (``lora_paths`` or ``enable_lora``), a
#: multimodal model, an architecture on ``piecewise_cuda_graph_disabled_model_archs``, and the flags
#: below. Plain expert parallelism (``--ep`` without an all-to-all backend) is no rule in the versions
#: read (sglang PR #14164, "EP Support for Piecewise Cuda Graph", 2025-11-30). Speculative decoding was one until
#: sglang PR #22128 (2026-04-17, "Allow piecewise CUDA graph with speculative decoding"): read as a
#: release after it, with a note. Rules on hardware (non-CUDA), GGUF, diffusion LLMs, context parallel
#: and CUDA-graph debugging are left out: inferlab reads none of what they key on.
SGLANG_RULE_FLAGS = {"--enable-lora": "LoRA", "--lora-paths": "LoRA", "--enable-torch-compile": "torch.compile",
                     "--disaggregation-mode": "PD disaggregation", "--enable-hierarchical-cache": "the hierarchical "
                     "cache", "--cpu-offload-gb": "CPU offload", "--enable-deterministic-inference": "deterministic "
                     "inference", "--enable-symm-mem": "symmetric memory", "--enable-eplb": "the expert-distribution "
                     "recorder (EPLB)", "--expert-distribution-recorder-mode": "the expert-distribution recorder"}
#: Values of those flags that turn nothing on (``disaggregation_mode`` "null", ``cpu_offload_gb`` 0).
_RULE_OFF = {"--disaggregation-mode": ("null",), "--cpu-offload-gb": ("0",)}
#: SGLang's ``multimodal_model_archs`` (configs/model_config.py) that catalog checkpoints run as.
SGLANG_MULTIMODAL = frozenset({"Gemma3ForConditionalGeneration", "Llama4ForConditionalGeneration",
                               "Qwen2_5_VLForConditionalGeneration", "Qwen3_5MoeForConditionalGeneration",
                               "MllamaForConditionalGeneration", "Mistral3ForConditionalGeneration"})
#: Catalog models whose card lists the language model's architecture alone, their checkpoint's
#: being multimodal: qwen2.5-vl-7b (Qwen2ForCausalLM on the card, Qwen2_5_VLForConditionalGeneration in
#: the config.json of Qwen/Qwen2.5-VL-7B-Instruct).
MULTIMODAL_CHECKPOINTS = frozenset({"qwen2.5-vl-7b"})
#: SGLang's ``piecewise_cuda_graph_disabled_model_archs`` (configs/model_config.py).
SGLANG_NO_PIECEWISE = frozenset({"DeepseekV32ForCausalLM", "Qwen3NextForCausalLM", "GlmMoeDsaForCausalLM",
                                 "BailingMoeV2_5ForCausalLM", "LLaDAModelLM"})


def sglang_tokens(f: Any, model: str, chunk: int | None, default_chunk: int, notes: list[str],
                  a2a: str = "none") -> tuple[int | None, str | None]:
    """``prefill_graph_tokens`` of SGLang's flags ``f`` and the flag that set it ((None, None):
    none given; ``--enforce-piecewise-cuda-graph`` wherever given, so that it is written back).
    ``chunk``: ``--chunked-prefill-size`` as given (None: unset, SGLang sizing it by the GPU's
    memory, read as ``default_chunk``); ``a2a``: the MoE all-to-all backend read. Without enforce,
    a configuration SGLang turns the graphs off for (:data:`SGLANG_RULE_FLAGS`) reads as eager."""
    on = f.get("piecewise_on") or f.get("piecewise_enforced")
    flag = next((f.flag(k) for k in ("piecewise_off", "piecewise_enforced", "piecewise_on") if k in f.values), None)
    given = f.get("piecewise_tokens")
    if f.get("piecewise_off"):
        notes.append("--disable-piecewise-cuda-graph: prefill and mixed iterations run eagerly (later SGLang releases "
                     "turn piecewise CUDA graphs on by default; this flag turns them off)")
        return None, flag
    if not on:
        if given is not None:
            notes.append(f"--piecewise-cuda-graph-max-tokens {given} alone: it takes effect where piecewise CUDA graphs "
                         "are on (later SGLang releases by default, earlier ones with --enable-piecewise-cuda-graph); "
                         "inferlab runs SGLang's prefill eagerly unless a flag turns them on: read as eager")
        return None, None
    rules = _disabling(f, model, a2a)
    if rules and not f.get("piecewise_enforced"):
        notes.append(f"{flag} with {'; '.join(rules)}: SGLang turns piecewise CUDA graphs off there (server_args "
                     "_handle_piecewise_cuda_graph; --enforce-piecewise-cuda-graph skips its rules): read as eager")
        return None, flag
    if rules:
        notes.append(f"{flag} with {'; '.join(rules)}: SGLang skips the rules that would turn piecewise CUDA graphs "
                     "off (for testing): read as on")
    if "speculation" in f.values and not f.get("piecewise_enforced"):
        notes.append(f"{flag} with {f.flag('speculation')}: SGLang releases before PR #22128 turn piecewise CUDA "
                     "graphs off beside speculative decoding; later ones keep them for the target's prefill: read as on")
    source = "--enforce-piecewise-cuda-graph" if f.get("piecewise_enforced") else None
    if given is not None:
        return given, source or "--piecewise-cuda-graph-max-tokens"
    if _mla(model):
        notes.append(f"{flag} on an MLA model: SGLang captures iterations of up to {SGLANG_MLA_TOKENS:,} tokens "
                     "(its default for MLA backends)")
        return SGLANG_MLA_TOKENS, flag
    if chunk is not None and chunk <= 0:
        notes.append(f"{flag} with --chunked-prefill-size {chunk}: SGLang's default capture size is the chunk size, "
                     "so no prefill iteration is captured: read as eager (give --piecewise-cuda-graph-max-tokens)")
        return None, None
    if chunk is None:
        notes.append(f"{flag}: SGLang captures iterations of up to its chunked-prefill size, which it sizes by the "
                     f"GPU's memory when --chunked-prefill-size is not given: read as {default_chunk:,} (H100 and "
                     "H200 class); give --piecewise-cuda-graph-max-tokens or --chunked-prefill-size to pin it")
        return default_chunk, flag
    return chunk, flag


def _disabling(f: Any, model: str, a2a: str) -> list[str]:
    """The configurations in ``f`` (and ``model``) SGLang turns piecewise CUDA graphs off for."""
    rules = [text for on, text in ((f.get("attention_dp"), "--enable-dp-attention (DP attention)"),
                                   (f.get("pp", 1) > 1, f"--pp-size {f.get('pp', 1)} (pipeline parallelism)"),
                                   (a2a not in ("none", ""), f"the MoE all-to-all backend {a2a}")) if on]
    for word in f.unknown:
        name, _, value = word.partition(" ")
        if name in SGLANG_RULE_FLAGS and value.strip().lower() not in _RULE_OFF.get(name, ()):
            rules.append(f"{name} ({SGLANG_RULE_FLAGS[name]})")
    return list(dict.fromkeys(rules + _model_rules(model)))


def _model_rules(model: str) -> list[str]:
    """SGLang's rules on ``model`` itself: an architecture it never graphs piecewise, a multimodal one."""
    from ..specs.catalog import architectures

    archs = frozenset(architectures(model))
    if archs & SGLANG_NO_PIECEWISE:
        return [f"{model} ({', '.join(sorted(archs & SGLANG_NO_PIECEWISE))}, an architecture SGLang never graphs "
                "piecewise)"]
    multimodal = archs & SGLANG_MULTIMODAL or str(model).lower() in MULTIMODAL_CHECKPOINTS
    return [f"{model} (a multimodal model to SGLang)"] if multimodal else []


def _mla(model: str) -> bool:
    """Whether ``model`` runs MLA attention (SGLang's ``use_mla_backend``)."""
    spec = known_model(model)  # a model inferlab does not know: the chunk size stands
    return spec is not None and spec.mla is not None


def sglang_words(launch: EngineLaunch) -> list[str]:
    """SGLang's flags for ``launch.prefill_graph_tokens`` (``--enforce-piecewise-cuda-graph``, which skips
    SGLang's auto-disable rules, where the launch was read from it or its layout or model meets one
    of them: graphs asked for stay on); ``--disable-piecewise-cuda-graph``
    where the launch read as eager came from that flag (later releases need it to run eagerly)."""
    if launch.prefill_graph_tokens is not None:  # enforced where SGLang's rules would turn them off otherwise
        forced = launch.flag_of("prefill_graph_tokens") == "--enforce-piecewise-cuda-graph" or launch.attention_dp \
            or launch.pp > 1 or bool(_model_rules(launch.model))
        switch = "--enforce-piecewise-cuda-graph" if forced else "--enable-piecewise-cuda-graph"
        return [switch, "--piecewise-cuda-graph-max-tokens", str(launch.prefill_graph_tokens)]
    return ["--disable-piecewise-cuda-graph"] if launch.flag_of("prefill_graph_tokens") == \
        "--disable-piecewise-cuda-graph" else []


def trtllm_options(options: dict, where: str, f: Any, notes: list[str]) -> tuple[dict, tuple[int | None, str] | None]:
    """TensorRT-LLM's LLM-API ``options`` without their piecewise-graph keys, and
    ``(prefill_graph_tokens, the key that set it)`` where they turn the graphs on (else None; tokens
    None: no capture list, the decode graphs' sizes, :func:`trtllm_default_tokens`);
    ``torch_compile_config``'s other keys (torch.compile's own fusion, not modelled) go to ``f.unknown``."""
    rest = dict(options)
    compiled, backend = rest.pop("torch_compile_config", None), rest.pop("prefill_cuda_graph_backend", None)
    listed, label = rest.pop("prefill_capture_num_tokens", None), None
    if isinstance(compiled, dict):
        for key, value in compiled.items():
            if key == "enable_piecewise_cuda_graph" and isinstance(value, bool):
                label = f"{where}: torch_compile_config.{key}" if value else label
            elif key == "capture_num_tokens":
                listed = value if listed is None else listed  # prefill_capture_num_tokens wins, its later name
            else:
                f.unknown.append(f"torch_compile_config.{key}: {value}")
    elif compiled is not None:
        f.unknown.append(f"torch_compile_config: {compiled}")
    if backend is not None and str(backend).lower() == "piecewise":
        label = f"{where}: prefill_cuda_graph_backend"
    elif backend is not None:
        f.unknown.append(f"prefill_cuda_graph_backend: {backend}")
    if label is None:
        if listed is not None:
            notes.append(f"{where}: a capture list without piecewise CUDA graphs turned on: prefill runs eagerly")
        return rest, None
    if listed is None:  # the decode graphs' batch sizes: resolved with cuda_graph_config (trtllm_default_tokens)
        return rest, (None, label)
    if not (isinstance(listed, list) and listed
            and all(isinstance(n, int) and not isinstance(n, bool) and n >= 1 for n in listed)):
        raise SpecError(f"trtllm: {where}: the capture list {listed!r:.60} is not a list of whole numbers >= 1")
    return rest, (max(listed), label)


def trtllm_default_tokens(label: str, graph_max_batch: int | None, notes: list[str]) -> int | None:
    """``prefill_graph_tokens`` where ``label`` turned piecewise graphs on with no capture list:
    the largest decode CUDA-graph batch (``graph_max_batch``; None: TensorRT-LLM's default), none
    where ``cuda_graph_config: null`` leaves no decode graphs (0): eager then."""
    from .scheduler import TRTLLM_GRAPH_BATCH

    limit = TRTLLM_GRAPH_BATCH if graph_max_batch is None else graph_max_batch
    if not limit:
        notes.append(f"{label} with no capture list: TensorRT-LLM captures its decode CUDA graphs' batch sizes, and "
                     "cuda_graph_config: null leaves none: prefill runs eagerly")
        return None
    notes.append(f"{label}: no capture list given: TensorRT-LLM captures its decode CUDA graphs' batch sizes, "
                 f"iterations of up to {limit:,} tokens (cuda_graph_config)")
    return limit


def trtllm_capture_list(tokens: int) -> list[int]:
    """A capture list whose largest entry is ``tokens``, in the shape of the docs' example list
    ([1, 2, 4, ..., 128, 256, 512, ..., 3072]): powers of two to 128, every 256 after, then ``tokens``."""
    grid = [2**k for k in range(8)] + list(range(256, tokens, 256))
    return [n for n in grid if n < tokens] + [tokens]
