"""A closed loop's clients between rounds, as ``explain()`` says them.

A closed loop's first round is a burst: every client sends its first prompt at once, so
those prompts queue behind each other's prefill. What follows depends on the benchmark, not
the engine: clients whose output lengths vary drift out of step and later prompts arrive
one by one (the simulation's default, :meth:`~inferlab.inputs.workload.Workload.turnaround`);
clients of a fixed-length benchmark (``ignore_eos``, one output length) that finish together
send together again, each round a burst (``stagger=False``, ``inferlab serve --lockstep``).
A benchmark's mean TTFT weighs its opening burst by its share of the run's requests.
"""

from __future__ import annotations

from typing import Any

import numpy as np


def closed_loop_lines(result: Any) -> list[str]:
    """``explain()`` lines of a closed loop of more than one round: the first round's mean
    TTFT beside the later requests', and how the clients were taken to behave between rounds;
    none for other loads."""
    workload = result.workload
    clients = workload.concurrency
    ttft = np.asarray(result.ttft_s, float)
    if not clients or clients < 2 or workload.rate is not None or len(ttft) <= clients:
        return []
    first, later = float(np.mean(ttft[:clients])), float(np.mean(ttft[clients:]))
    rounds = len(ttft) / clients
    # the simulated stream: one of the data-parallel replicas or pipeline batches it stands for
    n = result.replicas
    each = ("" if n == 1 else f" in the simulated stream (one of {n:g})" if float(n).is_integer()
            else f" in the simulated stream (of the {round(clients * n)} in all)")
    lines = [f"closed loop of {clients:,} clients{each}, {rounds:.1f} requests each: the first round's prompts "
             f"arrive together (mean TTFT {first * 1e3:.1f} ms), the later {len(ttft) - clients:,} requests wait "
             f"{later * 1e3:.1f} ms on average; a benchmark's mean weighs the opening burst by its share of the run"]
    if workload.stagger:
        lines.append("after the first round the clients are spread out of step, as a benchmark whose output lengths "
                     "vary settles; one with fixed output lengths (ignore_eos) can keep them in step, each round a "
                     "burst: --lockstep (Workload stagger=False) simulates that, a higher mean TTFT")
    else:
        lines.append("the clients stay in step (lockstep): each round's prompts arrive together as the round before "
                     "finishes together, as in a benchmark with fixed output lengths")
    return lines
