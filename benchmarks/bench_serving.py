"""Speed of the serving simulation: 10,000 requests online (Poisson) and in a closed loop.

Run with ``make bench``. Prints figures; asserts nothing (a noisy machine cannot fail it).
Targets: a 10,000-request simulation in under 1 s on one core (issue 5), and under 1.5 s
with speculative decoding and a prefix cache (issue 11), printed as well as a ratio to the
plain simulation of the same deployment and load measured in the same run (1.5 / 1.0 is
the target ratio on any machine). ``--profile`` prints the cProfile of the slowest case.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")  # one core: no threaded BLAS

import cProfile
import pstats
import sys
import time

from inferlab.serving.serve import serve

CASES = (
    ("llama-3.1-8b", "h100-sxm", 1, "bf16", {"rate": 8.0}),
    ("llama-3.1-8b", "h100-sxm", 1, "bf16", {"concurrency": 64}),
    ("llama-3.1-70b", "h100-sxm", 4, "fp8", {"rate": 6.0}),
    ("llama-3.1-70b", "h100-sxm", 4, "fp8", {"concurrency": 64}),
    ("llama-3.1-70b", "h100-sxm", 4, "fp8", {"offline": True}),
)


#: speculation and a prefix cache on the first case (the reference is that case without them)
TECHNIQUES = {"speculative": "eagle:k=4,accept=0.7", "prefix": "shared:tokens=1024,groups=16"}


def _run(model: str, hw: str, tp: int, precision: str, load: dict, **techniques: str) -> tuple[float, object]:
    start = time.perf_counter()
    result = serve(model, hw, tp=tp, precision=precision, engine="vllm", isl=2048, osl=256, num_requests=10_000,
                   **load, **techniques)
    return time.perf_counter() - start, result


def main() -> None:
    serve("llama-3.1-8b", "h100-sxm", rate=1.0, num_requests=10)  # imports, catalog and profile caches
    slowest = (0.0, CASES[0])
    for case in CASES:
        model, hw, tp, precision, load = case
        t, r = min((_run(*case) for _ in range(3)), key=lambda x: x[0])
        (mode, value), = load.items()
        print(f"10,000 requests, {model} on {tp}x {hw} {precision}, {mode} {value}: {t:5.2f} s "
              f"({r.trace.preemptions} preemptions, {len(r.trace.itl_values):,} iterations or stretches)")
        slowest = max(slowest, (t, case), key=lambda x: x[0])
    reference = min(_run(*CASES[0])[0] for _ in range(3))
    t, r = min((_run(*CASES[0], **TECHNIQUES) for _ in range(3)), key=lambda x: x[0])
    model, hw, tp, precision, load = CASES[0]
    print(f"10,000 requests, {model} on {tp}x {hw} {precision}, rate {load['rate']}, {TECHNIQUES['speculative']}, "
          f"prefix {TECHNIQUES['prefix']}: {t:5.2f} s, {t / reference:.2f}x the plain run ({reference:.2f} s; "
          f"hit rate {r.prefix_hit_rate:.0%}, {r.tokens_per_step:.2f} tokens per step)")
    if "--profile" in sys.argv:
        prof = cProfile.Profile()
        prof.runcall(_run, *slowest[1])
        pstats.Stats(prof).sort_stats("cumulative").print_stats(18)


if __name__ == "__main__":
    main()
