"""Start-up time: how long a fresh process takes to answer, as a ratio to importing numpy.

Run with ``make bench`` (or ``python benchmarks/bench_startup.py [--repeat N]``). Each figure
is the median wall time of N fresh processes, printed in ms and as a multiple of the
reference measured in the same run, ``python -c "import numpy"``; on a busy machine both
move together, so the ratio is the figure to compare. Asserts nothing.

Targets (issue 13): ``inferlab --help`` and ``inferlab hardware list`` within 3x the
reference, the first estimate within 6x. "warm" runs after one run has filled the on-disk
memo of parsed specs (:mod:`inferlab.disk_cache`); "cold" runs with it off.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

_CLI = "from inferlab.cli.main import main; raise SystemExit(main())"
_ESTIMATE = "import inferlab; inferlab.estimate('llama-3.1-8b', 'h100-sxm')"

#: (label, argv after the interpreter, target ratio or None, cache on)
CASES: list[tuple[str, list[str], float | None, bool]] = [
    ("python -c 'import inferlab'", ["-c", "import inferlab"], None, True),
    ("inferlab --help", ["-c", _CLI, "--help"], 3.0, True),
    ("inferlab hardware list (warm)", ["-c", _CLI, "hardware", "list"], 3.0, True),
    ("inferlab hardware list (cold)", ["-c", _CLI, "hardware", "list"], None, False),
    ("inferlab models list (warm)", ["-c", _CLI, "models", "list"], None, True),
    ("first inferlab.estimate() (warm)", ["-c", _ESTIMATE], 6.0, True),
    ("first inferlab.estimate() (cold)", ["-c", _ESTIMATE], None, False),
    ("inferlab estimate llama-3.1-8b h100-sxm", ["-c", _CLI, "estimate", "llama-3.1-8b", "h100-sxm"], 6.0, True),
]


def wall(argv: list[str], env: dict[str, str], repeat: int) -> float:
    """Median wall time [s] of ``repeat`` fresh interpreters running ``argv``."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        subprocess.run([sys.executable, *argv], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                       check=True)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7, help="fresh processes per figure (median)")
    repeat = parser.parse_args().repeat
    with tempfile.TemporaryDirectory() as cache:
        warm = {**os.environ, "INFERLAB_CACHE_DIR": cache}
        cold = {**os.environ, "INFERLAB_CACHE_DIR": "off"}
        for _, argv, _, _ in CASES:  # fill the memo, and the OS file cache
            subprocess.run([sys.executable, *argv], env=warm, stdout=subprocess.DEVNULL, check=True)
        reference = wall(["-c", "import numpy"], warm, repeat)
        print(f"reference: python -c 'import numpy'  {reference * 1e3:7.1f} ms  (median of {repeat})")
        for label, argv, target, cached in CASES:
            t = wall(argv, warm if cached else cold, repeat)
            goal = f"   target <= {target:g}x" if target else ""
            print(f"{label:<42} {t * 1e3:7.1f} ms  {t / reference:5.2f}x numpy{goal}")


if __name__ == "__main__":
    main()
