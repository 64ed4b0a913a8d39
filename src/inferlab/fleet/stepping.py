"""Engine events of the fleet's loop: an engine's next event queued once (superseded ones
dropped by version), and run at once, without the queue, while it comes before every other
event; methods of the event loop (:mod:`.simulation`), apart so that each module holds one
concept."""

from __future__ import annotations

from heapq import heappop, heappush
from typing import Any

from .replicas import Replica
from .states import APPLY, PLAN, TIMED_OUT


class Stepping:
    """Queueing and running the engine events of :class:`~.simulation._Loop`."""

    heap: list
    later: list
    rec: Any
    seq: int
    drain_end: float
    central: Any
    half_rtt: Any
    next_turn: list
    think: list
    arrival: list
    turns: bool
    fixed: tuple  # (heap, later, drain_end, rec, turns, central, loads), set as the loop starts: read by every _engine

    @staticmethod
    def _key(r: Replica) -> tuple[float, int] | None:
        e = r.engine
        if e._plan is not None:  # planned
            return e.plan_end, APPLY
        if e.outstanding > 0 and r._state in ("up", "draining", "failed"):  # busy
            return e.ready_s + 1e-12, PLAN
        return None

    def _schedule(self, r: Replica, key: Any = False) -> None:
        """Queue ``r``'s next event (its pending one stays valid when it has not moved);
        ``key``: that event's, when the caller has it."""
        if key is False:
            key = self._key(r)
        if key == r.key:
            return
        r.ver += 1
        r.key = key
        if key is not None:
            self.seq += 1
            heappush(self.heap, (key[0], key[1], self.seq, None, r, r.ver))

    def _engine(self, r: Replica, prio: int, t_next: float) -> None:
        """Run ``r``'s event, and its next ones while they come before every other event (the
        next arrival, at ``t_next`` or a later turn's, the heap's first) and the drain's end:
        the order the heap would give them, without queueing them.

        An iteration applied (``APPLY``) leaves the requests it finished in the engine, where
        :meth:`_collect` reads their finish times at the end; only a conversation's next turn
        needs one at once. A plan (``PLAN``) drops the requests the engine timed out."""
        heap, later, drain_end, rec, turns, central, loads = self.fixed
        e = r.engine
        while True:
            if prio == APPLY:
                done = e.advance()
                if done and turns:
                    self._next_turns(r, done)
                if central and r._state == "up":
                    self._dispatch(r, e.now)
            else:
                e.prepare()
                if e.timed_out:
                    for i in e.timed_out:
                        rec.status[r.gids[i]] = TIMED_OUT
                        rec.finish[r.gids[i]] = e.now
                    e.timed_out.clear()
            if e._plan is not None:  # the next event, at t with priority prio: as _key
                t, prio = e.plan_end, APPLY
            elif e.outstanding > 0 and r._state in ("up", "draining", "failed"):  # (ready_s, unplanned)
                t, prio = (e.now if e.run.k or e.waiting else e.ready_s) + 1e-12, PLAN
            else:
                t = None
            if later and later[0][0] < t_next:
                t_next = later[0][0]
            # (an event queued for r while this one ran is in the heap, so never earlier than its first)
            if t is not None and t < t_next and t <= drain_end:
                if not heap or t < heap[0][0]:
                    continue
                while heap and (first := heap[0])[3] is None and first[5] != first[4].ver:
                    heappop(heap)  # superseded: the loop would drop it
                if not heap or t < heap[0][0]:
                    continue
            if r.slot >= 0:  # the router's view of its load
                loads[r.slot] = e.outstanding
            self._schedule(r, None if t is None else (t, prio))
            return

    def _next_turns(self, r: Replica, done: list[int]) -> None:
        """Send the next turn of each conversation whose request ``r``'s engine just finished,
        a think time after its answer is back at the user."""
        e = r.engine
        for i in done:
            g = r.gids[i]
            nxt = self.next_turn[g]
            if nxt >= 0:
                when = e.now + self.half_rtt[g] + self.think[nxt]  # the answer's last token back at the user
                heappush(self.later, (when, nxt))
                self.arrival[nxt] = when
