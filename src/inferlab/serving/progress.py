"""A text progress bar on stderr for runs of several simulations.

It draws only when stderr is a terminal, never under pytest, and only once a run has
taken longer than ``after_s``: short runs stay silent.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Self, TextIO


def progress_enabled(stream: TextIO | None = None) -> bool:
    """Whether a bar may be drawn on ``stream`` (stderr by default)."""
    stream = stream or sys.stderr
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty()) and "PYTEST_CURRENT_TEST" not in os.environ


class Progress:
    """``[#####-----] 5/10 label`` on one line, redrawn after each step.

    Parameters
    ----------
    total : int
        Steps of the run.
    label : str
        Text after the counter.
    enabled : bool, optional
        Force on or off; by default on for a terminal outside tests, for two steps or more.
    after_s : float [s]
        Draw nothing until the run has taken this long.
    """

    width = 30

    def __init__(self, total: int, label: str = "", *, enabled: bool | None = None, after_s: float = 1.0,
                 stream: TextIO | None = None):
        self.total, self.label, self.after_s = total, label, after_s
        self.stream = stream or sys.stderr
        self.enabled = (progress_enabled(self.stream) and total > 1) if enabled is None else enabled
        self.done = 0
        self.start = time.perf_counter()
        self.drawn = False

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def step(self, note: str = "") -> None:
        """One step finished; ``note`` describes it."""
        self.done += 1
        elapsed = time.perf_counter() - self.start
        if not self.enabled or elapsed < self.after_s:
            return
        filled = round(self.width * self.done / max(self.total, 1))
        bar = "#" * filled + "-" * (self.width - filled)
        eta = elapsed / self.done * (self.total - self.done)
        self.stream.write(f"\r[{bar}] {self.done}/{self.total} {self.label} {note} ({elapsed:.0f} s, ~{eta:.0f} s left)"
                          "\x1b[K")
        self.stream.flush()
        self.drawn = True

    def close(self) -> None:
        """Erase the bar."""
        if self.drawn:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
            self.drawn = False
