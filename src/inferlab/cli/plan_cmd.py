"""``inferlab plan SCENARIO.yaml``: the cheapest configurations that serve a scenario within its SLOs."""

from __future__ import annotations

import argparse
from collections import Counter
from typing import Any

from ..checks import integer
from ..errors import InfeasibleError


def add_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    """Register ``plan`` on the subcommand parser."""
    p = sub.add_parser("plan", parents=[common], help="search configurations for a scenario file, cheapest first")
    p.add_argument("scenario", metavar="SCENARIO.yaml")
    p.add_argument("--top", type=int, default=15, help="rows to print (default 15)")
    p.add_argument("--verify", type=int, default=None, help="candidates to re-check by simulation (default: the file's)")
    p.add_argument("--plot", metavar="FILE", help="write the Pareto front (PNG or SVG) with the choice marked")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> None:
    """Run ``inferlab plan``."""
    from ..planning.planner import plan
    from ..planning.scenario import load_scenario
    from .main import _emit

    top = integer("--top", args.top, maximum=10**6, what="rows")
    scenario = load_scenario(args.scenario)
    if args.verify is not None:
        scenario = scenario.model_copy(update={"verify": integer("--verify", args.verify, minimum=0, maximum=100,
                                                                 what="candidates")})
    result = plan(scenario)
    if result.best is None:
        raise InfeasibleError(nothing_feasible(result))
    text = result.__str__(limit=top) + "\n\n" + result.explain()
    if args.plot:
        from ..planning.plot import write_plan_plot

        write_plan_plot(result, args.plot)
        text += f"\nPareto front written to {args.plot}"
    _emit(args, result.to_dict(), text)


def nothing_feasible(result: Any, shown: int = 3) -> str:
    """One line: no configuration serves the scenario, with its most common reasons."""
    reasons = Counter(c.reason or "no reason recorded" for c in result.candidates)
    common = "; ".join(f"{why} ({n}x)" if n > 1 else why for why, n in reasons.most_common(shown))
    more = f"; and {len(reasons) - shown} other reasons" if len(reasons) > shown else ""
    return (f"plan '{result.scenario.name}': none of the {len(result.candidates)} configurations meets the scenario: "
            f"{common}{more}")
