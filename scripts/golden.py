"""A golden grid of predictions, to show a refactor changes no number.

    python scripts/golden.py write golden.json     # before the change
    python scripts/golden.py diff golden.json      # after it: every figure that moved

The grid: estimates over models, GPUs, layouts, formats, engines, batches and lengths (TTFT,
TPOT, throughput, memory per GPU), serve() runs at a rate and a concurrency per engine (mean
TTFT, TPOT, throughput), and every public validation case's prediction. ``diff`` compares
with a relative tolerance of 1e-12 (``--rtol``) and exits 1 when anything moved or went
missing, printing the largest changes first.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from typing import Any

ESTIMATES = [
    ("llama-3.1-8b", "h100-sxm", {}),
    ("llama-3.1-70b", "h100-sxm", {"tp": 4, "precision": "fp8", "engine": "trtllm"}),
    ("llama-3.1-70b", "b200", {"tp": 4, "precision": "nvfp4", "engine": "trtllm"}),
    ("llama-3.1-405b", "h100-sxm", {"tp": 8, "pp": 2, "precision": "fp8", "engine": "trtllm"}),
    ("deepseek-v3", "h200-sxm", {"tp": 8, "precision": "fp8", "engine": "sglang"}),
    ("deepseek-v3", "b200", {"tp": 8, "ep": 8, "attention_dp": True, "precision": "nvfp4", "engine": "trtllm-pytorch"}),
    ("gpt-oss-120b", "h100-sxm", {"engine": "vllm"}),
    ("qwen3-30b-a3b", "l40s", {"tp": 2, "engine": "vllm"}),
    ("llama-3.1-8b", "mi300x", {"precision": "fp8"}),
    ("llama-3.1-8b", "m2-ultra", {}),
    ("llama-3.1-8b", "h100-sxm:3g.40gb", {}),
]
SERVES = [
    ("llama-3.1-8b", "h100-sxm", {"engine": "vllm", "rate": 6.0}),
    ("llama-3.1-8b", "h100-sxm", {"engine": "sglang", "concurrency": 32}),
    ("llama-3.1-70b", "h100-sxm", {"tp": 4, "precision": "fp8", "engine": "trtllm", "rate": 3.0}),
    ("deepseek-v3", "h200-sxm", {"tp": 8, "ep": 8, "attention_dp": True, "precision": "fp8",
                                 "engine": "trtllm-pytorch", "concurrency": 64}),
]


def grid() -> dict[str, float]:
    """Every figure of the golden grid, by a stable name."""
    import numpy as np

    import inferlab
    from inferlab.validation.cases import load_cases
    from inferlab.validation.predict import predict_cases

    out: dict[str, float] = {}
    for model, hw, kw in ESTIMATES:
        est = inferlab.estimate(model, hw, isl=[128, 2048, 8192], osl=[256], batch_size=[1, 8, 64], waves=True, **kw)
        name = f"estimate {model} {hw} {json.dumps(kw, sort_keys=True)}"
        for field in ("ttft_s", "tpot_s", "output_tokens_per_s"):
            for i, v in enumerate(np.ravel(np.asarray(getattr(est, field), float))):
                out[f"{name} {field}[{i}]"] = float(v)
    for model, hw, kw in SERVES:
        r = inferlab.serve(model, hw, isl=1024, osl=128, num_requests=300, seed=1, **kw)
        name = f"serve {model} {hw} {json.dumps(kw, sort_keys=True)}"
        out[f"{name} ttft"] = float(np.mean(r.ttft_s))
        out[f"{name} tpot"] = float(np.nanmean(r.tpot_s))
        out[f"{name} tok/s"] = float(r.output_tokens_per_s)
    cases = load_cases(None)  # the public cases shipped with the package, closed loop included
    for case, (value, _) in zip(cases, predict_cases(cases)):
        out[f"case {case.id}"] = math.nan if value is None else float(value)
    return out


def _same(a: float, b: float, rtol: float) -> bool:
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return abs(a - b) <= rtol * max(abs(a), abs(b)) or a == b


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("action", choices=("write", "diff"))
    parser.add_argument("file")
    parser.add_argument("--rtol", type=float, default=1e-12)
    args = parser.parse_args(argv)
    now = grid()
    if args.action == "write":
        with open(args.file, "w", encoding="utf-8") as fh:
            json.dump(now, fh, indent=0, sort_keys=True)
        print(f"wrote {len(now):,} figures to {args.file}")
        return 0
    with open(args.file, encoding="utf-8") as fh:
        before = json.load(fh)
    moved = [(k, before[k], now[k]) for k in before if k in now and not _same(before[k], now[k], args.rtol)]
    missing, added = sorted(set(before) - set(now)), sorted(set(now) - set(before))
    moved.sort(key=lambda t: -abs(t[2] - t[1]) / max(abs(t[1]), 1e-300) if not math.isnan(t[1]) else 0.0)
    for k, a, b in moved[:40]:
        print(f"moved   {k}: {a!r} -> {b!r}")
    for k in missing[:20]:
        print(f"missing {k}")
    for k in added[:20]:
        print(f"new     {k}")
    print(f"{len(now):,} figures: {len(moved)} moved, {len(missing)} missing, {len(added)} new (rtol {args.rtol:g})")
    return 1 if moved or missing else 0


if __name__ == "__main__":
    sys.exit(main())
