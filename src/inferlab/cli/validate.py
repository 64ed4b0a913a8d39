"""``inferlab validate`` and ``inferlab calibrate``: predictions against measurements.

``validate`` predicts validation cases (the public ones shipped in the package, or case
files) and optionally an op-level CSV, printing per-case errors and a summary per regime
and metric. ``calibrate`` fits a profile to an op-level CSV and cases and writes it; with ``--bench`` both work on the user's own benchmark outputs
(:mod:`.bench_cmd`).
"""

from __future__ import annotations

import argparse
import json
import shlex
from typing import TYPE_CHECKING, Any

from ..errors import InfeasibleError, SpecError
from ..results.table import text_table
from .args import add_cluster_flags, output_path
from .bench_cmd import add_bench_flags

if TYPE_CHECKING:
    from ..validation.summary import ErrorStats


def _print(text: str) -> None:
    print(text)


def _check_profile(profile: str) -> None:
    """Resolve the profile once up front: an unknown name is one error, not one per case."""
    from ..calibration.profile import load_profile

    load_profile(profile, "generic", "h100-sxm", "hopper")


def _refuse_bench_only(args: argparse.Namespace, command: str) -> None:
    """Refuse the flags that describe ``--bench`` files where none is given (they would be ignored)."""
    given = [flag for flag, value in (("--format", args.format), ("--engine-args", args.engine_args),
                                      ("--deployment", args.deployment), ("--gpu", args.gpu)) if value is not None]
    if given:  # they say what a benchmark output does not record; case files state their own deployments
        raise SpecError(f"{command}: {', '.join(given)} describe{'s' if len(given) == 1 else ''} --bench files "
                        "(what a benchmark output does not record), and none is given: give --bench files, or "
                        f"drop {'it' if len(given) == 1 else 'them'}")


def _case_records(args: argparse.Namespace) -> list[dict[str, Any]]:
    from ..cluster import dask_client
    from ..validation.cases import InvalidCase, load_case_entries
    from ..validation.units import predict_cases_on

    _check_profile(args.profile)
    if args.bench:
        from .bench_cmd import bench_case_list

        if args.files:
            raise SpecError("validate: give case files or --bench files, not both")
        cases = bench_case_list(args)
    else:
        _refuse_bench_only(args, "validate")
        cases = load_case_entries(args.files or None)
    where = " ".join(args.bench or args.files) if args.bench or args.files else "the public case files"
    if not cases:
        raise SpecError(f"validate: no cases in {where}; add cases under 'cases:' (schema inferlab-cases/1)")
    if all(isinstance(c, InvalidCase) for c in cases):
        raise SpecError(f"validate: none of the {len(cases)} cases in {where} follows the schema; "
                        f"the first: {cases[0].reason}")
    with dask_client(args.workers, args.scheduler) as client:
        predictions = predict_cases_on(cases, args.profile, client)
    records = [{"id": c.id, "regime": c.regime, "metric": c.metric, "measured": c.measured, "predicted": p, "reason": r}
            for c, (p, r) in zip(cases, predictions)]
    if records and all(r["predicted"] is None for r in records):
        raise InfeasibleError(f"none of the {len(records)} cases could be predicted; the first: {records[0]['reason']}")
    return records


def _op_stats(table: Any, profile: str) -> list[ErrorStats]:
    from ..fitting.fit import op_error_stats
    from ..validation.ops import predict_ops

    return op_error_stats(table, predict_ops(table, profile), "op")


def _validate(args: argparse.Namespace) -> None:
    from ..validation.summary import percent_errors, stats_rows, summarize

    from ..validation.ops import read_ops

    table = read_ops(args.ops) if args.ops else None  # a bad file fails before the cases run
    records = _case_records(args)
    stats = summarize(records)
    ops = _op_stats(table, args.profile) if table is not None else []
    if args.json:
        out: Any = records if not args.ops else {"cases": records, "ops": [s.to_dict() for s in ops]}
        _print(json.dumps(out, indent=2, default=float))
        return
    rows = []
    for r in records:
        measured = "-" if r["measured"] is None else f"{r['measured']:.4g}"
        if r["predicted"] is None:
            rows.append([r["id"], r["metric"], measured, "-", "-", r["reason"]])
        else:
            err = float(percent_errors(r["predicted"], r["measured"]))
            rows.append([r["id"], r["metric"], f"{r['measured']:.4g}", f"{r['predicted']:.4g}", f"{err:+.1f}", ""])
    lines = [text_table(["case", "metric", "measured", "predicted", "error %", "not predicted because"], rows,
                        right={2, 3, 4}), "", f"summary (profile {args.profile}):"]
    headers, summary = stats_rows(stats)
    lines.append(text_table(headers, summary, right={2, 3, 4, 5, 6}))
    if ops:
        headers, op_rows = stats_rows(ops)
        lines += ["", f"op latency ({args.ops}):",
                  text_table(["op", "n", *headers[4:]], [[r[1], r[2], *r[4:]] for r in op_rows], right={1, 2, 3, 4})]
    _print("\n".join(lines))


def _calibrate(args: argparse.Namespace) -> None:
    from ..fitting.fit import calibrate, profile_yaml, source_for
    from ..validation.cases import load_cases
    from ..validation.ops import read_ops
    from ..validation.summary import stats_rows

    if args.bench:
        from .bench_cmd import calibrate_bench

        if args.ops or args.cases:
            raise SpecError("calibrate: --bench fits a profile to benchmark runs alone; drop --ops and --cases")
        return calibrate_bench(args)
    _refuse_bench_only(args, "calibrate")
    if not args.ops:
        raise SpecError("calibrate: give --ops FILE.csv (op-level measurements) or --bench FILE... (benchmark outputs)")
    table = read_ops(args.ops)
    cases = load_cases(args.cases or None)
    parts = ["--ops", args.ops, *(["--cases", *args.cases] if args.cases else []), "--out", args.out]
    command = "inferlab calibrate " + " ".join(shlex.quote(str(p)) for p in parts)
    report = calibrate(table, cases, source=source_for(args.ops, args.cases or None, len(table), command))
    text = profile_yaml(report)
    try:
        with open(args.out, "w", encoding="utf-8") as fh:
            fh.write(text)
    except OSError as exc:
        raise SpecError(f"calibrate: cannot write {args.out} ({exc.strerror or exc})") from None
    if args.json:
        _print(json.dumps(report.to_dict(), indent=2, default=float))
        return
    lines = [f"wrote {args.out}"]
    for title, stats in (("op latency, in sample", report.op_in_sample),
                         ("op latency, each GPU left out of the fit", report.op_leave_one_gpu_out),
                         ("cases, fit half", report.cases_fit), ("cases, held-out half", report.cases_held_out)):
        headers, rows = stats_rows(stats)
        lines += ["", f"{title}:", text_table(headers, rows, right={2, 3, 4, 5, 6})]
    _print("\n".join(lines))


def add_parsers(subparsers: Any, common_parent: argparse.ArgumentParser) -> None:
    """Register ``validate`` and ``calibrate`` on the ``inferlab`` sub-command parser."""
    val = subparsers.add_parser("validate", parents=[common_parent],
                                help="predict measured cases (and op latencies) and report the errors")
    val.add_argument("files", nargs="*", metavar="FILE",
                     help="case files (schema inferlab-cases/1); default: the public cases shipped with inferlab")
    val.add_argument("--ops", metavar="FILE.csv", help="also predict an op-level CSV (schema inferlab-ops/1)")
    val.add_argument("--profile", default="default", help="calibration profile: default, roofline or a YAML path")
    add_cluster_flags(val)
    add_bench_flags(val)
    val.set_defaults(func=_validate)

    cal = subparsers.add_parser("calibrate", parents=[common_parent],
                                help="fit a calibration profile to op-level measurements and cases, or to benchmark runs")
    cal.add_argument("--ops", metavar="FILE.csv", help="op-level CSV (schema inferlab-ops/1)")
    cal.add_argument("--cases", nargs="+", metavar="FILE",
                     help="case files for the step terms; default: the public cases shipped with inferlab")
    cal.add_argument("--out", required=True, metavar="PATH", type=output_path, help="where to write the profile YAML")
    add_bench_flags(cal, calibrate=True)
    cal.set_defaults(func=_calibrate)

