"""A sweep, a plan and a validation spread over a Dask cluster, with the serial results.

Needs the ``dask`` extra (pip install 'inferlab[dask]'). Run: .venv/bin/python examples/dask_cluster.py

``dask_client(workers=2)`` starts a local cluster of 2 processes; any
``dask.distributed.Client`` works the same (``Client("tcp://scheduler:8786")`` for a
cluster of many machines, or ``inferlab plan ... --scheduler tcp://scheduler:8786``).
"""

import json

import numpy as np

import inferlab
from inferlab.cluster import dask_client
from inferlab.planning.planner import plan
from inferlab.planning.scenario import load_scenario
from inferlab.validation.cases import load_cases
from inferlab.validation.units import predict_cases_on

if __name__ == "__main__":  # the worker processes import this file; only the parent runs it
    grid = dict(precision=["bf16", "fp8"], batch_size=np.arange(1, 257), isl=[512, 2048, 8192], osl=[128, 1024])
    scenario = load_scenario("examples/scenarios/chat.yaml").model_copy(update={"verify": 1})
    cases = [c for c in load_cases() if c.regime == "static_batch"]
    serial = (inferlab.sweep(["llama-3.1-8b", "qwen3-30b-a3b"], ["h100-sxm", "h200-sxm"], **grid),
              json.dumps(plan(scenario).to_dict(), default=str), predict_cases_on(cases))
    with dask_client(workers=2) as client:
        table = inferlab.sweep(["llama-3.1-8b", "qwen3-30b-a3b"], ["h100-sxm", "h200-sxm"], client=client, **grid)
        chosen = json.dumps(plan(scenario, client).to_dict(), default=str)
        predicted = predict_cases_on(cases, client=client)
    same = all(np.array_equal(table[k], serial[0][k], equal_nan=table[k].dtype.kind == "f") for k in table.columns)
    print(f"sweep of {len(table):,} points on 2 workers: identical to the serial sweep: {same}")
    print(f"plan of {scenario.name!r}: identical: {chosen == serial[1]}")
    print(f"{len(cases)} static-batch cases validated: identical: {predicted == serial[2]}")
    best = table.best("output_tokens_per_s_per_gpu")
    print(f"most tokens/s per GPU: {best['model']} on {best['hardware']} at {best['precision']}, "
          f"batch {best['batch_size']:.0f}")
