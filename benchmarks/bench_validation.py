"""Speed of validating closed-loop serving cases (issue 13: 4,000 cases <= 15 s on 2 cores).

Run with ``make bench``. Prints figures; asserts nothing (a noisy machine cannot fail it).
The public closed-loop cases (one simulation per deployment, lengths and load) are predicted
serially (one process) and over the default worker processes (the CPUs, at most 8); each time
is scaled to 4,000 cases and printed as a ratio to a reference measured in the same run: a
fixed pure-Python loop (the simulation is interpreter-bound), so the ratio is comparable
across machines and loads. ``--profile`` prints the cProfile of the serial run.
"""

from __future__ import annotations

import cProfile
import pstats
import sys
import time

from inferlab.validation.cases import load_cases
from inferlab.validation.serving import predict_serving_cases, serving_groups


def _reference() -> float:
    """Seconds of a fixed interpreter-bound loop (best of 3)."""
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        total = 0.0
        for i in range(2_000_000):
            total += i * 0.5
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    cases = [c for c in load_cases() if c.regime == "closed_loop"]
    groups, _ = serving_groups(cases)
    predict_serving_cases(cases[:4], workers=1)  # imports, catalog and profile caches
    ref = _reference()
    for label, workers in (("serial", 1), ("default workers", None)):
        start = time.perf_counter()
        predict_serving_cases(cases, workers=workers)
        t = time.perf_counter() - start
        per_4000 = t / len(cases) * 4000
        print(f"{len(cases)} closed-loop cases ({len(groups)} simulations), {label}: {t:5.2f} s; "
              f"4,000 cases {per_4000:5.1f} s = {per_4000 / ref:5.0f}x the reference loop ({ref * 1e3:.0f} ms)")
    if "--profile" in sys.argv:
        prof = cProfile.Profile()
        prof.runcall(predict_serving_cases, cases, workers=1)
        pstats.Stats(prof).sort_stats("tottime").print_stats(25)


if __name__ == "__main__":
    main()
