"""guidellm report JSON (``guidellm benchmark --output-path report.json``).

A report holds ``benchmarks``, one per load the sweep ran. Each benchmark has its
scheduling strategy (``config.strategy`` from guidellm 0.4 on, ``args.strategy`` before:
``type_`` ``synchronous``, ``concurrent`` with ``streams``, ``constant`` or ``poisson``
with ``rate``, ``throughput``; constant arrivals are simulated as Poisson, with a note) and ``metrics``: distributions per request status
(``successful``, ``errored``, ``incomplete``, ``total``), each with ``mean``, ``median``,
``percentiles``, ``count``: ``time_to_first_token_ms``, ``time_per_output_token_ms``,
``inter_token_latency_ms``, ``request_latency`` [s], ``requests_per_second``,
``output_tokens_per_second``, ``prompt_token_count``, ``output_token_count``. Only the
successful requests are read; ``time_per_output_token_ms`` counts the first token's wait
too, so the decode rate is read from ``inter_token_latency_ms``. The model is the report's
``args.model`` or the benchmark's ``config.backend.model`` (guidellm 0.4 on), or its
``worker.backend_model`` (before).
"""

from __future__ import annotations

from typing import Any

from .run import BenchFormatError, BenchRun, concurrency_of, each_run, lookup, metrics_of, number, rate_of

TOOL = "guidellm"
REQUIRED = ("time_to_first_token_ms", "output_tokens_per_second", "prompt_token_count", "output_token_count")


def looks_like(data: Any) -> bool:
    """Whether parsed JSON is a guidellm report."""
    return isinstance(data, dict) and isinstance(data.get("benchmarks"), list)


def _mean(metrics: Any, label: str, name: str, required: bool = True) -> float | None:
    value = lookup(metrics, TOOL, label, name, "successful", "mean", required=required)
    return None if value is None else number(value, TOOL, label, f"metrics.{name}.successful.mean")


def _failed(metrics: Any, where: str) -> None:
    """Refuse a benchmark no request of which succeeded (its metrics under ``errored`` alone): a
    failed run, said as one rather than as a file missing its fields."""
    if not isinstance(metrics, dict):
        return
    latency = metrics.get("request_latency")
    if isinstance(latency, dict) and not (latency.get("successful") or {}).get("count"):
        errored = (latency.get("errored") or {}).get("count")
        if errored:
            raise BenchFormatError(f"{TOOL}: {where}: no request succeeded ({errored:g} errored): a failed run, "
                                   "nothing to compare; check the server's log")


def _strategy_of(bench: dict[str, Any], label: str) -> dict[str, Any]:
    strategy = lookup(bench, TOOL, label, "config", "strategy", required=False) \
        or lookup(bench, TOOL, label, "args", "strategy", required=False)
    if not isinstance(strategy, dict):
        lookup(bench, TOOL, label, "config", "strategy")
    return strategy


def _strategy(bench: dict[str, Any], label: str) -> tuple[int | None, float | None]:
    """(concurrency, rate) of a benchmark's strategy."""
    strategy = _strategy_of(bench, label)
    kind = strategy.get("type_")
    if kind == "synchronous":
        return 1, None
    if kind == "concurrent":
        return concurrency_of(strategy.get("streams"), f"{TOOL}: {label}: strategy streams"), None
    cap = strategy.get("max_concurrency")
    cap = concurrency_of(cap, f"{TOOL}: {label}: strategy max_concurrency") if cap is not None else None
    if kind in ("constant", "poisson"):  # a rate, capped at max_concurrency in flight when one is set
        return cap, rate_of(strategy.get("rate"), f"{TOOL}: {label}: strategy rate")
    if kind == "throughput":  # as fast as it can: every request at once, or max_concurrency clients
        return cap, None
    raise BenchFormatError(f"{TOOL}: {label}: strategy type_ {kind!r} is not synchronous, concurrent, constant, "
                           "poisson or throughput")


def read(data: Any, label: str) -> list[BenchRun]:
    """The runs of a report, one per benchmark.

    Raises
    ------
    BenchFormatError
        No benchmarks, or none that reads (one without its strategy or a required metric,
        such as a benchmark whose every request errored, is skipped with a note when others read).
    """
    benches = lookup(data, TOOL, label, "benchmarks")
    if not benches:
        raise BenchFormatError(f"{TOOL}: {label}: 'benchmarks' is empty")
    def one(i: int, bench: Any) -> BenchRun:
        where = f"{label}#{i + 1}"
        metrics = lookup(bench, TOOL, where, "metrics")
        _failed(metrics, where)
        for key in REQUIRED:
            lookup(metrics, TOOL, where, key, "successful", "mean")
        concurrency, rate = _strategy(bench, where)
        count = lookup(metrics, TOOL, where, "output_token_count", "successful", "count", required=False)
        model = lookup(bench, TOOL, where, "worker", "backend_model", required=False) \
            or lookup(bench, TOOL, where, "config", "backend", "model", required=False) \
            or lookup(data, TOOL, where, "args", "model", required=False)
        values = {
            "ttft_ms": _mean(metrics, where, "time_to_first_token_ms"),
            "itl_ms": _mean(metrics, where, "inter_token_latency_ms", required=False),
            "output_tokens_per_s": _mean(metrics, where, "output_tokens_per_second"),
        }
        return BenchRun(tool="guidellm", id=where, metrics=metrics_of(values),
                             isl=_mean(metrics, where, "prompt_token_count"),
                             osl=_mean(metrics, where, "output_token_count"),
                             concurrency=concurrency, request_rate=rate,
                             num_requests=int(count) if isinstance(count, (int, float)) and count > 0 else None,
                             model=model if isinstance(model, str) else None,
                             notes=(f"{where}: constant arrivals (strategy constant, 1/rate apart) are simulated "
                                    "as Poisson",) if _strategy_of(bench, where).get("type_") == "constant" else ())

    return each_run(benches, one, TOOL, label)
