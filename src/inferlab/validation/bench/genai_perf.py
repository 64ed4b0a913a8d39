"""NVIDIA genai-perf ``profile_export_genai_perf.json`` and AIPerf ``profile_export_aiperf.json``.

Both write one JSON object per run: each metric an object with its ``unit`` and
statistics (``avg``, ``min``, ``max``, ``std``, ``p1`` ... ``p99``):
``time_to_first_token``, ``inter_token_latency`` (per request, decode time over the
tokens after the first: a TPOT), ``request_latency``, ``output_sequence_length``,
``input_sequence_length``, ``output_token_throughput`` and ``request_throughput``
(``avg`` only), AIPerf also ``request_count`` and ``benchmark_duration``; and the run's
settings under ``input_config``: genai-perf 0.0.10 on as ``model_names`` and
``perf_analyzer.stimulus`` (``concurrency`` or ``request_rate``), before as flat ``model``,
``concurrency``, ``request_rate``; AIPerf as ``endpoint.model_names``,
``loadgen.concurrency``, ``loadgen.request_rate``, ``loadgen.request_count`` (newer AIPerf:
``models.items[].name`` and ``phases``, the last one not ``exclude_from_results`` being the
measured one, its ``type`` ``concurrency`` or a rate's arrivals ``poisson``, ``gamma``,
``constant`` with ``rate``). AIPerf states ``input_config`` is not a stable format, so each
setting is optional here, but a run whose load is found nowhere is refused: neither tool sends
every request at once, so reading it as an offline run would predict another experiment. So is
a trace replayed at its timestamps (``--fixed-schedule``) or users' spaced turns
(``--user-centric-rate``), whose ``--concurrency`` is only a cap; constant or gamma arrivals
are simulated as Poisson, with a note.

A synthetic dataset is a pool of distinct prompts the client reuses (``--num-dataset-entries``,
100 by default in both tools): a run of more requests than that repeats prompts, which an
engine's prefix cache finds. The pool is read from ``input.num_dataset_entries`` or
``num_dataset_entries`` (genai-perf) and ``input.conversation.num_dataset_entries`` (AIPerf),
and not where the export names a dataset file, a public dataset or a prompt source other than
``synthetic``.

A run not streamed records no ``time_to_first_token`` or ``inter_token_latency``: its
throughput is read, its latencies not, with a note. AIPerf marks a run stopped early
``was_cancelled`` (refused: a partial run's figures are no steady state) and counts the
requests that failed in ``error_summary`` (a list of ``error_details`` and ``count``), noted
as vLLM's failed requests are. Its other exports (the CSV, the per-request
``profile_export.jsonl``, the multi-run ``profile_export_aiperf_aggregate.json``) are named
when given, with the file to give instead.
"""

from __future__ import annotations

import json
from typing import Any

from .run import BenchFormatError, BenchRun, concurrency_of, count_of, lookup, metrics_of, number, rate_of

TOOL = "genai-perf/aiperf"
REQUIRED = ("output_token_throughput", "input_sequence_length", "output_sequence_length")
#: The latencies a streamed run records.
STREAMED = ("time_to_first_token", "inter_token_latency")
#: Milliseconds per unit of a time metric.
_TIME_UNITS = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3, "sec": 1e3}


def _metric(data: Any, name: str) -> bool:
    return isinstance(data, dict) and isinstance(data.get(name), dict) and "unit" in data[name]


def looks_like(data: Any) -> bool:
    """Whether parsed JSON is a genai-perf or AIPerf profile export (streamed: its TTFT; not
    streamed: its output throughput beside its request latency)."""
    return _metric(data, "time_to_first_token") or _metric(data, "output_token_throughput") \
        and _metric(data, "request_latency")


def _aggregate(data: Any) -> bool:
    """Whether parsed JSON is AIPerf's multi-run aggregate: metrics as a mean with a confidence
    interval over runs, not one run's ``avg``."""
    return isinstance(data, dict) and any(isinstance(v, dict) and "avg" not in v and ("ci_low" in v or "cv" in v)
                                          for v in data.values())


_AGGREGATE = ("AIPerf's aggregate over several runs (profile_export_aiperf_aggregate.json: means with confidence "
              "intervals): give one run's own profile_export_aiperf.json")


def _records(text: str) -> bool:
    """Whether text is AIPerf's per-request ``profile_export.jsonl`` (a request a line)."""
    first = next((line for line in text.splitlines() if line.strip()), "")
    try:
        record = json.loads(first)
    except ValueError:
        return False
    return isinstance(record, dict) and isinstance(record.get("metadata"), dict) \
        and isinstance(record.get("metrics"), dict)


def other_export(text: str, data: Any) -> str | None:
    """What a genai-perf or AIPerf export other than the run's JSON summary is, and the file to
    give instead; None for any other text."""
    head = text.lstrip()[:2000]
    if head.startswith("Metric,") and any(name in head for name in ("Time to First Token", "Request Latency",
                                                                    "Output Token Throughput")):
        return ("a genai-perf/AIPerf CSV export (profile_export_aiperf.csv, profile_export_genai_perf.csv): give "
                "the JSON export beside it (profile_export_aiperf.json, profile_export_genai_perf.json)")
    if not isinstance(data, dict) and _records(text):
        return ("AIPerf's per-request records (profile_export.jsonl): give the run's summary beside it, "
                "profile_export_aiperf.json")
    return _AGGREGATE if _aggregate(data) else None


#: Spellings of a token rate per second (AIPerf and genai-perf write ``tokens/sec``).
_RATE_UNITS = ("tokens/sec", "tokens/s", "tokens/second", "tokens per second")


def _avg(data: Any, label: str, name: str, *, time: bool = False, rate: bool = False, length: bool = False,
         required: bool = True) -> float | None:
    """A metric's mean: a ``time`` in ms (from its unit), a token ``rate`` per second, a
    ``length`` of at least one token."""
    metric = lookup(data, TOOL, label, name, required=required)
    if metric is None:
        return None
    value = number(lookup(data, TOOL, label, name, "avg"), TOOL, label, f"{name}.avg")
    if time:
        if "unit" not in metric:  # both tools write one: a time without it could be s as well as ms
            raise BenchFormatError(f"{TOOL}: {label}: {name} has no unit (the tools write one: "
                                   f"{', '.join(_TIME_UNITS)})")
        unit = str(metric["unit"])
        if unit not in _TIME_UNITS:
            raise BenchFormatError(f"{TOOL}: {label}: {name}.unit {unit!r} is not a time unit "
                                   f"({', '.join(_TIME_UNITS)})")
        value *= _TIME_UNITS[unit]
    if rate and str(metric.get("unit", "tokens/sec")) not in _RATE_UNITS:
        raise BenchFormatError(f"{TOOL}: {label}: {name}.unit {metric['unit']!r:.30} is not tokens a second "
                               f"({', '.join(_RATE_UNITS)})")
    if length and value < 1.0:
        raise BenchFormatError(f"{TOOL}: {label}: {name}.avg {value:g} is under one token a request")
    return value


def _setting(config: Any, *paths: tuple[str, ...]) -> Any:
    for path in paths:
        node = config
        for key in path:
            node = node.get(key) if isinstance(node, dict) else None
        if node is not None:
            return node
    return None


def _prompt_pool(config: Any, label: str) -> int | None:
    """Distinct prompts of a synthetic dataset the run reused (None: not recorded, or a file's)."""
    if _setting(config, ("input", "file"), ("input", "public_dataset"), ("input_file",), ("input", "input_file")) \
            or _setting(config, ("input", "prompt_source"), ("prompt_source",)) not in (None, "synthetic"):
        return None
    pool = _setting(config, ("input", "conversation", "num_dataset_entries"), ("input", "num_dataset_entries"),
                    ("num_dataset_entries",))
    return count_of(pool, f"{TOOL}: {label}: num_dataset_entries")


def _measured_phase(config: Any) -> dict[str, Any]:
    """AIPerf's newer ``input_config.phases``: the last phase whose results count (a warm-up
    is ``exclude_from_results``), empty when there is none."""
    phases = config.get("phases") if isinstance(config, dict) else None
    counted = [p for p in phases if isinstance(p, dict) and not p.get("exclude_from_results")] \
        if isinstance(phases, list) else []
    return counted[-1] if counted else {}


def _unreplayed(label: str, how: str) -> BenchFormatError:
    return BenchFormatError(f"{TOOL}: {label}: {how}: not predicted, as the simulation replays a concurrency "
                            "or a request rate, not that schedule")


def _arrivals_note(label: str, pattern: Any, smoothness: Any) -> list[str]:
    """A note when a rate's arrivals were not Poisson (the online simulation's)."""
    if pattern == "constant" or pattern == "gamma" and smoothness not in (None, 1, 1.0):
        shape = "constant" if pattern == "constant" else f"gamma (smoothness {smoothness})"
        return [f"{label}: {shape} arrivals at the request rate are simulated as Poisson"]
    return []


def _phase_load(phase: dict[str, Any], label: str) -> tuple[Any, Any, list[str]]:
    """(concurrency, rate, notes) of an AIPerf phase (``aiperf/config/phases.py``: ``type``
    ``concurrency`` with ``concurrency``, 1 by default; ``poisson``, ``gamma`` (``smoothness``) or
    ``constant`` with ``rate`` and ``concurrency`` a cap; ``user_centric``, ``fixed_schedule``)."""
    kind = phase.get("type")
    if kind is None:  # no type recorded: what the phase says
        return phase.get("concurrency"), phase.get("rate", phase.get("request_rate")), []
    if kind == "concurrency":
        return phase.get("concurrency", 1), None, []
    if kind in ("poisson", "gamma", "constant"):
        if phase.get("rate") is None:
            raise _unreplayed(label, f"its {kind} phase follows a rate_series (a rate that changes over the run)")
        return phase.get("concurrency"), phase["rate"], _arrivals_note(label, kind, phase.get("smoothness"))
    if kind == "user_centric":
        raise _unreplayed(label, "its user_centric phase spaces each user's turns (--user-centric-rate)")
    if kind == "fixed_schedule":
        raise _unreplayed(label, "its fixed_schedule phase replays a trace's timestamps (--fixed-schedule)")
    raise BenchFormatError(f"{TOOL}: {label}: phase type {kind!r:.40} is not concurrency, poisson, gamma, constant, "
                           "user_centric or fixed_schedule")


def _load(config: Any, label: str) -> tuple[Any, Any, list[str]]:
    """(concurrency, rate, notes) of the run: genai-perf's and AIPerf's settings, else AIPerf's phase.

    AIPerf (``UserConfig.validate_timing_mode``) schedules by ``--fixed-schedule`` (or a trace's
    timestamps), then ``--user-centric-rate``, then ``--request-rate`` (``--concurrency`` a cap),
    then ``--concurrency`` alone; the first two are refused."""
    if _setting(config, ("input", "fixed_schedule")):
        raise _unreplayed(label, "it replays a trace's timestamps (input.fixed_schedule)")
    if _setting(config, ("loadgen", "user_centric_rate")) is not None:
        raise _unreplayed(label, "it spaces each user's turns (loadgen.user_centric_rate)")
    clients = _setting(config, ("perf_analyzer", "stimulus", "concurrency"), ("loadgen", "concurrency"),
                       ("concurrency",))
    rate = _setting(config, ("perf_analyzer", "stimulus", "request_rate"), ("loadgen", "request_rate"),
                    ("request_rate",))
    if clients is not None or rate is not None:
        pattern = _setting(config, ("loadgen", "arrival_pattern"), ("loadgen", "request_rate_mode"))
        smoothness = _setting(config, ("loadgen", "arrival_smoothness"))
        if pattern is None and smoothness is not None:  # AIPerf then sets the gamma pattern
            pattern = "gamma"
        return clients, rate, _arrivals_note(label, pattern, smoothness) if rate is not None else []
    phase = _measured_phase(config)
    return _phase_load(phase, label) if phase else (None, None, [])


def _unstreamed(data: Any, label: str) -> list[str]:
    """A note on the latencies a run does not record (not streamed: neither)."""
    missing = [key for key in STREAMED if lookup(data, TOOL, label, key, required=False) is None]
    if len(missing) == len(STREAMED):
        return [f"{label}: not streamed (no time_to_first_token or inter_token_latency): TTFT and TPOT not "
                "measured; its output throughput is compared"]
    return [f"{label}: no {missing[0]} in the export: not compared"] if missing else []


def _failed(data: Any, label: str, completed: Any) -> list[str]:
    """A note on the requests that failed (AIPerf's ``error_summary``: ``count`` per error, or
    its ``error_request_count`` metric)."""
    summary, source = data.get("error_summary"), "error_summary"
    counts = [e.get("count") for e in summary if isinstance(e, dict)] if isinstance(summary, list) else []
    if not counts and isinstance(data.get("error_request_count"), dict):
        counts, source = [data["error_request_count"].get("avg")], "error_request_count"
    failed = sum(c for c in counts if isinstance(c, (int, float)) and not isinstance(c, bool) and c > 0)
    if not failed:
        return []
    of = f"the {completed:g} completed" if isinstance(completed, (int, float)) else "the completed ones"
    return [f"{label}: {failed:g} request(s) failed ({source}); the means are of {of}"]


def read(data: Any, label: str) -> list[BenchRun]:
    """The run of one profile export.

    Raises
    ------
    BenchFormatError
        A required metric is missing or malformed.
    """
    if _aggregate(data):
        raise BenchFormatError(f"{TOOL}: {label}: {_AGGREGATE}")
    for key in REQUIRED:
        lookup(data, TOOL, label, key)
    if data.get("was_cancelled") is True:
        raise BenchFormatError(f"{TOOL}: {label}: the run was cancelled before it finished (was_cancelled: true): a "
                               "partial run's figures are no steady state; not predicted (give a run that completed)")
    config = data.get("input_config") or {}
    models = _setting(config, ("model_names",), ("endpoint", "model_names"), ("model",))
    if models is None and isinstance(_setting(config, ("models", "items")), list):  # AIPerf's newer layout
        models = [item.get("name") for item in config["models"]["items"] if isinstance(item, dict)]
    model = models[0] if isinstance(models, list) and models else models if isinstance(models, str) else None
    count = _avg(data, label, "request_count", required=False) if isinstance(data.get("request_count"), dict) \
        else _setting(config, ("request_count",), ("loadgen", "request_count"))
    metrics = {
        "ttft_ms": _avg(data, label, "time_to_first_token", time=True, required=False),
        "tpot_ms": _avg(data, label, "inter_token_latency", time=True, required=False),
        "output_tokens_per_s": _avg(data, label, "output_token_throughput", rate=True),
    }
    clients, rate, notes = _load(config, label)
    notes += _unstreamed(data, label) + _failed(data, label, count)
    if clients is None and rate is None:  # neither tool sends everything at once: an unread load is no offline run
        raise BenchFormatError(f"{TOOL}: {label}: the export records no load this reader knows (input_config's "
                               "concurrency or request_rate): not predicted, as any load assumed would be a guess")
    return [BenchRun(tool="genai-perf", id=label, metrics=metrics_of(metrics),
                     isl=_avg(data, label, "input_sequence_length", length=True),
                     osl=_avg(data, label, "output_sequence_length", length=True),
                     concurrency=concurrency_of(clients, f"{TOOL}: {label}: concurrency"),
                     request_rate=rate_of(rate, f"{TOOL}: {label}: request_rate"),
                     num_requests=count_of(count, f"{TOOL}: {label}: request_count"), model=model,
                     prompts=_prompt_pool(config, label), notes=tuple(notes))]
