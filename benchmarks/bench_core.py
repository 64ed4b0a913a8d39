"""Speed of the roofline core: one estimate, and a million-point sweep.

Run with ``make bench``. Prints figures; asserts nothing (a noisy machine cannot fail it).
Targets (issue 13): one warm estimate <= 0.2 ms for a dense model, <= 0.4 ms for MoE/MLA
(DeepSeek-V3); a sweep >= 2,000,000 points/s on one core at <= 200 bytes per point.

"repeated" calls the same estimate again (its step graphs and timings come from the memos,
as in a planner that revisits a configuration); "new batch" changes the batch size every
call, so each call builds and times its steps.
"""

from __future__ import annotations

import time
import tracemalloc

import numpy as np

from inferlab.phases.estimate import estimate
from inferlab.phases.sweep import sweep


def _best(fn, repeat):
    best = np.inf
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    for model, hw, tp in (("llama-3.1-8b", "h100-sxm", 1), ("llama-3.1-70b", "h100-sxm", 4), ("deepseek-v3", "b200", 8)):
        estimate(model, hw, tp=tp, precision="fp8", isl=2048, osl=256, batch_size=8)
        t = _best(lambda: estimate(model, hw, tp=tp, precision="fp8", isl=2048, osl=256, batch_size=8), 200)
        batches = iter(range(9, 10_000))
        fresh = _best(lambda: estimate(model, hw, tp=tp, precision="fp8", isl=2048, osl=256, batch_size=next(batches),
                                       waves=True), 200)
        print(f"one estimate, {model} on {tp}x {hw}: {t * 1e3:6.3f} ms repeated, {fresh * 1e3:6.3f} ms with a new batch")
    grid = {"batch_size": np.arange(1, 101), "isl": np.arange(128, 4096, 40), "osl": np.arange(64, 2048, 20)}
    points = len(grid["batch_size"]) * len(grid["isl"]) * len(grid["osl"])
    run = lambda: sweep("llama-3.1-70b", "h100-sxm", tp=4, precision="fp8", **grid)  # noqa: E731
    t = _best(run, 3)
    tracemalloc.start()
    run()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    # reference measured in the same run: one float64 multiply-add over the same number of points
    x, y = np.random.default_rng(0).random(points), np.random.default_rng(1).random(points)
    ref = _best(lambda: x * y + x, 5)
    print(f"sweep of {points:,} points (llama-3.1-70b, 4x h100-sxm): {t:6.2f} s = {points / t:,.0f} points/s, "
          f"peak {peak / points:.0f} bytes/point; {t / ref:.0f}x numpy's x * y + x over as many points "
          f"({ref * 1e3:.1f} ms; 2 M points/s is 0.5 s)")


if __name__ == "__main__":
    main()
