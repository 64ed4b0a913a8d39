"""Piecewise CUDA graphs of prefill and mixed iterations in the engines' options, read into
``prefill_graph_tokens`` (:class:`~inferlab.engines.scheduler.SchedulerConfig`) and written back.

SGLang (server arguments; docs, advanced_features/piecewise_cuda_graph): ``--enable-piecewise-cuda-graph``
turns them on (opt-in in earlier releases; deprecated in later ones, which turn them on by default
"for supported configurations", sglang PR #16331), ``--enforce-piecewise-cuda-graph`` too (skipping
the auto-disable conditions), ``--disable-piecewise-cuda-graph`` off, and
``--piecewise-cuda-graph-max-tokens N`` is the largest iteration captured. Which release turned them
on by default is not established here, so inferlab's SGLang runs prefill eagerly unless a command
turns them on. TensorRT-LLM's PyTorch runtime: ``torch_compile_config: {enable_piecewise_cuda_graph:
true, capture_num_tokens: [...]}`` (1.x docs, "Torch Compile & Piecewise CUDA Graph") or, in later
releases, ``prefill_cuda_graph_backend: piecewise`` with ``prefill_capture_num_tokens``: the largest
listed number of tokens.
"""

from __future__ import annotations

from typing import Any

from ..errors import InferlabError, SpecError
from .command_line import Spec
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
#: The largest entry of TensorRT-LLM's default capture list when piecewise graphs are on and no
#: list is given (``TorchCompileConfig``: powers of two to 128, then every 256 to 3,072, as its LLM-API
#: tests pin it in later releases; earlier ones may capture other sizes).
TRTLLM_DEFAULT_TOKENS = 3072


def sglang_tokens(f: Any, model: str, chunk: int | None, default_chunk: int,
                  notes: list[str]) -> tuple[int | None, str | None]:
    """``prefill_graph_tokens`` of SGLang's flags ``f`` and the flag that set it ((None, None):
    none given). ``chunk``: ``--chunked-prefill-size`` as given (None: unset, SGLang sizing it by
    the GPU's memory, read as ``default_chunk``)."""
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
    if given is not None:
        return given, "--piecewise-cuda-graph-max-tokens"
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


def _mla(model: str) -> bool:
    """Whether ``model`` runs MLA attention (SGLang's ``use_mla_backend``)."""
    from ..specs.catalog import load_model

    try:
        return load_model(model).mla is not None
    except InferlabError:  # a model inferlab does not know: the chunk size stands
        return False


def sglang_words(launch: EngineLaunch) -> list[str]:
    """SGLang's flags for ``launch.prefill_graph_tokens``; ``--disable-piecewise-cuda-graph`` where
    the launch read as eager came from that flag (later releases need it to run eagerly)."""
    if launch.prefill_graph_tokens is not None:
        return ["--enable-piecewise-cuda-graph", "--piecewise-cuda-graph-max-tokens", str(launch.prefill_graph_tokens)]
    return ["--disable-piecewise-cuda-graph"] if launch.flag_of("prefill_graph_tokens") == \
        "--disable-piecewise-cuda-graph" else []


def trtllm_options(options: dict, where: str, f: Any, notes: list[str]) -> tuple[dict, tuple[int, str] | None]:
    """TensorRT-LLM's LLM-API ``options`` without their piecewise-graph keys, and
    ``(prefill_graph_tokens, the key that set it)`` where they turn the graphs on (else None);
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
    if listed is None:
        notes.append(f"{label}: no capture list given: TensorRT-LLM's default list, up to {TRTLLM_DEFAULT_TOKENS:,} "
                     "tokens (later releases'; earlier ones may capture other sizes)")
        return rest, (TRTLLM_DEFAULT_TOKENS, label)
    if not (isinstance(listed, list) and listed
            and all(isinstance(n, int) and not isinstance(n, bool) and n >= 1 for n in listed)):
        raise SpecError(f"trtllm: {where}: the capture list {listed!r:.60} is not a list of whole numbers >= 1")
    return rest, (max(listed), label)


def trtllm_capture_list(tokens: int) -> list[int]:
    """A capture list whose largest entry is ``tokens``, in the shape of TensorRT-LLM's default:
    powers of two to 128, every 256 after, then ``tokens``."""
    grid = [2**k for k in range(8)] + list(range(256, tokens, 256))
    return [n for n in grid if n < tokens] + [tokens]
