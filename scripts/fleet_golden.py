"""Every number of a few fleets, saved and compared bit for bit (the golden grid of
``scripts/golden.py`` covers no fleets).

    python scripts/fleet_golden.py write /tmp/fleet-golden.npz
    python scripts/fleet_golden.py diff /tmp/fleet-golden.npz
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

import inferlab
from inferlab.fleet import fleet_of
from inferlab.fleet.cascade import run_scenario
from inferlab.fleet.scenario import load_fleet_scenario

M, G = "llama-3.1-8b", "h100-sxm"
SYD, USE = "ap-southeast-2", "us-east-1"
EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "scenarios" / "fleet-day.yaml"


def _day() -> object:
    kw = load_fleet_scenario(EXAMPLE)
    kw["horizon_s"] = 0.3 * 3600.0
    kw["traffic"] = [{**c, **{k: c[k] * 0.3 for k in ("rate", "peak_rate") if k in c}} for c in kw["traffic"]]
    return run_scenario(kw)


CASES = {
    "bench600": lambda: inferlab.fleet(M, G, replicas=20, horizon_s=600.0, traffic={"rate": 20.0, "isl": 1500, "osl": 250}),
    "daily_queue": lambda: inferlab.fleet(M, G, replicas=2, horizon_s=1800.0, seed=3,
                                          traffic={"shape": "daily", "rate": 6.0, "amplitude": 0.6, "isl": 1200, "osl": 200},
                                          autoscaler={"signal": "queue", "target": 2.0, "min_replicas": 1, "max_replicas": 8}),
    "failures": lambda: inferlab.fleet(M, G, replicas=4, horizon_s=1800.0, seed=7,
                                       traffic={"rate": 6.0, "isl": 800, "osl": 150},
                                       failures={"replica_mtbf_h": 0.3, "detection_s": 30.0, "restart_s": 60.0}),
    "cache_aware": lambda: inferlab.fleet(M, G, replicas=4, horizon_s=600.0, router="cache_aware", seed=1,
                                          traffic={"rate": 8.0, "isl": 900, "osl": 120, "prefix": "sessions:turns=3,think=5"}),
    "random": lambda: inferlab.fleet(M, G, replicas=4, horizon_s=600.0, router="random", seed=2,
                                     traffic={"rate": 8.0, "isl": 900, "osl": 120, "prefix": "sessions:turns=3,think=5"}),
    "router_queue": lambda: inferlab.fleet(M, G, replicas=2, horizon_s=300.0, seed=4,
                                           traffic={"rate": 25.0, "isl": 2000, "osl": 300},
                                           admission={"at": "router", "max_outstanding": 16, "queue_limit": 64,
                                                      "timeout_s": 10.0}),
    "regions": lambda: fleet_of([{"model": M, "hardware": G, "region": SYD, "replicas": 1},
                                 {"model": M, "hardware": G, "region": USE, "replicas": 3}],
                                traffic={"rate": 30.0, "isl": 2000, "osl": 300, "region": SYD}, horizon_s=300.0),
    "overload": lambda: inferlab.fleet(M, G, replicas=2, horizon_s=300.0, seed=3,
                                       traffic={"rate": 40.0, "isl": 3000, "osl": 300}, admission={"timeout_s": 5.0},
                                       failures={"replica_mtbf_h": 0.05, "detection_s": 10, "restart_s": 20}),
    "day": _day,
    # one replica alone (serve's engine, which the fleet's replicas run)
    "serve_vllm": lambda: inferlab.serve(M, G, engine="vllm", isl=1500, osl=250, rate=4.0, num_requests=600),
    "serve_preempt": lambda: inferlab.serve(M, G, engine="vllm", isl=3000, osl=800, rate=30.0, num_requests=600),
    "serve_sglang": lambda: inferlab.serve(M, G, engine="sglang", isl=2000, osl=300, concurrency=64, num_requests=600),
    "serve_trtllm_70b": lambda: inferlab.serve("llama-3.1-70b", G, tp=4, engine="trtllm", isl=1000, osl=200, rate=8.0,
                                               num_requests=400),
}


def collect() -> dict[str, np.ndarray]:
    out = {}
    for name, make in CASES.items():
        start = time.perf_counter()
        made = make()
        print(f"{name}: {time.perf_counter() - start:.2f} s", flush=True)
        if hasattr(made, "trace"):  # serve
            for key, v in ((k, v) for k, v in vars(made.trace).items() if v is not None):
                out[f"{name}.trace.{key}"] = np.asarray(v)
            continue
        if hasattr(made, "escalated_ttft"):  # a cascade: both fleets
            out[f"{name}.escalated_ttft"] = made.escalated_ttft
            parts = {f"{name}.small": made.small, f"{name}.large": made.large}
        else:
            parts = {name: made}
        for part, r in parts.items():
            _save(out, part, r)
    return out


def _save(out: dict[str, np.ndarray], name: str, r: object) -> None:
    for key in ("arrival", "first_token", "finish", "status", "replica", "cached", "ttft"):
        out[f"{name}.{key}"] = np.asarray(getattr(r, key))
    for key, v in r.samples.items():
        out[f"{name}.samples.{key}"] = np.asarray(v)
    out[f"{name}.usd"] = np.asarray(r.usd)
    out[f"{name}.availability"] = np.asarray(r.availability)
    out[f"{name}.events"] = np.asarray([repr(e) for e in r.events])


def main() -> int:
    what, path = sys.argv[1], sys.argv[2]
    now = collect()
    if what == "write":
        np.savez(path, **now)
        print(f"{len(now)} arrays written to {path}")
        return 0
    old = dict(np.load(path))
    moved = [k for k in old if k in now and not np.array_equal(old[k], now[k], equal_nan=old[k].dtype.kind == "f")]
    missing = [k for k in old if k not in now]
    for k in moved + missing:
        print("differs:", k)
    print(f"{len(moved)} moved, {len(missing)} missing of {len(old)}")
    return 1 if moved or missing else 0


if __name__ == "__main__":
    sys.exit(main())
