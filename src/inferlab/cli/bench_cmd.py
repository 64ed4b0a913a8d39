"""``--bench FILE...`` of ``inferlab validate`` and ``inferlab calibrate``: the user's own
benchmark outputs (vLLM, SGLang, genai-perf / AIPerf, guidellm, trtllm-bench) as cases.

The deployment a file does not record comes from ``--engine-args`` or ``--deployment``,
the GPU from ``--gpu``; what of a file is not used is printed as warnings on stderr.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shlex
import sys
from pathlib import Path
from typing import Any

from ..errors import SpecError
from ..results.table import text_table


#: ``--format`` values: the keys of :data:`inferlab.validation.bench.FORMATS`, named here so
#: that building the parser does not load the readers (a test checks they agree).
FORMAT_NAMES = ("aiperf", "genai-perf", "guidellm", "sglang", "trtllm-bench", "vllm")


def add_bench_flags(parser: argparse.ArgumentParser, *, calibrate: bool = False) -> None:
    """Add ``--bench``, ``--format``, ``--engine-args``, ``--deployment``, ``--gpu`` (and for
    ``calibrate``: ``--holdout``, ``--profile``)."""
    group = parser.add_argument_group("benchmark outputs")
    group.add_argument("--bench", nargs="+", metavar="FILE",
                       help="benchmark outputs: vllm bench serve --save-result JSON, sglang.bench_serving JSONL, "
                            "genai-perf/AIPerf profile export, guidellm report, trtllm-bench report or log")
    group.add_argument("--format", choices=FORMAT_NAMES, default=None,
                       help="read every --bench file as this tool's output (default: told from the content)")
    group.add_argument("--engine-args", metavar="COMMAND", default=None,
                       help="the engine's launch command, quoted ('vllm serve MODEL -tp 2 ...'): the deployment "
                            "where a file does not record it")
    group.add_argument("--deployment", metavar="FILE", default=None,
                       help="a deployment file (model, layout, precision, engine): the deployment where a file "
                            "does not record it")
    group.add_argument("--gpu", metavar="ID", default=None, help="the GPU the runs used (catalog id)")
    if calibrate:
        group.add_argument("--holdout", type=float, default=0.5, metavar="SHARE",
                           help="share of the runs kept out of the fit to score it (default 0.5)")
        group.add_argument("--profile", default="default",
                           help="profile the fit starts from: default, roofline or a YAML path")


def bench_case_list(args: argparse.Namespace, calibrate: bool = False) -> list[Any]:
    """The cases of ``--bench``, after printing what of the files is not used (``calibrate``: a
    file whose layout nothing gives is refused, not assumed)."""
    from ..validation.bench import bench_cases, given_deployment

    seen: dict[Any, str] = {}
    for name in args.bench:  # a file given twice would be predicted (and fitted) twice
        key = Path(name).resolve()
        if key in seen:
            raise SpecError(f"--bench: {name} is given twice{'' if seen[key] == name else f' (as {seen[key]})'}; "
                            "each file once")
        seen[key] = name
    given = given_deployment(engine_args=args.engine_args, deployment=args.deployment, gpu=args.gpu)
    cases, notes = bench_cases(args.bench, given, args.format, require_layout=calibrate)
    for note in dict.fromkeys(notes):
        print(f"inferlab: warning: {note}", file=sys.stderr)
    if not cases:
        raise SpecError(f"--bench: no measured metric in {' '.join(args.bench)}")
    return cases


def _ms_or_factor(term: str, value: float) -> str:
    return f"{value * 1e3:.3f} ms" if term.endswith("_s") else f"{value:.3f}"


def calibrate_bench(args: argparse.Namespace) -> None:
    """``inferlab calibrate --bench FILE... --out PATH``."""
    from ..fitting.bench import TERMS, fit_bench, profile_yaml

    cases = bench_case_list(args, calibrate=True)
    report = fit_bench(cases, profile=args.profile, holdout=args.holdout)
    if report.held_out_runs == 0:
        print(f"inferlab: warning: no run held out ({report.fit_runs} run(s) in all): nothing checks the fit; give "
              "more runs (each file line or benchmark is a run)", file=sys.stderr)
    if report.fit_runs < 2:
        print(f"inferlab: warning: one run fitted for {len(TERMS)} terms: one load and one length cannot tell a "
              "fixed cost from a per-token one; runs at several loads and lengths separate them", file=sys.stderr)
    parts = ["--bench", *args.bench, *(["--engine-args", args.engine_args] if args.engine_args else []),
             *(["--deployment", args.deployment] if args.deployment else []),
             *(["--gpu", args.gpu] if args.gpu else []), "--holdout", str(args.holdout), "--out", args.out]
    command = "inferlab calibrate " + " ".join(shlex.quote(str(p)) for p in parts)
    epoch = os.environ.get("SOURCE_DATE_EPOCH")  # a reproducible date, as the op-level calibration writes
    when = datetime.datetime.fromtimestamp(int(epoch), datetime.timezone.utc) if epoch else \
        datetime.datetime.now(datetime.timezone.utc)
    source = (f"fitted by `{command}` on {when.date().isoformat()}, from profile {args.profile}: "
              f"{len(cases)} measured metrics of {report.fit_runs + report.held_out_runs} benchmark runs")
    try:
        with open(args.out, "w", encoding="utf-8") as fh:
            fh.write(profile_yaml(report, source))
    except OSError as exc:
        raise SpecError(f"calibrate: cannot write {args.out} ({exc.strerror or exc})") from None
    if args.json:
        print(json.dumps(report.to_dict(), indent=2, default=float))
        return
    pinned = report.pinned
    for t, side in pinned.items():
        print(f"inferlab: warning: {t} fitted at its {side} bound ({_ms_or_factor(t, report.fitted[t])}): the runs "
              f"ask for {'more' if side == 'upper' else 'less'} than its physical range; are they of this GPU, engine "
              "and model (--gpu, --engine-args)?", file=sys.stderr)
    rows = [[t, _ms_or_factor(t, report.start[t]), _ms_or_factor(t, report.fitted[t]),
             f"at its {pinned[t]} bound" if t in pinned else
             "" if t in report.identified else "not identified by these runs: kept"] for t in TERMS]
    rows += [[t, f"{v * 1e6:.2f} us", f"{v * 1e6:.2f} us", "kept: per kernel of the forward pass, beside the "
              "per-iteration term"] for t, v in report.kept.items()]
    pct = lambda v: "-" if v != v else f"{v:.1f}%"  # noqa: E731 - NaN: no cases on that side
    err = report.errors
    lines = [f"wrote {args.out} (use it with --profile {args.out})", "",
             text_table(["term", "start", "fitted", ""], rows, right={1, 2}), "",
             text_table(["median |error|", "runs", f"profile {args.profile}", "calibrated"],
                        [["fit", str(report.fit_runs), pct(err["before_fit"]), pct(err["after_fit"])],
                         ["held out", str(report.held_out_runs), pct(err["before_held_out"]),
                          pct(err["after_held_out"])]], right={1, 2, 3})]
    print("\n".join(lines))
