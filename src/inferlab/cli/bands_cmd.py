"""``inferlab error-bands``: regenerate the error-band table of a profile from the validation cases."""

from __future__ import annotations

import argparse
import json
import shlex
from typing import Any

from ..errors import SpecError
from ..results.table import text_table
from .args import output_path


def add_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    """Register ``error-bands`` on the subcommand parser."""
    p = sub.add_parser("error-bands", parents=[common],
                       help="build the error-band table (prediction intervals) of a profile from the validation cases",
                       description="Predict the validation cases with a profile, build the table of residual "
                                   "quantiles per quantity, regime, GPU family and engine from the fit half, and "
                                   "report its coverage on the held-out half. Run it after `inferlab calibrate` "
                                   "or any change of the physics.")
    p.add_argument("files", nargs="*", metavar="FILE",
                   help="case files (schema inferlab-cases/1); default: the public cases shipped with inferlab")
    p.add_argument("--profile", default="default", help="default or a profile YAML path (default: default)")
    p.add_argument("--out", required=True, metavar="PATH", type=output_path,
                   help="where to write the table (the shipped one: src/inferlab/calibration/profiles/"
                        "default-error-bands.yaml; for a profile X.yaml: X-error-bands.yaml)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> None:
    """Run ``inferlab error-bands``."""
    from ..calibration.band_files import table_yaml
    from ..fitting.error_bands import fit_error_bands
    from ..validation.cases import PUBLIC_FILES, load_cases
    from .output import emit as _emit

    parts = [*args.files, *(["--profile", args.profile] if args.profile != "default" else []), "--out", args.out]
    command = "inferlab error-bands " + " ".join(shlex.quote(str(p)) for p in parts)
    labels = list(args.files) or [f"the shipped {name}" for name in PUBLIC_FILES]
    report = fit_error_bands(load_cases(args.files or None), args.profile, command=command, case_labels=labels)
    try:
        with open(args.out, "w", encoding="utf-8") as fh:
            fh.write(table_yaml(report.table))
    except OSError as exc:
        raise SpecError(f"error-bands: cannot write {args.out} ({exc.strerror or exc})") from None
    rows = [[q, g, str(n), f"{share:.0%}"] for q, g, n, share in report.coverage_rows(0.8)]
    overall = ", ".join(f"{level:g}: {share:.1%}" for level, share in report.table.coverage)
    text = "\n".join([f"wrote {args.out} ({len(report.table.cells)} cells)",
                      "held-out half inside the 80% band:",
                      text_table(["quantity", "regime", "cases", "inside"], rows, right={2, 3}),
                      f"all held-out cases inside the band of each level: {overall}"])
    data = {"out": args.out, "cells": len(report.table.cells), "source": report.table.source,
            "coverage_held_out": dict(report.table.coverage),
            "coverage_80_by_cell": [{"quantity": q, "regime": g, "cases": n, "inside": s}
                                    for q, g, n, s in report.coverage_rows(0.8)]}
    _emit(args, json.loads(json.dumps(data)), text)
