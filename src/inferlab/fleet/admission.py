"""Bounded queues: how many requests may wait, and for how long, before they fail fast.

With ``at="replica"`` each replica refuses a request when ``queue_limit`` requests already
wait there (sent, not running), and drops one that waited ``timeout_s`` without being
scheduled. With ``at="router"`` the router holds the queue: it sends a request only to a
replica with fewer than ``max_outstanding`` requests (by default its ``max_num_seqs``, and only
while the requests running and sent there do not claim its whole KV pool, as a router that
reads each replica's KV use does), holds at most ``queue_limit`` others, and drops those that
waited ``timeout_s``; one handed over keeps its clock (the timeout counts its wait at both). A
refused or dropped request gets an error at once (the client may retry elsewhere) and counts
as an SLO miss in the goodput.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..checks import integer, real
from ..errors import SpecError

_PLACES = ("replica", "router")


@dataclass(frozen=True)
class Admission:
    """Queue limit and timeout.

    Parameters
    ----------
    queue_limit : int or None [request]
        Requests that may wait (per replica, or at the router); None: unbounded.
    timeout_s : float [s]
        Longest wait before a request is dropped; ``inf``: none.
    at : {"replica", "router"}
    max_outstanding : int or None [request]
        ``at="router"``: requests a replica may hold (default: its ``max_num_seqs``).
    """

    queue_limit: int | None = None
    timeout_s: float = math.inf
    at: str = "replica"
    max_outstanding: int | None = None

    def __post_init__(self) -> None:
        if self.queue_limit is not None:
            # at least 1: a replica counts a request as queued until its prompt is done, so 0 refused every one
            object.__setattr__(self, "queue_limit", integer("admission.queue_limit", self.queue_limit, minimum=1))
        if self.timeout_s != math.inf:
            object.__setattr__(self, "timeout_s", real("admission.timeout_s", self.timeout_s, minimum=0.0,
                                                       include_minimum=False, unit="s"))
        if self.max_outstanding is not None:
            object.__setattr__(self, "max_outstanding", integer("admission.max_outstanding", self.max_outstanding))
        if not isinstance(self.at, str) or self.at not in _PLACES:
            raise SpecError(f"admission.at {self.at!r} is unknown; allowed: {', '.join(_PLACES)}")
        if not self.timeout_s > 0:
            raise SpecError(f"admission.timeout_s must be > 0 s (omit it for no timeout), got {self.timeout_s}")
        if self.max_outstanding is not None and self.max_outstanding < 1:
            raise SpecError(f"admission.max_outstanding must be >= 1 request, got {self.max_outstanding}")
