"""Fuzz every entry point with many inputs and print how each ended.

    .venv/bin/python benchmarks/fuzz.py [--examples 10000] [--only calc,estimate]

Counts per entry point: ok, clean errors, foreign exceptions, escaped warnings, non-finite or
negative outputs, calls over 5 s; then the first few inputs of each defect kind. Exit code 1
when any defect was found.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path

from hypothesis import HealthCheck, given, settings

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from fuzzing import OUTCOMES, classify, entries  # noqa: E402


def fuzz(entry, examples: int) -> tuple[Counter, dict[str, list[str]]]:
    counts: Counter = Counter()
    samples: dict[str, list[str]] = {}

    @settings(max_examples=examples, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(entry.inputs())
    def run(value):
        outcome = classify(entry, value)
        counts[outcome.kind] += 1
        if outcome.kind not in ("ok", "clean_error") and len(samples.setdefault(outcome.kind, [])) < 5:
            samples[outcome.kind].append(f"{value!r:.200}: {outcome.detail}")

    run()
    return counts, samples


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=10_000)
    parser.add_argument("--only", default="", help="comma-separated entry names")
    args = parser.parse_args()
    wanted = {n for n in args.only.split(",") if n}
    print(f"{'entry':<18}" + "".join(f"{k:>12}" for k in OUTCOMES))
    defects = 0
    for entry in entries():
        if wanted and entry.name not in wanted:
            continue
        counts, samples = fuzz(entry, args.examples)
        print(f"{entry.name:<18}" + "".join(f"{counts[k]:>12}" for k in OUTCOMES), flush=True)
        for kind, lines in samples.items():
            defects += counts[kind]
            for line in lines:
                print(f"    {kind}: {line}")
    return 1 if defects else 0


if __name__ == "__main__":
    raise SystemExit(main())
