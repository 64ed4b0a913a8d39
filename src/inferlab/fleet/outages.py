"""The fleet's outages: replica and node failures (detected after a delay, restarted with an
empty cache) and spot replicas reclaimed by the provider; methods of the event loop
(:mod:`.simulation`), apart so that each module holds one concept."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from .pricing import SPOT_NOTICE_S
from .states import CONTROL, FAILED

if TYPE_CHECKING:
    from .replicas import Replica


class Outages:
    """Failure, detection, restart and reclaim events of :class:`~.simulation._Loop`."""

    cfg: Any
    rng: Any
    rec: Any
    replicas: list
    pools: Any
    nodes_armed: set

    def _arm_failure(self, r: Replica, t: float) -> None:
        """``r``'s next failure of its own; and its node's clock, the first time a replica is on
        that node (a node fails on its own clock, whichever of its replicas run)."""
        f = self.cfg.failures
        if f is None:
            return
        r.fail_ver += 1
        if math.isfinite(f.replica_mtbf_h):
            when = t + self.rng.exponential(f.replica_mtbf_h * 3600.0)
            if when < self.cfg.horizon_s:
                self._push(when, CONTROL, "fail", (r, r.fail_ver))
        node = self._node_of(r) if math.isfinite(f.node_mtbf_h) else None
        if node is not None and node not in self.nodes_armed:
            self.nodes_armed.add(node)
            self._arm_node(node, t)

    def _arm_node(self, node: tuple[int, int], t: float) -> None:
        when = t + self.rng.exponential(self.cfg.failures.node_mtbf_h * 3600.0)
        if when < self.cfg.horizon_s:
            self._push(when, CONTROL, "node_fail", node)

    def _fail(self, t: float, obj: tuple) -> None:
        r, ver = obj
        if ver == r.fail_ver and r.state == "up":
            self._take_down(t, [r])

    def _node_fail(self, t: float, node: tuple[int, int]) -> None:
        """The node takes down its replicas that are up; it fails again on its own clock."""
        hit = [x for x in self.replicas if x.state == "up" and x.pool == node[0] and self._node_of(x) == node]
        if hit:
            self._take_down(t, hit)
        self._arm_node(node, t)

    def _take_down(self, t: float, hit: list) -> None:
        f = self.cfg.failures
        for x in hit:
            lost = x.engine.abort()
            for i in lost:
                self.rec.status[x.gids[i]] = FAILED
                self.rec.finish[x.gids[i]] = t
            x.state = "failed"
            x.fail_ver += 1
            self.rec.events.append((t, "fail", x.index))
            silent = f.silent_share > 0 and self.rng.random() < f.silent_share
            self._push(t + (f.silent_detection_s if silent else f.detection_s), CONTROL, "detected", x)
            x.ver += 1
            x.key = None
        self._healthy(t)

    def _node_of(self, r: Replica) -> tuple[int, int]:
        """``r``'s node: its pool, and the place of the node's first replica among the pool's
        replicas in the order they were ordered (``replicas_per_node`` a node: a node holds one
        pool's GPUs, in one region)."""
        rpn = self.cfg.failures.replicas_per_node
        return r.pool, r.place // rpn * rpn

    def _reclaim(self, t: float, r: Replica) -> None:
        """The provider takes a spot replica back: notice now, gone after the notice. A pool
        without an autoscaler orders a replacement at the notice, as a managed instance group
        keeps its size (an autoscaler's pool leaves it to the autoscaler, which sees the
        replica gone)."""
        if r.state in ("stopped",):
            return
        self.rec.events.append((t, "reclaim", r.index))
        if self.pools[r.pool].autoscaler is None:
            self._order(t, r.pool, up=False)
        if r.state == "starting":
            r.state, r.stopped = "stopped", t
            return
        r.state = "draining"
        self._healthy(t)
        self._push(t + SPOT_NOTICE_S, CONTROL, "reclaimed", r)

    def _reclaimed(self, t: float, r: Replica) -> None:
        for i in r.engine.abort():
            self.rec.status[r.gids[i]] = FAILED
            self.rec.finish[r.gids[i]] = t
        r.state, r.stopped = "stopped", t
        r.ver += 1
        r.key = None

    def _detected(self, t: float, r: Replica) -> None:
        if r.state != "failed":
            return
        r.state = "down"
        self._push(t + self.cfg.failures.restart_s, CONTROL, "restarted", r)

    def _restarted(self, t: float, r: Replica) -> None:
        if r.state != "down":
            return
        self._collect(r)
        r.engines.append((r.engine, r.gids))
        r.engine, r.gids = self._new_engine(r.pool), []
        r.busy_mark = r.scale_mark = 0.0  # the new engine counts its tokens from zero
        self._ready_again(t, r)

    def _ready_again(self, t: float, r: Replica) -> None:
        r.state = "starting"
        self._ready(t, r)
