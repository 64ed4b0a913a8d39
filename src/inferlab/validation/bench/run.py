"""One benchmark run as a benchmark tool recorded it, before it becomes validation cases.

A reader (one module per tool) turns a tool's output into :class:`BenchRun` values: what
was measured (mean TTFT, mean TPOT, mean ITL, median TPOT, output tokens/s), the workload
(mean prompt and output lengths, the client's concurrency or request rate, the request
count) and whatever of the deployment the tool recorded (model, engine, layout, formats).
:func:`~inferlab.validation.bench.deployment.run_cases` adds what the file does not say.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ...errors import SpecError
from ...inputs.limits import MAX_TOKENS

#: Case metrics a run may carry, in the order they are reported.
RUN_METRICS = ("ttft_ms", "tpot_ms", "itl_ms", "tpot_p50_ms", "output_tokens_per_s")


class BenchFormatError(SpecError):
    """A file that is not the output of the tool it was read as: one line naming the tool
    and the field that could not be found."""


@dataclass(frozen=True)
class BenchRun:
    """One run of a benchmark client against one deployment.

    Attributes
    ----------
    tool : str
        The benchmark tool (``vllm``, ``sglang``, ``genai-perf``, ``guidellm``, ``trtllm-bench``).
    id : str
        Unique within the files read: ``FILE#N``.
    isl, osl : float
        Mean prompt and output tokens per request [token].
    concurrency : int or None
        The client's limit on requests in flight (a closed loop) [request].
    request_rate : float or None
        Requests sent per second; None for all at once (an infinite rate) [1/s].
    num_requests : int or None
        Requests the run completed [request].
    metrics : tuple of (str, float)
        Measured case metrics (:data:`RUN_METRICS`): times in ms, rates in tokens/s.
    model, engine, engine_version : str or None
        As recorded by the tool (a Hugging Face name for the model); None when not recorded.
    layout : tuple of (str, int)
        Recorded parallelism (``tp``, ``pp``, ``ep``, ``dp``); empty when not recorded.
    precision : tuple of (str, str)
        Recorded formats per tensor kind (``weights``, ``activations``, ``kv_cache``).
    notes : tuple of str
        What of the file is not used, and why.
    scheduler : tuple of (str, int)
        Scheduler limits the file records (``max_num_seqs``, ``max_num_batched_tokens``).
    accept_length : float or None
        Mean tokens each verification step emitted under speculative decoding, the verified
        token included (SGLang's ``accept_length``) [token]; None when not recorded.
    speculative : tuple of (str, Any)
        The drafter the server ran, in a case's ``speculative`` form without its acceptance
        (SGLang's ``server_info``); empty when the file does not record one.
    prefix_caching : bool or None
        Whether the server kept a prefix cache (False: SGLang's ``disable_radix_cache``); None
        when the file does not say.
    prompts : int or None
        Distinct prompts the client drew its requests from (a synthetic dataset it reuses,
        genai-perf's and AIPerf's ``num_dataset_entries``) [prompt]; None when each request's
        prompt is its own or the file does not say.
    gpu : str or None
        The GPU as the tool recorded it (trtllm-bench's ``machine.name``, ``NVIDIA H200``), not
        a catalog id: checked against the GPU given; None when not recorded.
    """

    tool: str
    id: str
    isl: float
    osl: float
    metrics: tuple[tuple[str, float], ...]
    concurrency: int | None = None
    request_rate: float | None = None
    num_requests: int | None = None
    model: str | None = None
    engine: str | None = None
    engine_version: str | None = None
    layout: tuple[tuple[str, int], ...] = ()
    precision: tuple[tuple[str, str], ...] = ()
    notes: tuple[str, ...] = field(default=())
    scheduler: tuple[tuple[str, int], ...] = ()
    accept_length: float | None = None
    prompts: int | None = None
    gpu: str | None = None
    speculative: tuple[tuple[str, Any], ...] = ()
    prefix_caching: bool | None = None

    def __post_init__(self) -> None:
        for name in ("model", "engine", "engine_version", "gpu"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, str):
                raise BenchFormatError(f"{self.tool}: {self.id}: the recorded {name} {value!r:.40} is not a name")

    def regime_and_load(self) -> tuple[str, dict[str, Any]]:
        """The case regime and ``load`` of this run (see the case schema)."""
        if self.request_rate is not None:
            load: dict[str, Any] = {"request_rate": float(self.request_rate)}
            load["num_requests"] = int(self.num_requests or 1000)
            if self.concurrency is not None:  # at most that many in flight (--max-concurrency)
                load["max_concurrency"] = int(self.concurrency)
            return "online", load
        # the request count sets how much the opening burst weighs, and an offline run's whole batch
        count = {"num_requests": int(self.num_requests)} if self.num_requests else {}
        if self.concurrency is not None:
            return "closed_loop", {"concurrency": int(self.concurrency), **count}
        return "offline", {"offline": True, **count}


def lookup(data: Any, tool: str, label: str, *path: str, required: bool = True) -> Any:
    """``data[path[0]][path[1]]...``; a missing required field is a :class:`BenchFormatError`
    naming the tool and the field (dotted)."""
    node = data
    for key in path:
        if not isinstance(node, Mapping) or key not in node or node[key] is None:
            if not required:
                return None
            raise BenchFormatError(f"{tool}: {label}: no field {'.'.join(path)!r}; not a {tool} output file?")
        node = node[key]
    return node


def number(value: Any, tool: str, label: str, name: str, *, positive: bool = True, whole: bool = False) -> float:
    """``value`` as a finite float (a number or numeric text; ``whole``: a count, a whole number
    >= 1); anything else is one line (a boolean too: ``true`` had been read as 1 request)."""
    if isinstance(value, bool):
        raise BenchFormatError(f"{tool}: {label}: field {name!r} is not a number ({value!r})")
    try:
        out = float(value)
    except (TypeError, ValueError):
        raise BenchFormatError(f"{tool}: {label}: field {name!r} is not a number ({value!r:.40})") from None
    if not math.isfinite(out) or positive and out <= 0:
        raise BenchFormatError(f"{tool}: {label}: field {name!r} must be a finite number{' > 0' if positive else ''}, "
                               f"got {value!r:.40}")
    if whole and (not out.is_integer() or out < 1):
        raise BenchFormatError(f"{tool}: {label}: field {name!r} is a count: a whole number >= 1, got {value!r:.40}")
    return out


#: Most requests one benchmark run completes: a case's load holds at most this many.
MAX_COMPLETED = 10**6


def completed_and_lengths(data: Any, tool: str, label: str) -> tuple[float, float, float]:
    """A serving benchmark's completed requests and its mean prompt and output per request
    [token]: the totals over the completed count, each at least one token (a total of 1.5 over
    160 requests had been read as a 0.01-token prompt)."""
    completed = number(data["completed"], tool, label, "completed", whole=True)
    for key in ("duration", "failed"):  # not used, but a negative one is a file no run wrote
        optional_number(data, tool, label, key)
    if completed > MAX_COMPLETED:
        raise BenchFormatError(f"{tool}: {label}: field 'completed' {completed:,.0f} is past {MAX_COMPLETED:,} "
                               "requests, more than one benchmark run completes")
    means = []
    for key in ("total_input_tokens", "total_output_tokens"):
        mean = number(data[key], tool, label, key) / completed
        if mean < 1.0 or mean > MAX_TOKENS:
            bound = "each has at least one" if mean < 1.0 else f"more than {MAX_TOKENS:,}, no request's length"
            raise BenchFormatError(f"{tool}: {label}: field {key!r} {data[key]!r:.20} over {completed:,.0f} completed "
                                   f"requests is {mean:.3g} tokens a request; {bound}")
        means.append(mean)
    return completed, means[0], means[1]


def optional_number(data: Any, tool: str, label: str, *path: str) -> float | None:
    """A numeric field that may be missing (None, or 0 for an unmeasured mean or percentile, is
    treated as absent; :func:`unread_fields` notes a 0, NaN or text left out).

    Raises
    ------
    BenchFormatError
        A negative time or count: no run records one.
    """
    value = lookup(data, tool, label, *path, required=False)
    if value is None or isinstance(value, bool):
        return None
    try:
        out = float(value)
    except (TypeError, ValueError):
        return None
    if out < 0:
        raise BenchFormatError(f"{tool}: {label}: field {'.'.join(path)!r} must be >= 0, got {value!r:.40}")
    return out if math.isfinite(out) and out > 0 else None


def _float_or_nan(value: Any) -> float:
    """A recorded number as a float; NaN for a boolean or what is not a number."""
    if isinstance(value, bool):
        return math.nan
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def rate_of(value: Any, where: str = "request_rate") -> float | None:
    """A recorded request rate: None for ``inf`` (every request at once) or no rate.

    Raises
    ------
    BenchFormatError
        For a rate that is neither a positive number nor ``inf`` (``where`` names the file,
        run and field): it would otherwise be simulated as every request at once.
    """
    if value is None:
        return None
    rate = _float_or_nan(value)
    if rate == math.inf:
        return None
    if not (math.isfinite(rate) and rate > 0):
        raise BenchFormatError(f"{where} {value!r:.40} is not a request rate (a positive number, or inf for every "
                               "request at once)")
    return rate


def concurrency_of(value: Any, where: str = "max_concurrency") -> int | None:
    """A recorded concurrency limit (None when absent).

    Raises
    ------
    BenchFormatError
        For a limit that is not a positive whole number (``where`` names the file, run and field).
    """
    if value is None:
        return None
    out = _float_or_nan(value)
    if not (math.isfinite(out) and out >= 1 and out == int(out)):
        raise BenchFormatError(f"{where} {value!r:.40} is not a number of clients (a whole number >= 1)")
    return int(out)


def count_of(value: Any, where: str) -> int | None:
    """A recorded request count (None when absent or zero).

    Raises
    ------
    BenchFormatError
        For a count that is not a whole number >= 0 (``where`` names the file, run and field).
    """
    if value is None or (isinstance(value, (int, float)) and not isinstance(value, bool) and value == 0):
        return None
    try:
        return concurrency_of(value, where)
    except BenchFormatError:
        raise BenchFormatError(f"{where} {value!r:.40} is not a request count (a whole number >= 0)") from None


def metrics_of(pairs: Mapping[str, float | None]) -> tuple[tuple[str, float], ...]:
    """The measured metrics in :data:`RUN_METRICS` order, absent ones dropped."""
    return tuple((m, float(pairs[m])) for m in RUN_METRICS if pairs.get(m) is not None)


def unstreamed(data: Mapping[str, Any]) -> bool:
    """Whether a run was not streamed (``--disable-stream``): its TPOT and ITL recorded as 0 and
    its "TTFT" the whole request's latency, no first token's time. A run of one-token outputs
    (a prefill measurement) records both as 0 either way, and its TTFT is its first token's."""
    zeros = all(isinstance(data.get(k), (int, float)) and not isinstance(data.get(k), bool) and data.get(k) == 0
                for k in ("mean_tpot_ms", "mean_itl_ms"))
    done, out = data.get("completed"), data.get("total_output_tokens")
    one_token = all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in (done, out)) and 0 < out <= done
    return zeros and not one_token


UNSTREAMED_NOTE = "not streamed (TPOT and ITL recorded as 0): its TTFT is the whole latency and is not used"
#: The serving metrics' fields in vLLM's and SGLang's layout.
SERVING_FIELDS = ("mean_ttft_ms", "mean_tpot_ms", "mean_itl_ms", "median_tpot_ms", "output_throughput")


def unread_fields(data: Mapping[str, Any], fields: Sequence[str]) -> list[str]:
    """The fields present but not numbers a run can be compared on (NaN, infinite, text, a 0
    time of a streamed run): they are left out, and the run's notes should say so rather than
    drop them silently."""
    out = []
    for key in fields:
        value = data.get(key)
        if value is None or isinstance(value, bool):
            continue
        try:
            ok = math.isfinite(float(value)) and (float(value) != 0 or unstreamed(data))
        except (TypeError, ValueError):
            ok = False
        if not ok:
            out.append(f"{key} ({value!r:.20})")
    return out


def serving_metrics(data: Mapping[str, Any], tool: str, label: str) -> tuple[tuple[str, float], ...]:
    """The case metrics of a result in the layout vLLM's ``bench serve`` writes and SGLang's
    ``bench_serving`` shares (``mean_ttft_ms``, ``mean_tpot_ms``, ``mean_itl_ms``,
    ``median_tpot_ms``, ``output_throughput``); a mean the run did not compute (vLLM's
    ``--percentile-metrics`` without it) is left out."""
    return metrics_of({  # (a NaN or 0 TTFT is left out and noted, as the other means are)
        "ttft_ms": None if unstreamed(data) else optional_number(data, tool, label, "mean_ttft_ms"),
        "tpot_ms": optional_number(data, tool, label, "mean_tpot_ms"),
        "itl_ms": optional_number(data, tool, label, "mean_itl_ms"),
        "tpot_p50_ms": optional_number(data, tool, label, "median_tpot_ms"),
        "output_tokens_per_s": number(data["output_throughput"], tool, label, "output_throughput"),
    })


def each_run(items: Sequence[Any], read_one: Callable[[int, Any], BenchRun], tool: str, label: str) -> list[BenchRun]:
    """``read_one(i, item)`` for every run of a file with several, keeping the runs that read:
    one that does not (every request failed, a field missing) is skipped and named in the first
    kept run's notes, as a case file keeps its good cases; none reading raises the first error.

    Raises
    ------
    BenchFormatError
        No run of the file reads.
    """
    runs: list[BenchRun] = []
    skipped: list[str] = []
    first: BenchFormatError | None = None
    for i, item in enumerate(items):
        try:
            runs.append(read_one(i, item))
        except BenchFormatError as exc:
            first = first or exc
            skipped.append(str(exc).removeprefix(f"{tool}: "))
    if not runs:
        assert first is not None
        raise first
    if skipped:
        runs[0] = replace(runs[0], notes=(*runs[0].notes, *(f"{why}: run skipped, the others of {label} are read"
                                                           for why in skipped)))
    return runs
