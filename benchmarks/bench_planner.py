"""Speed of the planner: the fluid search (issue 6 target: 10,000 configurations in under 10 s
on one core), and apart from it the sizing of leading configurations by simulation.

Run with ``make bench``. Prints figures, each also as a multiple of a reference measured in the
same run (one :func:`inferlab.estimate` of Llama-3.1-8B on an H100 at a batch not seen before,
the work of one operating point); asserts nothing. A *configuration* is one
candidate (model, GPU, precision, TP, EP, speculation, aggregated or disaggregated), each
evaluated at every batch limit of the planner's grid; the space below has 10,920 of them.
The three cheapest feasible ones are then sized by simulation, as ``plan()`` does with
``verify: 3``.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")  # one core: no threaded BLAS

import statistics
import time

from inferlab.planning.scenario import load_scenario
from inferlab.planning.curve import _BATCHES
from inferlab.planning.search import candidates, evaluate
from inferlab.planning.sizing import size_by_simulation

SCENARIO = {
    "name": "benchmark",
    "models": ["llama-3.1-8b", "llama-3.1-70b", "qwen3-32b", "qwen3-30b-a3b", "mixtral-8x7b", "gemma-3-27b",
               "qwen3-8b", "mistral-7b", "llama-3.3-70b", "gpt-oss-20b", "phi-3-mini", "llama-2-13b"],
    "hardware": ["h100-sxm", "h200-sxm", "b200", "l40s", "a100-sxm-80gb", "mi300x", "h100-pcie", "gb200",
                 "mi355x", "rtx-pro-6000", "b300", "h20", "l4"],
    "engine": "vllm",
    "traffic": {"rate": 20, "isl": 1500, "osl": 300},
    "slo": {"ttft_ms": 1500, "tpot_ms": 50},
    "search": {"precisions": ["bf16", "fp8", "int4", "nvfp4"], "tp": [1, 2, 4, 8],
               "speculative": [None, "eagle:k=3,accept=0.7"], "disaggregation": True},
    "verify": 0,
}


def reference_s(repeat: int = 20) -> float:
    """Median time of one estimate() at a new batch size (the caches warm, the grid point new)."""
    from inferlab import estimate

    estimate("llama-3.1-8b", "h100-sxm", batch_size=1)
    times = []
    for b in range(2, 2 + repeat):
        start = time.perf_counter()
        estimate("llama-3.1-8b", "h100-sxm", batch_size=b)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    ref = reference_s()
    print(f"reference: one estimate() at a new batch {ref * 1e3:.2f} ms")
    scenario = load_scenario(SCENARIO)
    configs = candidates(scenario)
    evaluate(scenario, configs[0])  # catalog, profile and import caches
    start = time.perf_counter()
    results = [evaluate(scenario, c) for c in configs]
    elapsed = time.perf_counter() - start
    feasible = sum(r.feasible for r in results)
    print(f"planner search: {len(configs):,} configurations ({len(SCENARIO['models'])} models x "
          f"{len(SCENARIO['hardware'])} GPUs x precision, TP, EP, speculation, aggregated/disaggregated), "
          f"{feasible:,} feasible, {elapsed:.2f} s = {len(configs) / elapsed:,.0f} configurations/s; each one "
          f"evaluated at {len(_BATCHES)} batch limits ({len(configs) * len(_BATCHES):,} operating points); "
          f"{elapsed / len(configs) * 1e3:.2f} ms a configuration = {elapsed / len(configs) / ref:.1f}x the reference")
    leaders = sorted((r for r in results if r.feasible), key=lambda c: c.usd_per_hour)[:3]
    start = time.perf_counter()
    sized = [size_by_simulation(scenario, c) for c in leaders]
    elapsed = time.perf_counter() - start
    probes = sum(len(c.probes) for c in sized)
    counts = ", ".join(f"{c.label} {c.seed_replicas} -> {c.replicas if c.feasible else 'none'}"
                       for c in sized)
    print(f"sizing by simulation: {len(sized)} configurations, {probes} simulations, {elapsed:.2f} s "
          f"= {elapsed / ref:,.0f}x the reference "
          f"(fluid seed -> simulated replicas: {counts})")


if __name__ == "__main__":
    main()
