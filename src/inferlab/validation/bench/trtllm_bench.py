"""``trtllm-bench ... throughput``: its ``--report_json`` file or its printed report.

The JSON report has ``engine`` (``model``, ``model_path``, ``version``, ``backend``
``Pytorch`` or ``TRT``, ``dtype``, ``kv_cache_dtype``, ``quantization``), ``world_info``
(``tp_size``, ``pp_size``, ``ep_size``, ``max_batch_size``, ``max_num_tokens``),
``request_info`` (``num_requests``, ``avg_num_concurrent_requests``,
``avg_input_length``, ``avg_output_length``), ``performance``
(``request_throughput_req_s``, ``system_output_throughput_tok_s``,
``output_throughput_per_gpu_tok_s``, ...) and, when streaming, ``streaming_metrics``
(``avg_ttft_ms``, ``avg_tpot_ms``, percentiles). The printed report says the same as
``Label:  value`` lines (``TP Size:``, ``Average Input Length (tokens):``, ``Total Output
Throughput (tokens/sec):``, ``Average time-to-first-token [TTFT] (ms):``...).

Newer reports add ``machine`` (``name``, the GPU as the driver names it: ``NVIDIA H200``),
checked against the GPU given, and under speculative decoding ``decoding_stats`` (``mode``,
``MTP``, ``Eagle`` ..., and ``acceptance_length_percentiles``, whose ``average`` is the tokens
a step emitted), read as the run's acceptance length.

Without ``--concurrency`` the tool queues every request at once: an ``offline`` run,
whose mean TTFT grows with the request count; that TTFT is not used. Field names follow
TensorRT-LLM 1.0-1.1 (``tensorrt_llm/bench/dataclasses/reporting.py``).
"""

from __future__ import annotations

import re
from typing import Any

from .run import BenchFormatError, BenchRun, lookup, metrics_of, number, optional_number

TOOL = "trtllm-bench"
#: Printed report label -> the JSON report's (section, field).
_LABELS = {
    "Model": ("engine", "model"), "Model Path": ("engine", "model_path"),
    "TensorRT LLM Version": ("engine", "version"), "TensorRT-LLM Version": ("engine", "version"),
    "Dtype": ("engine", "dtype"), "KV Cache Dtype": ("engine", "kv_cache_dtype"),
    "Quantization": ("engine", "quantization"),
    "TP Size": ("world_info", "tp_size"), "PP Size": ("world_info", "pp_size"), "EP Size": ("world_info", "ep_size"),
    "Max Runtime Batch Size": ("world_info", "max_batch_size"), "Max Runtime Tokens": ("world_info", "max_num_tokens"),
    "Number of requests": ("request_info", "num_requests"),
    "Number of concurrent requests": ("request_info", "avg_num_concurrent_requests"),
    "Average Input Length (tokens)": ("request_info", "avg_input_length"),
    "Average Output Length (tokens)": ("request_info", "avg_output_length"),
    "Request Throughput (req/sec)": ("performance", "request_throughput_req_s"),
    "Total Output Throughput (tokens/sec)": ("performance", "system_output_throughput_tok_s"),
    "Average time-to-first-token [TTFT] (ms)": ("streaming_metrics", "avg_ttft_ms"),
    "Average time-per-output-token [TPOT] (ms)": ("streaming_metrics", "avg_tpot_ms"),
}
_LINE = re.compile(r"^\s*([A-Za-z][^:]*?):\s+(\S.*?)\s*$")
#: Quantization algorithm -> the formats it sets.
_QUANT = {"FP8": {"weights": "fp8", "activations": "fp8"},
          "FP8_PER_CHANNEL_PER_TOKEN": {"weights": "fp8", "activations": "fp8"},
          "FP8_BLOCK_SCALES": {"weights": "fp8_block", "activations": "fp8"},
          "NVFP4": {"weights": "nvfp4", "activations": "nvfp4"}, "W4A8_NVFP4_FP8": {"weights": "nvfp4", "activations": "fp8"},
          "W4A16_AWQ": {"weights": "int4"}, "W4A16": {"weights": "int4"}, "W4A8_AWQ": {"weights": "int4", "activations": "fp8"},
          "W8A16": {"weights": "int8"}, "W8A8_SQ_PER_CHANNEL": {"weights": "int8", "activations": "int8"},
          # TensorRT-LLM's MXFP4 recipes are gpt-oss's: its routed experts in MXFP4, attention as shipped
          "W4A8_MXFP4_FP8": {"moe_weights": "mxfp4", "activations": "fp8"},
          "W4A8_MXFP4_MXFP8": {"moe_weights": "mxfp4", "activations": "mxfp8"},
          "W4A16_MXFP4": {"moe_weights": "mxfp4"},
          "MIXED_PRECISION": {}}  # per layer, as the checkpoint says: its own formats


#: ``engine.backend`` of a report -> the case's engine: the runtime it names, whatever the
#: version (from 1.0 the PyTorch one is the default, before it the compiled engine).
_ENGINE_OF_BACKEND = {"pytorch": "trtllm-pytorch", "tensorrt": "trtllm-cpp", "trt": "trtllm-cpp",
                      "cpp": "trtllm-cpp"}


def looks_like_json(data: Any) -> bool:
    """Whether parsed JSON is a trtllm-bench report."""
    return isinstance(data, dict) and "performance" in data and ("world_info" in data or "request_info" in data)


def looks_like_text(text: str) -> bool:
    """Whether text is trtllm-bench's printed report."""
    return "PERFORMANCE OVERVIEW" in text or "Total Output Throughput (tokens/sec):" in text


#: The banner that opens each printed report (a log may hold several, one per run).
_REPORT_START = re.compile(r"^=\s*(PYTORCH BACKEND|ENGINE DETAILS)\s*$", re.MULTILINE)


def split_reports(text: str) -> list[str]:
    """The printed reports of a log, one per run (the whole text when it holds one or none)."""
    starts = [m.start() for m in _REPORT_START.finditer(text)]
    if len(starts) < 2:
        return [text]
    return [text[a:b] for a, b in zip(starts, [*starts[1:], len(text)])]


def read_text(text: str, label: str) -> list[BenchRun]:
    """The run of one printed report; one without the lines trtllm-bench 1.0-1.1 print (the
    0.x reports say "Token Throughput", whose count is not stated) is one line saying so."""
    data = parse_text(text)
    if "system_output_throughput_tok_s" not in data.get("performance", {}):
        raise BenchFormatError(f"{TOOL}: {label}: no 'Total Output Throughput (tokens/sec)' line: the printed "
                               "reports of trtllm-bench 1.0-1.1 are read (older ones print another layout); "
                               "give the JSON report (--report_json) instead")
    return read(data, label)


def parse_text(text: str) -> dict[str, Any]:
    """The printed report as the JSON report's sections (the labels it knows); the PyTorch
    backend's banner sets ``engine.backend``."""
    out: dict[str, Any] = {}
    if re.search(r"^=\s*PYTORCH BACKEND\s*$", text, re.MULTILINE):
        out["engine"] = {"backend": "pytorch"}
    for line in text.splitlines():
        match = _LINE.match(line)
        if match and match.group(1).strip() in _LABELS:
            section, key = _LABELS[match.group(1).strip()]
            out.setdefault(section, {})[key] = match.group(2)
    return out


def _precision(engine: dict[str, Any]) -> dict[str, str]:
    quant = str(engine.get("quantization") or "").upper()
    out = dict(_QUANT.get(quant, {}))
    if str(engine.get("kv_cache_dtype") or "").upper() == "FP8":
        out["kv_cache"] = "fp8"
    return out


def _accept_length(data: Any, label: str) -> tuple[float | None, list[str]]:
    """The mean tokens a step emitted under speculative decoding (``decoding_stats``), and a
    note where the report names a speculation mode without that length; None without one."""
    stats = data.get("decoding_stats")
    mode = stats.get("mode") if isinstance(stats, dict) else None
    if not isinstance(stats, dict) or str(mode).upper() == "NONE":
        return None, []
    where = "decoding_stats.acceptance_length_percentiles.average"
    value = lookup(stats, TOOL, label, "acceptance_length_percentiles", "average", required=False)
    if value is None:
        return None, [f"{label}: speculative decoding ({mode}) without an acceptance length ({where}): simulated "
                      "without it"] if mode else []
    length = number(value, TOOL, label, where)
    if length < 1:
        raise BenchFormatError(f"{TOOL}: {label}: field {where!r} must be the tokens a step emitted (>= 1), "
                               f"got {value!r:.20}")
    return length, []


def read(data: Any, label: str) -> list[BenchRun]:
    """The run of a JSON report, or of the printed report parsed by :func:`parse_text`.

    Raises
    ------
    BenchFormatError
        A required field is missing or malformed.
    """
    throughput = number(lookup(data, TOOL, label, "performance", "system_output_throughput_tok_s"), TOOL, label,
                        "performance.system_output_throughput_tok_s")
    isl = number(lookup(data, TOOL, label, "request_info", "avg_input_length"), TOOL, label,
                 "request_info.avg_input_length")
    osl = number(lookup(data, TOOL, label, "request_info", "avg_output_length"), TOOL, label,
                 "request_info.avg_output_length")
    engine = data.get("engine") or {}
    world = data.get("world_info") or {}
    layout = {}
    for key in ("tp", "pp", "ep"):
        value = world.get(f"{key}_size")
        if value is not None and str(value) != "None":  # the printed report writes an unset size as None
            layout[key] = int(number(value, TOOL, label, f"world_info.{key}_size", whole=True))
    # the tool never refuses a prompt for its budget (it chunks, --enable_chunked_context, or by release
    # raises max_num_tokens to the longest prompt); the report records neither: read as chunked
    limits: dict[str, Any] = {"chunked_prefill": True}
    for key, field_name in (("max_batch_size", "max_num_seqs"), ("max_num_tokens", "max_num_batched_tokens")):
        value = world.get(key)
        if value is not None and str(value) != "None":
            limits[field_name] = int(number(value, TOOL, label, f"world_info.{key}", whole=True))
    if str(engine.get("quantization") or "None").upper() not in {*_QUANT, "NONE", ""}:
        raise BenchFormatError(f"{TOOL}: {label}: engine.quantization {engine['quantization']!r} is not one of "
                               f"{', '.join(_QUANT)} or None")
    tpot = optional_number(data, TOOL, label, "streaming_metrics", "avg_tpot_ms")
    count = optional_number(data, TOOL, label, "request_info", "num_requests")
    notes = []
    if optional_number(data, TOOL, label, "streaming_metrics", "avg_ttft_ms") is not None:
        notes.append(f"{label}: every request queued at once: the mean TTFT depends on the request count and is "
                     "not used")
    in_flight = optional_number(data, TOOL, label, "request_info", "avg_num_concurrent_requests")
    batch = optional_number(data, TOOL, label, "world_info", "max_batch_size")
    bound = min(x for x in (count, batch) if x) if (count or batch) else None
    if in_flight is not None and bound and in_flight < 0.5 * bound:
        shown = lambda x: f"{x:g}" if x else "?"  # noqa: E731
        notes.append(f"{label}: {in_flight:.3g} requests in flight on average, of {shown(count)} requests and a "
                     f"batch limit of {shown(batch)}: a client cap (trtllm-bench --concurrency), which the report "
                     "does not record, looks likely; read as every request queued at once, so compare with care")
    accept_length, spec_notes = _accept_length(data, label)
    version = engine.get("version")
    backend = str(engine.get("backend") or "").lower()
    machine = data.get("machine")
    return [BenchRun(tool="trtllm-bench", id=label, isl=isl, osl=osl,
                     metrics=metrics_of({"tpot_ms": tpot, "output_tokens_per_s": throughput}),
                     num_requests=int(count) if count else None, model=engine.get("model") or engine.get("model_path"),
                     engine=_ENGINE_OF_BACKEND.get(backend, "trtllm"),
                     engine_version=str(version) if version else ("1.0" if backend == "pytorch" else None),
                     layout=tuple(layout.items()), precision=tuple(_precision(engine).items()),
                     notes=(*notes, *spec_notes), scheduler=tuple(limits.items()), accept_length=accept_length,
                     gpu=machine.get("name") if isinstance(machine, dict) else None)]
