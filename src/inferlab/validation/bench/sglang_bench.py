"""``python -m sglang.bench_serving --output-file F.jsonl``: one JSON object per line, a
line appended per run.

Each line holds the run's arguments (``backend``, ``dataset_name``, ``request_rate``,
``max_concurrency``, ``random_input_len``, ``random_output_len``, ``random_range_ratio``)
and its results: ``duration`` [s], ``completed``, ``total_input_tokens``,
``total_output_tokens``, ``request_throughput``, ``input_throughput``,
``output_throughput`` [token/s], ``mean_/median_/std_/p99_`` of ``e2e_latency``,
``ttft``, ``tpot`` and ``itl`` in ms, ``concurrency`` (the mean requests in flight) and
``accept_length`` under speculative decoding. Newer versions add ``server_info`` (the
server's ``/get_server_info``: its launch arguments ``model_path``, ``tp_size``, ``dp_size``,
``ep_size``, ``enable_dp_attention``, ``quantization``, ``kv_cache_dtype``,
``max_running_requests``, ``chunked_prefill_size`` and the others of :data:`SERVER_FLAGS`,
and its ``version``), read as the deployment where present (by SGLang's flag parser); without it the model comes from ``--engine-args`` or ``--deployment``. ``backend`` names the server API the client spoke
(``sglang``, ``sglang-oai``, ``vllm``, ``lmdeploy``, ``trt``), which names the engine.
Field names follow SGLang 0.4.10-0.5 (``python/sglang/bench_serving.py``).
"""

from __future__ import annotations

from typing import Any

from .run import (SERVING_FIELDS, UNSTREAMED_NOTE, BenchFormatError, BenchRun, completed_and_lengths, concurrency_of,
                  each_run, lookup, number, rate_of, serving_metrics, unread_fields, unstreamed)

TOOL = "sglang bench_serving"
REQUIRED = ("completed", "total_input_tokens", "total_output_tokens", "output_throughput", "mean_ttft_ms")
#: Engine of each client backend.
ENGINES = {"sglang": "sglang", "sglang-native": "sglang", "sglang-oai": "sglang", "sglang-oai-chat": "sglang",
           "vllm": "vllm", "vllm-chat": "vllm", "lmdeploy": "lmdeploy", "lmdeploy-chat": "lmdeploy", "trt": "trtllm"}


def _notes(data: dict[str, Any], where: str) -> list[str]:
    """What of a line is not compared: an unstreamed run's TTFT, fields that are not numbers, a
    shared-prefix dataset's prefixes."""
    notes = [f"{where}: {UNSTREAMED_NOTE}"] if unstreamed(data) else []
    bad = unread_fields(data, SERVING_FIELDS)
    if bad:
        notes.append(f"{where}: {', '.join(bad)} not a measured number: not compared")
    if data.get("dataset_name") == "generated-shared-prefix":
        notes.append(f"{where}: the generated-shared-prefix prompts share prefixes the engine's cache finds; "
                     "simulated without them (their structure is not recorded in the line)")
    return notes


#: ``server_info`` fields (SGLang's server arguments by name) and the launch flags they record.
SERVER_FLAGS = {"tp_size": "--tp-size", "dp_size": "--dp-size", "ep_size": "--ep-size", "pp_size": "--pp-size",
                "moe_a2a_backend": "--moe-a2a-backend", "quantization": "--quantization",
                "kv_cache_dtype": "--kv-cache-dtype", "max_running_requests": "--max-running-requests",
                "chunked_prefill_size": "--chunked-prefill-size", "max_prefill_tokens": "--max-prefill-tokens",
                "mem_fraction_static": "--mem-fraction-static", "page_size": "--page-size",
                "context_length": "--context-length", "cuda_graph_max_bs": "--cuda-graph-max-bs",
                "speculative_algorithm": "--speculative-algorithm", "speculative_num_steps": "--speculative-num-steps",
                "speculative_eagle_topk": "--speculative-eagle-topk",
                "speculative_num_draft_tokens": "--speculative-num-draft-tokens",
                "speculative_draft_model_path": "--speculative-draft-model-path"}
SERVER_SWITCHES = {"enable_dp_attention": "--enable-dp-attention", "enable_mixed_chunk": "--enable-mixed-chunk",
                   "disable_cuda_graph": "--disable-cuda-graph",
                   "disable_overlap_schedule": "--disable-overlap-schedule",
                   "disable_radix_cache": "--disable-radix-cache"}
#: A catalog model the flags are read with where the line's own ``model_path`` is not one the
#: catalog names (a local path, another name: resolved later, or by ``--model``); a catalog
#: model's own path reads them against its checkpoint (a ``quantization`` that is its own method
#: reads its formats).
_FLAGS_ONLY_MODEL = "llama-3.1-8b"


def _server(info: Any, where: str) -> dict[str, Any]:
    """The deployment a line's ``server_info`` records, as :class:`BenchRun` fields (empty without one).

    Its fields are SGLang's launch arguments, so they are read by the launch command's own parser
    (:func:`inferlab.engines.sglang.parse`): attention DP inside the TP group (which must divide
    by the DP size), an all-to-all MoE backend setting the expert-parallel size to the TP size,
    ``chunked_prefill_size`` -1 as prompts prefilled whole, the memory fraction, page size,
    context length, CUDA-graph limits, the overlap scheduler and the radix cache switched off,
    and the speculative drafter it ran (whose acceptance the line's ``accept_length`` gives).
    """
    import shlex

    from ...engines import parse_engine_args
    from ...engines.scheduler import USER_LIMITS
    from ...errors import InferlabError, SpecError
    from .deployment import case_speculative

    if not isinstance(info, dict):
        return {"notes": ()}
    words = [flag for key, flag in SERVER_SWITCHES.items() if info.get(key) is True]
    for key, flag in SERVER_FLAGS.items():
        value = info.get(key)
        if value is not None and not isinstance(value, bool) and str(value).strip() not in ("", "none", "None"):
            words += [flag, str(value)]
    recorded, flags_model = info.get("model_path"), _FLAGS_ONLY_MODEL
    if isinstance(recorded, str):  # the run's own model where the catalog knows it (its checkpoint's formats)
        from ...specs.catalog import catalog_model

        try:
            catalog_model(recorded)
            flags_model = recorded
        except InferlabError:
            pass
    try:
        launch = parse_engine_args(shlex.join(["python", "-m", "sglang.launch_server", "--model-path",
                                               flags_model, *words]))
    except SpecError as exc:
        raise BenchFormatError(f"{TOOL}: {where}: server_info: {str(exc).removeprefix('sglang: ')}") from None
    layout: dict[str, Any] = {}
    if "tp_size" in info:
        layout["tp"] = launch.tp
    if launch.pp > 1:
        layout["pp"] = launch.pp
    if "ep_size" in info or "--moe-a2a-backend" in words:
        layout["ep"] = launch.ep
    if launch.attention_dp:
        layout["attention_dp"] = True
        layout["attention_tp"] = launch.attention_tp
    elif launch.dp > 1:
        layout["dp"] = launch.dp
    precision = {k: v for k, v in (("weights", launch.weights), ("activations", launch.activations),
                                   ("kv_cache", launch.kv_cache)) if v}
    limits = {k: getattr(launch, k) for k in USER_LIMITS if getattr(launch, k) is not None}
    model = info.get("model_path")
    return {"model": model if isinstance(model, str) else None, "layout": tuple(layout.items()),
            "precision": tuple(precision.items()), "scheduler": tuple(limits.items()),
            "speculative": tuple((case_speculative(launch.speculation) or {}).items()),
            "prefix_caching": launch.prefix_caching,
            "engine_version": str(info["version"]) if info.get("version") else None,
            "notes": tuple(f"{where}: server_info: {note}" for note in launch.notes)}


def looks_like(data: Any) -> bool:
    """Whether one parsed line is an SGLang result (its dataset arguments beside the TTFT summary)."""
    return isinstance(data, dict) and "mean_ttft_ms" in data and "model_id" not in data \
        and ("dataset_name" in data or "total_output_tokens_retokenized" in data or "random_input_len" in data)


def read(lines: list[Any], label: str) -> list[BenchRun]:
    """The runs of a JSONL file, one per line.

    Raises
    ------
    BenchFormatError
        No line reads (one that lacks a required field or holds a malformed number, such as a
        run whose every request failed, is skipped with a note when others read).
    """
    def one(i: int, data: Any) -> BenchRun:
        where = f"{label}#{i + 1}"
        if not isinstance(data, dict):
            lookup({}, TOOL, where, REQUIRED[0])
        for key in REQUIRED:
            lookup(data, TOOL, where, key)
        completed, isl, osl = completed_and_lengths(data, TOOL, where)
        accept = data.get("accept_length")
        accept = number(accept, TOOL, where, "accept_length", positive=False) if accept is not None else None
        if accept is not None and accept != 0 and accept < 1:  # 0 or absent: no speculation
            raise BenchFormatError(f"{TOOL}: {where}: field 'accept_length' must be the tokens a step emitted "
                                   f"(>= 1), or 0 or absent without speculation; got {accept:.3g}")
        server = _server(data.get("server_info"), where)
        return BenchRun(
            tool="sglang", id=where, metrics=serving_metrics(data, TOOL, where),
            isl=isl, osl=osl,
            concurrency=concurrency_of(data.get("max_concurrency"), f"{TOOL}: {where}: max_concurrency"),
            request_rate=rate_of(data.get("request_rate"), f"{TOOL}: {where}: request_rate"),
            num_requests=int(completed), engine=ENGINES.get(str(data.get("backend", "sglang")), None),
            accept_length=accept or None, **{**server, "notes": (*_notes(data, where), *server["notes"])})

    return each_run(lines, one, TOOL, label)
