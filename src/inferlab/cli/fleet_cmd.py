"""``inferlab fleet SCENARIO.yaml``: a fleet of replicas simulated over a day."""

from __future__ import annotations

import argparse
from typing import Any

from .args import output_file


def add_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    """Register ``fleet`` on the subcommand parser."""
    p = sub.add_parser("fleet", parents=[common], help="simulate a fleet (router, autoscaler, failures, cost) "
                                                        "from a scenario file with a fleet: section")
    p.add_argument("scenario", metavar="SCENARIO.yaml")
    p.add_argument("--hours", type=float, default=None, help="simulate this many hours instead of the file's")
    p.add_argument("--rate-scale", type=float, default=1.0,
                   help="multiply every traffic rate by this (a quick run: 0.1)")
    p.add_argument("--plot", metavar="FILE", type=output_file, help="write replicas, queue, P99 TTFT and spend "
                                                                    "over time (PNG or SVG)")
    p.flag_names["allow_long_context"] = "allow_long_context: true (a key of the scenario file)"
    p.flag_names["precision_weights"] = "the scenario file's search: precisions"
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> None:
    """Run ``inferlab fleet``."""
    from pathlib import Path

    from ..errors import InfeasibleError, SpecError, placed
    from ..fleet.cascade import run_scenario
    from ..fleet.scenario import load_fleet_scenario
    from ..results.render import duration_text
    from ..serving.progress import Progress
    from .output import emit as _emit

    kwargs = load_fleet_scenario(args.scenario)
    if args.hours is not None:
        from ..fleet.api import MAX_HORIZON_S

        if not 0 < args.hours <= MAX_HORIZON_S / 3600.0:  # a leap year, as the file's fleet.hours
            raise SpecError(f"--hours must be in (0, {MAX_HORIZON_S / 3600.0:.0f}], got {args.hours}")
        kwargs["horizon_s"] = args.hours * 3600.0
    if not 0 < args.rate_scale <= 1e3:
        raise SpecError(f"--rate-scale must be in (0, 1000], got {args.rate_scale}")
    if args.rate_scale != 1.0 and "traffic" not in kwargs and "trace" in kwargs:  # a trace's arrivals are the recorded ones
        raise SpecError("--rate-scale scales the scenario's traffic rates; a trace replays its recorded arrival "
                        "times (thin or cut the trace's CSV instead)")
    if args.rate_scale != 1.0 and "traffic" in kwargs:  # (neither: the fleet says what to give)
        from ..checks import real

        classes = kwargs["traffic"] if isinstance(kwargs["traffic"], list) else [kwargs["traffic"]]
        # each rate checked as written before it is scaled (the error quotes the file's value)
        kwargs["traffic"] = [{**c, **{k: real(f"traffic {k}", c[k], minimum=0.0, unit="request/s") * args.rate_scale
                                      for k in ("rate", "peak_rate") if k in c}} if isinstance(c, dict) else c
                             for c in classes]
    horizon = kwargs.get("horizon_s", 3600.0)
    with Progress(100, "simulated") as bar:
        def tick(t: float) -> None:
            while bar.done < min(int(100 * t / horizon), 99):
                bar.step(duration_text(t))
        try:
            result = run_scenario(kwargs, tick)
        except (SpecError, InfeasibleError) as exc:  # the file the values came from, where the message does not name it
            name = Path(args.scenario).name
            if name in str(exc):
                raise
            raise placed(exc, name) from None
    text = f"{result}\n\n{result.explain()}"
    if args.plot:
        result.plot(args.plot)
        text += f"\nplot written to {args.plot}"
    _emit(args, result.to_dict, text)
