"""``inferlab plan SCENARIO.yaml``: the cheapest configurations that serve a scenario within its SLOs."""

from __future__ import annotations

import argparse
from typing import Any

from .args import add_cluster_flags, output_file

_COLUMNS = """columns:
  replicas     the fewest replicas the request-level simulation shows meeting the SLOs ('sized by'
               sim), searched down and up from the fluid model's estimate; 'fluid' rows keep that
               estimate (configurations not simulated: verify, or too costly to win)
  TTFT, TPOT   the SLO percentile at those replicas [ms]: 'sim' from the simulation, 'fluid' the
               fluid model's estimate of the same load (offline jobs: the job's duration [h])
  headroom     traffic growth those replicas absorb before an SLO is missed (sim: simulated, a
               lower bound found by bisection on the rate; fluid: the fluid model's capacity)
  binding      what is missed first as traffic grows (an SLO, the deadline; fluid rows: the
               limit at the next concurrency)
  sized by     sim, fluid, or sim* (simulated without speculation / prefix cache, which the
               serving simulation does not model yet)
exits 1 when no configuration is feasible (each one's reason on stderr)"""


def add_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    """Register ``plan`` on the subcommand parser."""
    p = sub.add_parser("plan", parents=[common], help="search configurations for a scenario file, cheapest first",
                       epilog=_COLUMNS, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("scenario", metavar="SCENARIO.yaml")
    p.add_argument("--top", type=int, default=15, help="rows to print (default 15)")
    p.add_argument("--verify", type=int, default=None, help="configurations to size by simulation (default: the file's; 0: fluid model only)")
    p.add_argument("--plot", metavar="FILE", type=output_file, help="write the Pareto front (PNG or SVG) with the choice marked")
    p.add_argument("--launch", metavar="ENGINE", choices=["vllm", "sglang", "trtllm-pytorch", "trtllm", "all"],
                   help="print the winner's launch command for vllm, sglang, trtllm-pytorch, trtllm or all, with the "
                        "scheduler limits the plan assumed")
    add_cluster_flags(p)
    p.flag_names["allow_long_context"] = "allow_long_context: true (a key of the scenario file)"
    p.flag_names["precision_weights"] = "the scenario file's search: precisions"
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> None:
    """Run ``inferlab plan``."""
    from ..checks import integer
    from ..cluster import dask_client
    from ..errors import InfeasibleError
    from ..planning.planner import plan
    from ..planning.scenario import load_scenario
    from .output import emit as _emit

    top = integer("--top", args.top, maximum=10**6, what="rows")
    scenario = load_scenario(args.scenario)
    if args.verify is not None:
        scenario = scenario.model_copy(update={"verify": integer("--verify", args.verify, minimum=0, maximum=100,
                                                                 what="candidates")})
    with dask_client(args.workers, args.scheduler) as client:
        try:
            result = plan(scenario, client)  # raises InfeasibleError, each configuration's reason, when nothing is feasible
        except InfeasibleError as exc:  # --json: every configuration's reason still on stdout, the one line on stderr
            if args.json and getattr(exc, "plan", None) is not None:
                _emit(args, exc.plan.to_dict(), "")
            raise
    text = result.__str__(limit=top) + "\n\n" + result.explain()
    if args.plot:
        from ..planning.plot import write_plan_plot

        write_plan_plot(result, args.plot)
        text += f"\nPareto front written to {args.plot}"
    data = result.to_dict()
    if args.launch and result.best is not None and result.best.disaggregated:  # the plan stands; no one command
        why = (f"no launch command: the winner {result.best.label} runs prefill and decode on separate pools, each "
               "launched with its engine's own disaggregation setup, which inferlab does not write")
        text += f"\n\n{why}"
        data["launch"] = {"unexpressed": why}
    elif args.launch:
        from ..planning.launch import winner_commands

        commands = winner_commands(result, args.launch)
        text += "\n\nlaunch commands of the winner:\n" + "\n".join(c.script for c in commands).rstrip("\n")
        data["launch"] = {c.engine: {"script": c.script, "unexpressed": [dict(field=f, reason=r) for f, r in c.unexpressed]}
                          for c in commands}
    _emit(args, data, text)

