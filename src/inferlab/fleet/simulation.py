"""The fleet on one clock: replicas (each an :class:`~inferlab.serving.engine.Engine`), the
router placing requests as they arrive, admission, the autoscaler, cold starts and failures.

A discrete-event loop in time order. An engine's next iteration is planned once every
request sent before it has been routed (so a decode stretch stops for an arrival it
receives, exactly as :func:`~inferlab.serving.simulator.simulate` would), and applied at its
end. A router sees each replica's state as of its last applied iteration. An engine's next
event that comes before every other one (the next arrival, the queue's first) runs at once
instead of going through the queue: the same order, fewer queue operations.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from ..serving.engine import Engine
from .admission import Admission
from .autoscaler import Autoscaler, check_ticks
from .control import SAMPLES, Control
from .failures import Failures, check_nodes
from .outages import Outages
from .pools import Pool, Regions
from .replicas import Replica, ReplicaKind
from .router import Router, RouterConfig
from .prompts import pool_takes
from .states import (AFTER, ARRIVE, CONTROL, FAILED, OK, REJECTED, SCALE, STATUS, TIMED_OUT, TOO_LONG, UNFINISHED,
                     UNSERVED)
from .stepping import Stepping
from .traffic import Requests

__all__ = ["AFTER", "FAILED", "OK", "REJECTED", "STATUS", "TIMED_OUT", "TOO_LONG", "UNFINISHED", "UNSERVED", "FleetConfig",
           "Record", "ReplicaKind", "run"]


#: Time after the horizon a fleet gets at least to finish the requests in it [s]: an 8,000-token
#: answer at 50 ms per token takes 400 s.
DRAIN_MIN_S = 600.0

@dataclass(frozen=True)
class FleetConfig:
    """Policies of the fleet (see each module)."""

    replicas: int = 1
    router: RouterConfig = RouterConfig()
    admission: Admission = Admission()
    autoscaler: Autoscaler | None = None
    failures: Failures | None = None
    horizon_s: float = math.inf
    sample_s: float = 10.0
    seed: int = 0
    pools: tuple = ()  # Pool, ...: replaces the one pool of ``replicas`` and ``autoscaler``
    regions: Regions | None = None
    drain_s: float | None = None  # after the horizon; None: max(horizon, DRAIN_MIN_S)

    def __post_init__(self) -> None:
        if self.failures is not None:
            check_nodes(self.failures, [getattr(p.kind.model, "dep", None) for p in self.pools])
        check_ticks(self.horizon_s, self.sample_s, [p.autoscaler for p in self.pools] + [self.autoscaler])


@dataclass
class Record:
    """What the loop leaves: per request, per sample and per event (filled in place)."""

    replica: np.ndarray
    first_token: np.ndarray
    finish: np.ndarray
    sent: np.ndarray
    status: np.ndarray
    cached: np.ndarray
    samples: dict[str, list[float]]
    events: list[tuple[float, str, int]]
    intervals: list[tuple[float, float]]  # each replica's (ordered, stopped; inf: running at the end)
    healthy: list[tuple[float, int]]  # (time, replicas serving) at every change
    pool: list[int] = field(default_factory=list)  # each replica's pool
    spot: list[bool] = field(default_factory=list)  # each replica on spot capacity
    half_rtt: np.ndarray | None = None  # per request: half the round trip to its replica [s]


def run(kind: ReplicaKind, requests: Requests, cfg: FleetConfig,
        progress: Callable[[float], None] | None = None) -> Record:
    """Simulate ``requests`` on a fleet of ``kind`` replicas under ``cfg``."""
    return _Loop(kind, requests, cfg, progress).run()


class _Loop(Stepping, Outages, Control):
    def __init__(self, kind: ReplicaKind, req: Requests, cfg: FleetConfig, progress: Any) -> None:
        self.kind, self.req, self.cfg, self.progress = kind, req, cfg, progress
        n = len(req)
        self.rec = Record(np.full(n, -1), np.full(n, np.nan), np.full(n, np.nan), req.arrival.copy(),
                          np.where(np.isnan(req.arrival), AFTER, OK), np.zeros(n), {k: [] for k in SAMPLES}, [], [], [])
        self.router = Router(cfg.router, cfg.seed)
        self.rng = np.random.default_rng([cfg.seed, 0xFA11])
        self.heap: list[tuple] = []
        self.seq = 0
        self.replicas: list[Replica] = []
        self.nodes_armed: set[tuple[int, int]] = set()  # nodes whose failure clock runs (Outages)
        self.central: deque[int] = deque()
        adm = cfg.admission
        self.limit = math.inf if adm.queue_limit is None else adm.queue_limit
        self.at = adm.at
        self.pools: tuple[Pool, ...] = cfg.pools or (Pool(kind, cfg.replicas, cfg.autoscaler),)
        self.regions = cfg.regions or Regions()
        self.caps = [adm.max_outstanding or p.kind.sched.max_num_seqs for p in self.pools]
        # which requests each pool's engine takes (it refuses the too long: prompt plus output past its
        # max_model_len or the model's positions, a prompt past its budget unchunked), None: every one
        takes = pool_takes(self.pools, req.isl, req.osl)
        self.takes = [None if t.all() else t.tolist() for t in takes]
        self.taken_by_all = None if all(t is None for t in self.takes) else np.logical_and.reduce(takes).tolist()
        self.timeout = adm.timeout_s
        self.arrived_window = 0
        self.pool_arrivals = [0] * len(self.pools)
        # no scale-down before the delay has passed
        self.wanted: list[deque[tuple[float, int]]] = [deque([(0.0, p.replicas)]) for p in self.pools]
        self.last_scale = [0.0] * len(self.pools)
        self.placed = [0] * len(self.pools)  # replicas each pool has ordered (a new one's place in it)
        self.user_region = req.region.tolist() if req.region is not None else None
        self.model = req.model.tolist() if req.model is not None else None
        self.half_rtt = np.zeros(n)
        first = np.flatnonzero(~np.isnan(req.arrival))
        self.pending = first[np.argsort(req.arrival[first], kind="stable")].tolist()
        self.later: list[tuple[float, int]] = []  # later turns: (send time, request)
        self.isl, self.osl = req.isl.tolist(), req.osl.tolist()
        self.stream, self.prefix = req.stream.tolist(), req.prefix.tolist()
        self.extends, self.next_turn = req.extends.tolist(), req.next_turn.tolist()
        self.turns = bool(np.any(req.next_turn >= 0))  # conversations: a finish sends the next turn
        self.think = req.think_s.tolist()
        self.arrival = req.arrival.tolist()
        self.routable: tuple[int, list[Replica], list[Engine]] = (-1, [], [])  # (Replica.changes, replicas, engines)
        self.loads: list[int] = []  # each routable replica's outstanding requests, kept up to date (Replica.slot)
        self.drain_end = math.inf

    # -- the loop -----------------------------------------------------------------------
    def run(self) -> Record:
        cfg = self.cfg
        for k, pool in enumerate(self.pools):
            for _ in range(pool.replicas):
                self._order(0.0, k, up=True, record=False)
        if self.replicas:  # one record of the replicas serving at the start, not one per replica
            self._healthy(0.0)
        if math.isfinite(cfg.horizon_s):
            self._push(0.0, CONTROL, "tick", None)
            for k, pool in enumerate(self.pools):  # each autoscaler on its own period (after the tick at a tie)
                if pool.autoscaler is not None and pool.autoscaler.period_s < cfg.horizon_s:
                    self._push(pool.autoscaler.period_s, SCALE, "autoscale", k)
        heap, pending, later, arrival = self.heap, self.pending, self.later, self.arrival
        horizon = cfg.horizon_s
        # the backlog at the horizon gets as long again to finish, and at least DRAIN_MIN_S
        # (long enough for any ordinary request), unless the caller says how long
        self.drain_end = drain_end = horizon + (max(horizon, DRAIN_MIN_S) if cfg.drain_s is None else cfg.drain_s)
        self.fixed = (heap, later, drain_end, self.rec, self.turns, self.central, self.loads)
        last_report, n_pending, heappop, inf, rec = 0.0, len(pending), heapq.heappop, math.inf, self.rec
        p = 0  # the next first request to send (pending[p]), sent at t_pend
        t_pend = arrival[pending[0]] if n_pending else inf
        while True:
            t_arr = t_pend
            if later and later[0][0] < t_arr:
                t_arr = later[0][0]
            if heap and ((first := heap[0])[0] < t_arr or (first[0] == t_arr and first[1] < ARRIVE)):
                if first[0] > drain_end:
                    self._stop(p)
                    break
                t, prio, _, what, obj, ver = heappop(heap)
                if what is None:  # an engine's iteration
                    if ver == obj.ver:
                        obj.key = None
                        self._engine(obj, prio, t_arr)
                elif what == "tick":
                    self._tick(t)
                elif what == "autoscale":
                    self._autoscale(t, obj)
                else:
                    getattr(self, "_" + what)(t, obj)
                continue
            if t_arr == inf:
                break
            if later and later[0][0] == t_arr:
                g = heapq.heappop(later)[1]
                if t_arr < horizon:  # (a first request's send time and status are set already)
                    rec.sent[g] = t_arr
                    rec.status[g] = OK
            else:
                g = pending[p]
                p += 1
                t_pend = arrival[pending[p]] if p < n_pending else inf
            if t_arr >= horizon:
                rec.status[g] = AFTER
                continue
            self._arrive(t_arr, g)
            if self.progress is not None and t_arr - last_report > 60.0:
                last_report = t_arr
                self.progress(t_arr)
        for r in self.replicas:
            self._collect(r)
            self.rec.intervals.append((r.ordered, r.stopped))
            self.rec.pool.append(r.pool)
            self.rec.spot.append(r.spot)
        self.rec.status[(self.rec.status == OK) & np.isnan(self.rec.finish)] = UNFINISHED
        self.rec.half_rtt = self.half_rtt
        return self.rec

    def _stop(self, p: int) -> None:
        """Past the drain: requests not yet sent (the first ones from ``pending[p]``) are after
        the horizon; those in the system stay unfinished (marked once their replicas are collected)."""
        for g in self.pending[p:]:
            self.rec.status[g] = AFTER
        for _, g in self.later:
            self.rec.status[g] = AFTER

    def _push(self, t: float, prio: int, what: str, obj: Any) -> None:
        self.seq += 1
        heapq.heappush(self.heap, (t, prio, self.seq, what, obj, 0))

    # -- requests -------------------------------------------------------------------------
    def _arrive(self, t: float, g: int) -> None:
        rec = self.rec
        self.arrived_window += 1
        routable = self._candidates(g)
        if not routable:
            rec.status[g] = TOO_LONG if self._too_long(g) else UNSERVED
            rec.finish[g] = t
            return
        if self.at == "router":
            free = [r for r in routable if self._room(r)]
            if not free:
                if len(self.central) < self.limit:
                    self.central.append(g)
                else:
                    rec.status[g] = REJECTED
                    rec.finish[g] = t
                return
            routable = free
        if routable is self.routable[1]:
            engines, loads = self.routable[2], self.loads
        else:
            engines = [x.engine for x in routable]
            loads = [e.outstanding for e in engines]
        r = routable[self.router.choose(engines, loads, self.stream[g], self.prefix[g])]
        if self.at == "replica" and self.limit != math.inf and r.engine.queued >= self.limit:
            rec.status[g] = REJECTED
            rec.finish[g] = t
            return
        self._send(r, g, t)

    def _too_long(self, g: int) -> bool:
        """Whether every pool that serves request ``g``'s model refuses it as too long (whatever is up)."""
        want = self.model[g] if self.model is not None and len(self.pools) > 1 else ""
        takes = [t for p, t in zip(self.pools, self.takes) if not want or p.model in ("", want)]
        return bool(takes) and not any(t is None or t[g] for t in takes)

    def _candidates(self, g: int) -> list[Replica]:
        """Replicas that may take request ``g``: its model's, nearest first (see :mod:`.pools`)."""
        if self.routable[0] != Replica.changes:
            up = [r for r in self.replicas if r._state in ("up", "failed")]
            self.routable = (Replica.changes, up, [r.engine for r in up])
            for r in self.replicas:  # (a replica's engine changes its load only while it runs, or as sent one)
                r.slot = -1
            for j, r in enumerate(up):
                r.slot = j
            self.loads[:] = [r.engine.outstanding for r in up]
        up = self.routable[1]
        want = self.model[g] if self.model is not None and len(self.pools) > 1 else ""
        if want:
            up = [r for r in up if self.pools[r.pool].model in ("", want)]
        if self.taken_by_all is not None and not self.taken_by_all[g]:  # a pool whose engine refuses it takes none of it
            up = [r for r in up if (t := self.takes[r.pool]) is None or t[g]]
        if len(self.pools) == 1 or self.user_region is None or len(up) < 2:
            return up
        where = self.user_region[g]
        rtt = [self.regions.rtt(where, self.pools[r.pool].region) for r in up]
        near = [r for r, x in zip(up, rtt) if x == min(rtt)]
        least = min(r.engine.outstanding for r in up)
        if min(r.engine.outstanding for r in near) <= least + self.regions.spill:
            return near
        return up

    def _send(self, r: Replica, g: int, t: float) -> None:
        if r._state == "failed":  # not yet detected: the request is lost
            rec = self.rec
            rec.replica[g] = r.index
            rec.status[g] = FAILED
            rec.finish[g] = t
            return
        half = 0.0
        if self.user_region is not None:
            half = 0.5 * self.regions.rtt(self.user_region[g], self.pools[r.pool].region)
            self.half_rtt[g] = half
        r.gids.append(g)
        self.pool_arrivals[r.pool] += 1
        e = r.engine
        e.submit(t + half, self.isl[g], self.osl[g], self.stream[g], self.prefix[g], self.extends[g],
                 waited=t - self.rec.sent[g])  # one the router's queue held: its timeout runs on from there
        if r.slot >= 0:
            self.loads[r.slot] = e.outstanding
        self._schedule(r)

    def _dispatch(self, r: Replica, t: float) -> None:
        """Router queue: hand waiting requests to ``r`` while it has room, oldest first, those
        of the model its pool serves; drop the expired."""
        central = self.central
        mine, takes = self.pools[r.pool].model, self.takes[r.pool]
        picky = bool(mine and self.model is not None)
        if len(self.pools) > 1 and (picky or takes is not None):  # another model's (or too long a) request waits on
            kept: deque[int] = deque()
            while central and self._room(r):
                g = central.popleft()
                if (not picky or self.model[g] in ("", mine)) and (takes is None or takes[g]) \
                        or t - self.rec.sent[g] > self.timeout:
                    self._hand(r, g, t)
                else:
                    kept.append(g)
            central.extendleft(reversed(kept))
            return
        while central and self._room(r):
            self._hand(r, central.popleft(), t)

    def _hand(self, r: Replica, g: int, t: float) -> None:
        """Send request ``g`` from the router's queue to ``r``, or drop it if it waited too long."""
        if t - self.rec.sent[g] > self.timeout:
            self.rec.status[g] = TIMED_OUT
            self.rec.finish[g] = self.rec.sent[g] + self.timeout
            return
        self._send(r, g, t)

    # -- replicas -------------------------------------------------------------------------
    def _new_engine(self, pool: int) -> Engine:
        k = self.pools[pool].kind
        return Engine(k.model, k.sched, kv_capacity_tokens=k.kv_capacity_tokens, prefix_cache=k.prefix_cache,
                      queue_timeout_s=self.timeout, record=False, state_tokens=k.state_tokens)

    def _order(self, t: float, pool: int, *, up: bool, record: bool = True) -> bool:
        """Start a replica of ``pool`` (serving now, or after its cold start); False when the
        region's or the provider's GPU quota has no room for it. ``record``: False leaves the
        count of replicas serving to the caller (the start's replicas, recorded once)."""
        p = self.pools[pool]
        region_quota, provider_quota = self.regions.quota(p.region), self.regions.provider_quota(p.provider)
        if math.isfinite(region_quota) or math.isfinite(provider_quota):  # (the GPUs held: a pass over the replicas)
            live = [self.pools[r.pool] for r in self.replicas if r.state != "stopped"]
            in_region = sum(q.gpus for q in live if q.region == p.region)
            with_provider = sum(q.gpus for q in live if p.provider and q.provider == p.provider)
            if in_region + p.gpus > region_quota or with_provider + p.gpus > provider_quota:
                self.rec.events.append((t, "quota", -1))
                return False
        r = Replica(len(self.replicas), self._new_engine(pool), t, up, pool)
        r.place, self.placed[pool] = self.placed[pool], self.placed[pool] + 1
        price = p.pricing
        if price.spot_share > 0 and sum(1 for x in self.replicas if x.pool == pool and x.state != "stopped") \
                >= price.reserved and self.rng.random() < price.spot_share:
            r.spot = True
            if price.spot_reclaims_per_h > 0:
                when = t + self.rng.exponential(3600.0 / price.spot_reclaims_per_h)
                if when < self.cfg.horizon_s:
                    self._push(when, CONTROL, "reclaim", r)
        self.replicas.append(r)
        if up:
            if record:
                self._healthy(t)
            self._arm_failure(r, t)
        else:
            self._push(t + p.kind.cold_start_s, CONTROL, "ready", r)
        self.rec.events.append((t, "order", r.index))
        return True

    def _ready(self, t: float, r: Replica) -> None:
        if r.state != "starting":
            return
        r.state, r.since = "up", t
        r.engine.now = t
        self._healthy(t)
        self._arm_failure(r, t)
        self.rec.events.append((t, "ready", r.index))
        if self.central:
            self._dispatch(r, t)

    def _healthy(self, t: float) -> None:
        """Record the replicas serving now: up, taking requests (a draining one, scaled down or
        reclaimed, only finishes its own)."""
        self.rec.healthy.append((t, sum(1 for r in self.replicas if r.state == "up")))

    def _collect(self, r: Replica) -> None:
        e, rec = r.engine, self.rec
        if not r.gids:
            return
        g = np.asarray(r.gids)
        n = len(g)
        rec.replica[g] = r.index  # (set here for every request sent to it, once)
        ok = rec.status[g] == OK
        rec.first_token[g[ok]] = e.first_tok[:n][ok] + self.half_rtt[g[ok]]
        done = ~np.isnan(e.finish[:n])  # the answer's last token back at the user
        rec.finish[g[done]] = e.finish[:n][done] + self.half_rtt[g[done]]
        rec.cached[g] = np.asarray(e.reuse.found[:n])
