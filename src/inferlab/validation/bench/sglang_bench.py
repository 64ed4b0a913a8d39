"""``python -m sglang.bench_serving --output-file F.jsonl``: one JSON object per line, a
line appended per run.

Each line holds the run's arguments (``backend``, ``dataset_name``, ``request_rate``,
``max_concurrency``, ``random_input_len``, ``random_output_len``, ``random_range_ratio``)
and its results: ``duration`` [s], ``completed``, ``total_input_tokens``,
``total_output_tokens``, ``request_throughput``, ``input_throughput``,
``output_throughput`` [token/s], ``mean_/median_/std_/p99_`` of ``e2e_latency``,
``ttft``, ``tpot`` and ``itl`` in ms, ``concurrency`` (the mean requests in flight) and
``accept_length`` under speculative decoding. The model is not recorded: it comes from
``--engine-args`` or ``--deployment``. ``backend`` names the server API the client spoke
(``sglang``, ``sglang-oai``, ``vllm``, ``lmdeploy``, ``trt``), which names the engine.
Field names follow SGLang 0.4.10-0.5 (``python/sglang/bench_serving.py``).
"""

from __future__ import annotations

from typing import Any

from .run import BenchFormatError, BenchRun, concurrency_of, lookup, number, rate_of, serving_metrics

TOOL = "sglang bench_serving"
REQUIRED = ("completed", "total_input_tokens", "total_output_tokens", "output_throughput", "mean_ttft_ms")
#: Engine of each client backend.
ENGINES = {"sglang": "sglang", "sglang-native": "sglang", "sglang-oai": "sglang", "sglang-oai-chat": "sglang",
           "vllm": "vllm", "vllm-chat": "vllm", "lmdeploy": "lmdeploy", "lmdeploy-chat": "lmdeploy", "trt": "trtllm"}


def looks_like(data: Any) -> bool:
    """Whether one parsed line is an SGLang result (its dataset arguments beside the TTFT summary)."""
    return isinstance(data, dict) and "mean_ttft_ms" in data and "model_id" not in data \
        and ("dataset_name" in data or "total_output_tokens_retokenized" in data or "random_input_len" in data)


def read(lines: list[Any], label: str) -> list[BenchRun]:
    """The runs of a JSONL file, one per line.

    Raises
    ------
    BenchFormatError
        A line lacks a required field or holds a malformed number.
    """
    runs = []
    for i, data in enumerate(lines):
        where = f"{label}#{i + 1}"
        if not isinstance(data, dict):
            lookup({}, TOOL, where, REQUIRED[0])
        for key in REQUIRED:
            lookup(data, TOOL, where, key)
        completed = number(data["completed"], TOOL, where, "completed")
        accept = data.get("accept_length")
        accept = number(accept, TOOL, where, "accept_length", positive=False) if accept is not None else None
        if accept is not None and accept != 0 and accept < 1:  # 0 or absent: no speculation
            raise BenchFormatError(f"{TOOL}: {where}: field 'accept_length' must be the tokens a step emitted "
                                   f"(>= 1), or 0 or absent without speculation; got {accept:.3g}")
        runs.append(BenchRun(
            tool="sglang", id=where, metrics=serving_metrics(data, TOOL, where),
            isl=number(data["total_input_tokens"], TOOL, where, "total_input_tokens") / completed,
            osl=number(data["total_output_tokens"], TOOL, where, "total_output_tokens") / completed,
            concurrency=concurrency_of(data.get("max_concurrency"), f"{TOOL}: {where}: max_concurrency"),
            request_rate=rate_of(data.get("request_rate"), f"{TOOL}: {where}: request_rate"),
            num_requests=int(completed), engine=ENGINES.get(str(data.get("backend", "sglang")), None),
            accept_length=accept or None))
    return runs
