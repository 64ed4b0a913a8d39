"""Speed of the fleet simulation against the target of issue 12: a 24-hour day at 20
request/s average (about 1.7 million requests over 10-50 replicas) in under 60 s on one core.

Prints figures; asserts nothing (a noisy machine cannot fail it). Simulates one hour of
that day's traffic at its mean rate (72,000 requests, 20 replicas, least-outstanding
routing, the signals sampled as often as over the day) and, as the reference measured in
the same run, the same requests on one replica by :func:`inferlab.serve`'s engine alone
(``serve`` at 1/20 of the rate, 3,600 requests);
reports requests simulated per second of both, their ratio, and the day's projected time.
``--profile`` prints the cProfile of the fleet case; ``--day`` also simulates the whole day
(24 hours at 20 request/s over 20 replicas, about 1.7 million requests: over a minute) and
prints its time against the target itself.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")  # one core: no threaded BLAS

import cProfile
import pstats
import sys
import time

import inferlab
from inferlab.serving.serve import serve

DAY_REQUESTS = 20.0 * 86400.0
TARGET_S = 60.0
#: The day's sampling period (a fleet samples its signals 2,000 times over its horizon): the hour
#: samples as densely as the day it stands for, not 24 times more often.
DAY_SAMPLE_S = 86400.0 / 2000.0


def _fleet(horizon_s: float = 3600.0) -> tuple[float, int]:
    start = time.perf_counter()
    r = inferlab.fleet("llama-3.1-8b", "h100-sxm", replicas=20, horizon_s=horizon_s,
                       traffic={"rate": 20.0, "isl": 1500, "osl": 250}, sample_s=DAY_SAMPLE_S)
    return time.perf_counter() - start, len(r.arrival)


def _reference() -> tuple[float, int]:
    start = time.perf_counter()
    r = serve("llama-3.1-8b", "h100-sxm", engine="vllm", isl=1500, osl=250, rate=1.0, num_requests=3600)
    return time.perf_counter() - start, len(r.trace.arrival)


def main() -> None:
    serve("llama-3.1-8b", "h100-sxm", rate=1.0, num_requests=10)  # imports and caches
    ref_s, ref_n = min(_reference() for _ in range(2))
    if "--profile" in sys.argv:
        prof = cProfile.Profile()
        prof.enable()
    fleet_s, fleet_n = _fleet()
    if "--profile" in sys.argv:
        prof.disable()
        pstats.Stats(prof).sort_stats("cumulative").print_stats(25)
    ref_rate, fleet_rate = ref_n / ref_s, fleet_n / fleet_s
    day_s = DAY_REQUESTS / fleet_rate
    print(f"serve() alone, one replica: {ref_rate:10,.0f} requests/s simulated ({ref_n} in {ref_s:.2f} s)")
    print(f"fleet of 20 replicas:       {fleet_rate:10,.0f} requests/s simulated ({fleet_n} in {fleet_s:.2f} s)")
    print(f"fleet / serve() speed:      {fleet_rate / ref_rate:10.2f}")
    print(f"a day at 20 req/s ({DAY_REQUESTS:,.0f} requests): ~{day_s:,.0f} s projected; target {TARGET_S:.0f} s "
          f"({day_s / TARGET_S:.1f}x the target; {DAY_REQUESTS / TARGET_S:,.0f} requests/s needed)")
    if "--day" in sys.argv:
        whole_s, whole_n = _fleet(86400.0)
        print(f"the whole day simulated:    {whole_n:10,} requests in {whole_s:.1f} s "
              f"({whole_n / whole_s:,.0f} requests/s; {whole_s / TARGET_S:.2f}x the {TARGET_S:.0f} s target)")


if __name__ == "__main__":
    main()
