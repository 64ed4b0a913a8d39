"""Speed-up of a sweep, a plan and a validation on a local Dask cluster of 2 worker processes.

Run with ``make bench`` (needs the ``dask`` extra). Each figure is the best of 3 runs (one for
the validation, after one run on each side for the sweep and the plan), serial and on the
cluster (started once, before timing), printed in seconds and as the ratio serial / cluster
(above 1: a speed-up). The results are checked identical. Asserts nothing.
On a machine with fewer free cores than workers the ratio stays near or below 1; a sweep
moves ~100 bytes per point back from the workers, so it gains only when its points are costly.
"""

from __future__ import annotations

import json
import time

import numpy as np

import inferlab
from inferlab.cluster import dask_client
from inferlab.planning.planner import plan
from inferlab.planning.scenario import load_scenario
from inferlab.validation.cases import load_cases
from inferlab.validation.units import predict_cases_on


def _best(fn, repeat=3):
    best, value = np.inf, None
    for _ in range(repeat):
        start = time.perf_counter()
        value = fn()
        best = min(best, time.perf_counter() - start)
    return best, value


def main() -> None:
    grid = dict(precision=["bf16", "fp8"], batch_size=np.arange(1, 513), isl=np.arange(256, 8192, 256), osl=[128, 1024])
    models, gpus = ["llama-3.1-8b", "llama-3.1-70b", "qwen3-30b-a3b"], ["h100-sxm", "h200-sxm", "b200"]
    scenario = load_scenario("examples/scenarios/chat.yaml")
    cases = load_cases()
    jobs = {
        f"sweep, {len(models) * len(gpus) * 2 * 2 * 512 * 31 * 2:,} points": (
            lambda c: inferlab.sweep(models, gpus, client=c, tp=[1, 4], **grid),
            lambda t: json.dumps({k: t[k].tolist() for k in t.columns}, default=str), 3),
        "plan examples/scenarios/chat.yaml": (lambda c: plan(scenario, c), lambda p: json.dumps(p.to_dict(), default=str),
                                              3),
        f"validate {len(cases):,} public cases": (lambda c: predict_cases_on(cases, client=c), repr, 1),
    }
    with dask_client(workers=2) as client:
        for label, (run, canonical, repeat) in jobs.items():
            if repeat > 1:
                run(None), run(client)  # warm both sides (catalogs, memos, worker imports)
            serial, a = _best(lambda: run(None), repeat)
            spread, b = _best(lambda: run(client), repeat)
            same = canonical(a) == canonical(b)
            print(f"{label:<36} serial {serial:7.2f} s  2 workers {spread:7.2f} s  speed-up {serial / spread:4.2f}x"
                  f"  identical: {same}")


if __name__ == "__main__":
    main()
