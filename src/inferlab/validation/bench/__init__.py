"""Benchmark outputs users already have, read as validation cases.

One module per tool: :mod:`.vllm_bench` (``vllm bench serve --save-result``),
:mod:`.sglang_bench` (``sglang.bench_serving`` JSONL), :mod:`.genai_perf` (genai-perf and
AIPerf profile exports), :mod:`.guidellm` (guidellm reports) and :mod:`.trtllm_bench`
(``trtllm-bench`` JSON report or printed report). :func:`read_bench` tells the tool from
the content (or takes ``fmt``) and gives :class:`~.run.BenchRun` values;
:func:`bench_cases` turns them into :class:`~inferlab.validation.cases.Case` values with
the deployment of :mod:`.deployment`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ...errors import SpecError
from ...specs.validation import read_text
from ..cases import Case
from . import genai_perf, guidellm, sglang_bench, trtllm_bench, vllm_bench
from .deployment import GivenDeployment, assumed_layout, given_deployment, layout_unknown, model_mismatch, run_cases
from .run import BenchFormatError, BenchRun, each_run

#: ``--format`` values and the tool each reads.
FORMATS = {"vllm": vllm_bench.TOOL, "sglang": sglang_bench.TOOL, "genai-perf": genai_perf.TOOL,
           "aiperf": genai_perf.TOOL, "guidellm": guidellm.TOOL, "trtllm-bench": trtllm_bench.TOOL}

__all__ = ["FORMATS", "BenchFormatError", "BenchRun", "GivenDeployment", "bench_cases", "detect_format",
           "given_deployment", "read_bench"]


def _json(text: str) -> Any:
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return None


def _json_lines(text: str) -> list[Any] | None:
    lines = [line for line in text.splitlines() if line.strip()]
    parsed = [_json(line) for line in lines]
    return parsed if parsed and all(isinstance(p, dict) for p in parsed) else None


def _first_json_line(text: str) -> Any:
    """The first non-blank line of ``text`` parsed as JSON (None if it is not)."""
    first = next((line for line in text.splitlines() if line.strip()), "")
    return _json(first)


def _json_error(text: str) -> str:
    """Why ``text`` that starts as JSON is not (an empty string when it does not start so)."""
    if not text.lstrip().startswith(("{", "[")):
        return ""
    try:
        json.loads(text)
    except ValueError as exc:
        return (f"it starts as JSON but is not valid JSON: {getattr(exc, 'msg', exc)} (line "
                f"{getattr(exc, 'lineno', '?')}, column {getattr(exc, 'colno', '?')}); cut short?")
    except RecursionError:
        return "it nests deeper than a JSON reader follows"
    return ""


def _bad_line(text: str) -> int | None:
    """The number of the first non-blank line that is not a JSON object (None: every one is)."""
    for number, line in enumerate(text.splitlines(), 1):
        if line.strip() and not isinstance(_json(line), dict):
            return number
    return None


def detect_format(text: str) -> str | None:
    """The ``--format`` of a benchmark output from its content, or None for none known."""
    data = _json(text)
    if isinstance(data, dict):
        for fmt, module in (("trtllm-bench", trtllm_bench), ("genai-perf", genai_perf), ("guidellm", guidellm),
                            ("vllm", vllm_bench), ("sglang", sglang_bench)):
            test = module.looks_like_json if module is trtllm_bench else module.looks_like
            if test(data):
                return fmt
        return None
    first = _first_json_line(text) if data is None else None
    if isinstance(first, dict) and sglang_bench.looks_like(first):  # told by its first line; a bad later one is named
        return "sglang"
    if isinstance(first, dict) and vllm_bench.looks_like(first):  # vllm bench serve --append-result: a run a line
        return "vllm"
    if data is None and trtllm_bench.looks_like_text(text):
        return "trtllm-bench"
    return None


def read_bench(path: str | Path, fmt: str | None = None) -> list[BenchRun]:
    """The runs of one benchmark output file.

    Parameters
    ----------
    path : str or Path
        The tool's output file.
    fmt : str, optional
        One of :data:`FORMATS`; default: told from the content.

    Raises
    ------
    SpecError
        A file that cannot be read or is no known tool's output (with ``fmt``: a
        :class:`BenchFormatError` naming the tool and the field it could not find).
    """
    label = str(path)
    text = read_text(path, f"bench file {label}")
    if fmt is None:
        fmt = detect_format(text)
        if fmt is None:
            other = genai_perf.other_export(text, _json(text))
            if other:
                raise SpecError(f"bench file {label}: {other}")
            if "[TRT-LLM]" in text:  # a TensorRT-LLM log (its lines open with a [date] that reads as JSON)
                errors = [line.strip() for line in text.splitlines() if "[E]" in line]
                last = f" Its last error line: {errors[-1][:160]}" if errors else ""
                raise SpecError(f"bench file {label}: a TensorRT-LLM log without trtllm-bench's report (no 'PERFORMANCE "
                                f"OVERVIEW' or 'Total Output Throughput (tokens/sec):' line): did the run stop before it "
                                f"finished?{last}")
            broken = _json_error(text)
            if broken and _first_json_line(text) is None:
                raise SpecError(f"bench file {label}: {broken}")
            raise SpecError(f"bench file {label}: not the output of a known benchmark tool "
                            f"({', '.join(dict.fromkeys(FORMATS.values()))}); give --format {{{','.join(FORMATS)}}}")
    elif fmt not in FORMATS:
        raise SpecError(f"bench file {label}: unknown --format {fmt!r}; one of {', '.join(FORMATS)}")
    else:  # another tool's output named: the field it lacks, and which tool's it reads as
        told = detect_format(text)
        if told is not None and FORMATS[told] != FORMATS[fmt]:
            hint = f"it reads as {FORMATS[told]} output: give --format {told}, or leave --format out"
            try:
                _read_as(fmt, text, label)
            except BenchFormatError as exc:
                said = str(exc)
                raise BenchFormatError(f"{said} {hint[0].upper()}{hint[1:]}" if said.endswith("?")
                                       else f"{said}; {hint}") from None
            # its fields read as this tool's (SGLang's and vLLM's share most): the file is still the other's
            raise BenchFormatError(f"{FORMATS[fmt]}: {label}: not {FORMATS[fmt]} output; {hint}")
    return _read_as(fmt, text, label)


def _read_as(fmt: str, text: str, label: str) -> list[BenchRun]:
    """The runs of ``text`` read as tool ``fmt``'s output."""
    tool = FORMATS[fmt]
    data = _json(text)
    if fmt == "sglang":
        lines = [data] if isinstance(data, dict) else _json_lines(text)
        if lines is None:
            bad = _bad_line(text)
            where = f"line {bad} is not a JSON object" if bad else "not JSON lines"
            raise BenchFormatError(f"{tool}: {label}: {where} (one result object per line)")
        return sglang_bench.read(lines, label)
    if fmt == "trtllm-bench":
        if isinstance(data, dict):
            return trtllm_bench.read(data, label)
        reports = trtllm_bench.split_reports(text)
        if len(reports) == 1:
            return trtllm_bench.read_text(text, label)
        return each_run(reports, lambda i, report: trtllm_bench.read_text(report, f"{label}#{i + 1}")[0], tool, label)
    lines = _json_lines(text) if fmt == "vllm" and not isinstance(data, dict) else None
    if lines is not None:  # --append-result writes one result object per line
        return each_run(lines, lambda i, line: vllm_bench.read(line, f"{label}#{i + 1}")[0], tool, label)
    if not isinstance(data, dict):
        broken = _json_error(text)
        other = genai_perf.other_export(text, data) if fmt in ("genai-perf", "aiperf") else None
        raise BenchFormatError(f"{tool}: {label}: {other or broken or 'not a JSON object'}")
    module = {"vllm": vllm_bench, "genai-perf": genai_perf, "aiperf": genai_perf, "guidellm": guidellm}[fmt]
    return module.read(data, label)


def bench_cases(paths: Sequence[str | Path], given: GivenDeployment, fmt: str | None = None, *,
                require_layout: bool = False) -> tuple[list[Case], list[str]]:
    """The validation cases of benchmark files, and notes on what of them is not used.

    A run whose file records no parallelism, beside no ``--engine-args`` or ``--deployment``,
    is modelled as tp 1 in the checkpoint's formats, with a note; ``require_layout``
    (``calibrate``: a profile fitted to an assumed layout is a wrong profile) refuses it.

    Raises
    ------
    SpecError
        A file that cannot be read or is not its tool's output (when it is the only one, or
        every one is such; among several, it is named in the notes and the others are read),
        or one that lacks a model or GPU that ``given`` does not supply either; with
        ``require_layout``, a run whose layout is unknown.
    """
    cases: list[Case] = []
    notes = list(given.notes)
    unread: list[SpecError] = []
    skipped: list[str] = []  # runs of another model than the deployment given names
    assumed: list[BenchRun] = []  # runs modelled at tp 1: neither the file nor the flags give a layout
    for path in paths:
        try:
            runs = read_bench(path, fmt)
        except SpecError as exc:  # one unreadable file among several: the others are still predicted
            if len(paths) == 1:
                raise
            unread.append(exc)
            notes.append(f"{path}: not read: {exc}")
            continue
        for run in runs:
            tool = FORMATS[run.tool]
            mismatch = model_mismatch(run, given)
            if mismatch and not run.layout:  # the layout and flags given are another run's: not this one's
                skipped.append(mismatch)
                notes.append(f"{mismatch}; not predicted")
                continue
            if layout_unknown(run, given):
                if require_layout:
                    raise SpecError(assumed_layout([run], refused=True))
                assumed.append(run)
            if mismatch:  # the file records its own layout too (trtllm-bench): its deployment on the GPU given
                notes.append(f"{run.id}: the file records its deployment, of the model {run.model}, not the "
                             f"{given.source}'s: predicted as the file records it, on the {given.hardware} given")
            run_cases_, run_notes = run_cases(run, GivenDeployment(hardware=given.hardware) if mismatch else given,
                                              tool, f"{tool} {path}")
            cases += run_cases_
            notes += [*run.notes, *run_notes]
            if run.engine and given.engine and run.engine.split("-")[0] != given.engine.split("-")[0]:
                notes.append(f"{run.id}: the file records the {run.engine} engine, the {given.source} "
                             f"{given.engine}: predicted as {run.engine}")
    if assumed:
        notes.append(assumed_layout(assumed))
    if unread and len(unread) == len(paths):
        raise unread[0]
    if skipped and not cases:
        raise SpecError(skipped[0])
    return cases, notes
