"""The fleet's control loop: a sample of the fleet every ``sample_s`` (the time series of the
result), and each pool's autoscaler acting every ``period_s`` of its own on the pool's state
then (requests waiting at the router included); methods of the event loop
(:mod:`.simulation`), apart so that each module holds one concept."""

from __future__ import annotations

from typing import Any

import numpy as np

from .autoscaler import Autoscaler, desired_replicas
from .states import CONTROL, SCALE


class Control:
    """Samples, autoscaling and the router queue's room of :class:`~.simulation._Loop`."""

    cfg: Any
    rec: Any
    central: Any
    caps: list
    model: Any
    replicas: list
    pools: tuple

    # -- control: samples and the autoscaler -----------------------------------------------
    def _tick(self, t: float) -> None:
        cfg, rec = self.cfg, self.rec
        live = [r for r in self.replicas if r._state in ("up", "draining")]  # (the state without its property)
        up = [r for r in live if r._state == "up"]
        window = cfg.sample_s
        busy = 0.0  # share of its peak each replica processed in the window, summed
        for r in live:
            b = r.engine.tokens
            busy += max(b - r.busy_mark, 0.0) / (window * self.pools[r.pool].kind.peak_tokens_per_s)
            r.busy_mark = b
        s = rec.samples
        s["t"].append(t)
        s["ready"].append(len(up))
        s["starting"].append(sum(1 for r in self.replicas if r._state == "starting"))
        s["running"].append(sum(1 for r in self.replicas if r._state != "stopped"))
        s["queued"].append(sum(r.engine.queued for r in live) + len(self.central))
        # (np.mean's own sum and division, without its wrapper)
        s["kv"].append(float(np.add.reduce(np.asarray([r.engine.kv_used for r in up])) / len(up)) if up else 0.0)
        s["utilization"].append(min(busy / len(live), 1.0) if live and t > 0 else 0.0)
        s["in_flight"].append(sum(r.engine.outstanding for r in live))
        s["rate"].append(self.arrived_window / window if t > 0 else 0.0)
        spend = 0.0
        for k, p in enumerate(self.pools):
            paid = [r for r in self.replicas if r.pool == k and r._state != "stopped"]
            spend += float(p.pricing.usd_per_hour(len(paid), sum(1 for r in paid if r.spot)))
        s["usd_per_hour"].append(spend)
        self.arrived_window = 0
        for r in self.replicas:
            if r._state == "draining" and not r.engine.busy:
                r.state, r.stopped = "stopped", t
                self.rec.events.append((t, "stop", r.index))
        if t + window < cfg.horizon_s:
            self._push(t + window, CONTROL, "tick", None)

    def _autoscale(self, t: float, k: int) -> None:
        """Pool ``k``'s autoscaler acting, every ``period_s`` on its own clock (not the samples')."""
        a = self.pools[k].autoscaler
        self._scale(t, k, a, t - self.last_scale[k])
        self.last_scale[k] = t
        if t + a.period_s < self.cfg.horizon_s:
            self._push(t + a.period_s, SCALE, "autoscale", k)

    def _scale(self, t: float, k: int, a: Autoscaler, period: float) -> None:
        mine = [r for r in self.replicas if r.pool == k]
        up = [r for r in mine if r.state == "up"]
        n = max(len(up), 1)
        live = [r for r in mine if r.state in ("up", "draining")]
        peak = max(period, 1e-9) * self.pools[k].kind.peak_tokens_per_s
        done = 0.0  # share of its peak each replica processed over the period, summed
        for r in live:
            b = r.engine.tokens
            done += max(b - r.scale_mark, 0.0) / peak
            r.scale_mark = b
        waiting = self._waiting_for(k)  # at the router (admission at="router"): queued for this pool too
        value = {"utilization": min(done / max(len(live), 1), 1.0),
                 "rate": self.pool_arrivals[k] / max(period, 1e-9) / n,
                 "queue": (sum(r.engine.queued for r in live) + waiting) / n,
                 "kv": sum(r.engine.kv_used for r in up) / n,
                 "concurrency": (sum(r.engine.outstanding for r in live) + waiting) / n}[a.signal]
        self.pool_arrivals[k] = 0
        want = desired_replicas(a, len(up), value)
        wanted = self.wanted[k]
        wanted.append((t, want))
        while wanted and wanted[0][0] < t - a.scale_down_delay_s:
            wanted.popleft()
        active = [r for r in mine if r.state in ("up", "starting", "failed", "down")]
        # the window's highest wish, within the bounds (the start count may be above max_replicas)
        target = min(max(w for _, w in wanted), a.max_replicas) if want < len(active) else want
        for _ in range(target - len(active)):
            if not self._order(t, k, up=False):
                break
        if target < len(active):
            for r in self._victims(k, active, len(active) - target):
                if r.state == "starting":
                    r.state, r.stopped = "stopped", t
                else:
                    r.state = "draining"
                self.rec.events.append((t, "scale down", r.index))
            self._healthy(t)

    def _victims(self, k: int, active: list, count: int) -> list:
        """The ``count`` replicas of pool ``k`` a scale-down stops: starting ones first, then the
        serving one whose stop saves the most (its spot or on-demand price; nothing for one in a
        reserved slot, paid whether it runs or not), the least loaded among equals (they drain)."""
        price = self.pools[k].pricing
        held = sum(1 for r in self.replicas if r.pool == k and r.state != "stopped" and not r.spot)
        left, chosen = list(active), []
        for _ in range(count):
            on_demand = held > price.reserved  # non-spot replicas beyond the reserved ones are paid on demand

            def order(r: Any) -> tuple:  # the largest saving first (an unknown price as the largest)
                saves = price.spot_usd_per_hour if r.spot else (price.on_demand_usd_per_hour if on_demand else 0.0)
                return (r.state != "starting", -(np.inf if np.isnan(saves) else saves), r.engine.outstanding)

            r = min(left, key=order)
            left.remove(r)
            chosen.append(r)
            held -= not r.spot  # (it stops now, or once drained)
        return chosen

    def _waiting_for(self, k: int) -> int:
        """Requests waiting at the router that pool ``k`` may serve (its model's, or any)."""
        central = self.central
        if not central:
            return 0
        mine = self.pools[k].model
        if len(self.pools) == 1 or self.model is None or not mine:
            return len(central)
        return sum(1 for g in central if self.model[g] in ("", mine))

    def _room(self, r: Any) -> bool:
        """Whether the router may send ``r`` another request (admission at the router): fewer than
        its cap outstanding and (no cap given) a KV pool not yet claimed whole, so that the queue
        stays at the router, where it is timed."""
        e = r.engine
        if e.outstanding >= self.caps[r.pool]:
            return False
        if self.cfg.admission.max_outstanding is not None:
            return True
        return e.kv_claimed < 1


#: The fleet over time, one value per sample (see :class:`~.result.FleetResult`).
SAMPLES = ("t", "ready", "starting", "running", "queued", "in_flight", "kv", "utilization", "rate", "usd_per_hour")
