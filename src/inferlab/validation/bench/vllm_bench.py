"""``vllm bench serve --save-result``: one JSON object per run.

The file holds the run's arguments (``model_id``, ``tokenizer_id``, ``backend``,
``num_prompts``, ``request_rate``, the text ``"inf"`` when every request is sent at once,
``max_concurrency``, ``burstiness``) and its results: ``completed``, ``duration`` [s],
``total_input_tokens``, ``total_output_tokens``, ``request_throughput`` [1/s],
``output_throughput`` [token/s], and ``mean_/median_/std_/p99_`` of ``ttft``, ``tpot``,
``itl`` and ``e2el`` in ms. Saved with details it also has per-request ``input_lens``,
``output_lens``, ``ttfts`` [s] and ``itls`` [s] (a failed request's output counted as 0
tokens: the means here are the totals' over the completed requests). A ramped rate
(``--ramp-up-strategy``) is no one load and is not predicted; ``--append-result`` files hold
a run a line. The ``backend`` is the client's endpoint
type, not the server, which is taken as vLLM unless ``--engine-args`` says otherwise.
``--percentile-metrics`` (default ``ttft,tpot,itl``) names the latencies summarised: a mean
it left out is not compared, with a note.
Field names follow vLLM 0.10-0.11 (``vllm/benchmarks/serve.py``).
"""

from __future__ import annotations

from typing import Any

from .run import (SERVING_FIELDS, UNSTREAMED_NOTE, BenchFormatError, BenchRun, completed_and_lengths, concurrency_of,
                  lookup, rate_of, serving_metrics, unread_fields, unstreamed)

TOOL = "vllm bench serve"
#: Fields every result file has; the first missing one is named when a file is refused.
REQUIRED = ("completed", "total_input_tokens", "total_output_tokens", "output_throughput")
#: The compared means and the ``--percentile-metrics`` name that writes each.
PERCENTILE_MEANS = {"mean_ttft_ms": "ttft", "mean_tpot_ms": "tpot", "mean_itl_ms": "itl"}


def looks_like(data: Any) -> bool:
    """Whether parsed JSON is a vLLM result (its run arguments beside its results: the TTFT
    summary, or the throughput where ``--percentile-metrics`` left TTFT out)."""
    return isinstance(data, dict) and ("mean_ttft_ms" in data or "output_throughput" in data) \
        and ("model_id" in data or "burstiness" in data)


def _unsummarised(data: dict[str, Any], label: str) -> list[str]:
    """A note naming the compared means the file lacks (``--percentile-metrics`` without them)."""
    missing = [key for key in PERCENTILE_MEANS if data.get(key) is None]
    if not missing:
        return []
    return [f"{label}: no {', '.join(missing)} in the file (the run's --percentile-metrics left out "
            f"{','.join(PERCENTILE_MEANS[k] for k in missing)}): not compared"]


def read(data: Any, label: str) -> list[BenchRun]:
    """The run of one ``--save-result`` file.

    Raises
    ------
    BenchFormatError
        A required field is missing or not a number.
    """
    if not isinstance(data, dict):
        lookup({}, TOOL, label, REQUIRED[0])
    for key in REQUIRED:
        lookup(data, TOOL, label, key)
    if data.get("ramp_up_strategy"):  # --ramp-up-strategy: the rate climbs over the run
        raise BenchFormatError(f"{TOOL}: {label}: a ramped rate (ramp_up_strategy {data['ramp_up_strategy']}, "
                               f"{data.get('ramp_up_start_rps')} to {data.get('ramp_up_end_rps')} req/s) is no one "
                               "load: not predicted")
    # the totals count the completed requests only (the per-request lists of a detailed save hold a
    # 0-token output for each failed one, which would shorten the mean)
    completed, isl, osl = completed_and_lengths(data, TOOL, label)
    notes = _unsummarised(data, label)
    failed = data.get("failed")
    if isinstance(failed, (int, float)) and not isinstance(failed, bool) and failed > 0:
        notes.append(f"{label}: {failed:g} request(s) failed; the means are of the {completed:g} completed")
    if unstreamed(data):
        notes.append(f"{label}: {UNSTREAMED_NOTE}")
    bad = unread_fields(data, SERVING_FIELDS)
    if bad:
        notes.append(f"{label}: {', '.join(bad)} not a measured number: not compared")
    if data.get("burstiness") not in (None, 1, 1.0):
        notes.append(f"{label}: burstiness {data['burstiness']} (gamma arrivals) is simulated as Poisson")
    return [BenchRun(tool="vllm", id=label, isl=isl, osl=osl, metrics=serving_metrics(data, TOOL, label),
                     concurrency=concurrency_of(data.get("max_concurrency"), f"{TOOL}: {label}: max_concurrency"),
                     request_rate=rate_of(data.get("request_rate"), f"{TOOL}: {label}: request_rate"),
                     num_requests=int(completed), model=data.get("model_id") or data.get("tokenizer_id"),
                     notes=tuple(notes))]
