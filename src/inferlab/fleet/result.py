"""What a fleet simulation returns: each request's fate and latencies, the fleet over time,
what it cost and how available it was, with a plain-words reading of it.

Status of a request: ``ok``, ``rejected`` (a full queue), ``timed out`` (waited too long),
``failed`` (lost with a replica), ``no replica`` (none up), ``too long`` (its prompt past the
unchunked budget of every engine serving it, :mod:`.prompts`), ``not sent`` (a later turn
past the horizon, or of a conversation whose turn before failed; left out of every figure).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..economics._common import fmt
from ..results.render import duration_text, share_text
from .simulation import AFTER, OK, STATUS
from ..results.record import array_record

#: SLO used by :meth:`FleetResult.goodput` when none is given. An assumption for chat:
#: first token within 1 s at P99.
DEFAULT_TTFT_SLO_S = 1.0


@array_record
@dataclass(frozen=True, repr=False)  # the summary line, not a dump of every request's arrays
class FleetResult:
    """A simulated fleet.

    Attributes
    ----------
    name : str
    arrival, first_token, finish : array [s]
        Per request (NaN where it never got one).
    isl, osl, cached : array [token]
        Prompt, output and prompt tokens found in the serving replica's prefix cache.
    prefix : array [token]
        Prompt tokens on a shared stream (what a cache could hit).
    status : int array
        Index into :data:`~.simulation.STATUS`.
    replica : int array
        Replica that served it (-1: none).
    samples : dict of arrays
        The fleet every ``sample_s``: ``t`` [s], ``ready``, ``starting``, ``running``
        (paid) replicas, ``queued`` requests, ``kv`` share, ``utilization``, ``rate``
        [request/s], ``usd_per_hour``.
    usd : float [USD]
        Cost over the horizon.
    availability : float [-]
        Share of the horizon with at least ``need`` replicas serving.
    need : int
        Replicas the traffic needs without failures (the fleet's size, or as given).
    horizon_s : float [s]
    ttft_slo_s, tpot_slo_s : float [s]
        The SLOs goodput counts against (``inf``: no TPOT SLO).
    notes : tuple of str
        Facts for :meth:`explain` that only the builder knows (cold start phases).
    replica_pool : int array
        The pool of each replica (see :func:`~.api.fleet_of`).
    """

    name: str
    arrival: np.ndarray
    first_token: np.ndarray
    finish: np.ndarray
    isl: np.ndarray
    osl: np.ndarray
    cached: np.ndarray
    prefix: np.ndarray
    status: np.ndarray
    replica: np.ndarray
    samples: dict[str, np.ndarray]
    usd: float
    availability: float
    need: int
    horizon_s: float
    ttft_slo_s: float = DEFAULT_TTFT_SLO_S
    events: tuple = ()
    notes: tuple[str, ...] = field(default=())
    replica_pool: np.ndarray = field(default_factory=lambda: np.zeros(0, int))
    tpot_slo_s: float = math.inf

    # -- requests -------------------------------------------------------------------------
    @property
    def counted(self) -> np.ndarray:
        """Requests sent within the horizon."""
        return self.status != AFTER

    @property
    def ttft(self) -> np.ndarray:
        """Time to first token of the served requests [s]."""
        ok = self.status == OK
        return self.first_token[ok] - self.arrival[ok]

    def counts(self) -> dict[str, int]:
        """Requests by outcome."""
        return {STATUS[k]: int(np.sum(self.status == k)) for k in range(len(STATUS)) if k != AFTER}

    def ttft_percentile(self, q: float = 99.0) -> float:
        """TTFT percentile ``q`` (0 to 100) of the served requests [s]."""
        from ..checks import real

        q = real("percentile", q, minimum=0.0, maximum=100.0)
        t = self.ttft
        return float(np.percentile(t, q)) if len(t) else math.nan

    def goodput(self, ttft_slo_s: float | None = None, tpot_slo_s: float | None = None) -> float:
        """Share of requests served within both SLOs (TTFT; TPOT, the mean time per output
        token after the first, where the output has more than one); refused, dropped and
        failed requests miss them [-]."""
        ttft_slo = self.ttft_slo_s if ttft_slo_s is None else ttft_slo_s
        tpot_slo = self.tpot_slo_s if tpot_slo_s is None else tpot_slo_s
        sent = int(np.sum(self.counted))
        ok = self.status == OK
        first, finish, osl = self.first_token[ok], self.finish[ok], self.osl[ok]
        tpot = np.divide(finish - first, osl - 1.0, out=np.zeros(len(osl)), where=osl > 1)
        good = int(np.sum((first - self.arrival[ok] <= ttft_slo) & (tpot <= tpot_slo)))
        return good / sent if sent else math.nan

    @property
    def usd_per_million_output(self) -> float:
        """The cost over the output tokens of the requests served, per million [USD/Mtoken]
        (NaN: none served, or no price); the name estimate, sweep and plan give it."""
        out = float(np.sum(self.osl[self.status == OK]))
        return self.usd / out * 1e6 if out else math.nan

    @property
    def usd_per_million_output_tokens(self) -> float:
        """Former name of :attr:`usd_per_million_output` (kept for scripts that read it)."""
        return self.usd_per_million_output

    @property
    def hit_rate(self) -> float:
        """Prompt tokens found in a prefix cache, over all prompt tokens served [-]."""
        ok = self.status == OK
        total = float(np.sum(self.isl[ok]))
        return float(np.sum(self.cached[ok])) / total if total else 0.0

    @property
    def reachable_hit_rate(self) -> float:
        """Prompt tokens on a shared stream, over all prompt tokens served: the hit rate of
        a cache that never misses [-]."""
        ok = self.status == OK
        total = float(np.sum(self.isl[ok]))
        return float(np.sum(self.prefix[ok])) / total if total else 0.0

    # -- over time ------------------------------------------------------------------------
    def p99_ttft_over_time(self, window_s: float | None = None) -> tuple[np.ndarray, np.ndarray]:
        """P99 TTFT of requests sent in each window [s] -> (window start [s], P99 [s])."""
        w = window_s or max(self.horizon_s / 96.0, 1.0)
        edges = np.arange(0.0, self.horizon_s + w, w)
        ok = self.status == OK
        arr, ttft = self.arrival[ok], self.first_token[ok] - self.arrival[ok]
        which = np.digitize(arr, edges) - 1
        p99 = np.array([np.percentile(ttft[which == k], 99) if np.any(which == k) else np.nan
                        for k in range(len(edges) - 1)])
        return edges[:-1], p99

    def queue_lead_s(self, queue_threshold: float = 1.0) -> float:
        """How long before P99 TTFT first breaks its SLO the queue had stayed above
        ``queue_threshold`` requests per ready replica [s] (NaN: the SLO never broke, or
        the queue was below the threshold when it did)."""
        starts, p99 = self.p99_ttft_over_time()
        broke = np.flatnonzero(p99 > self.ttft_slo_s)
        if not len(broke):
            return math.nan
        s = self.samples
        before = s["t"] <= starts[broke[0]]
        above = (s["queued"] / np.maximum(s["ready"], 1) > queue_threshold)[before]
        if not len(above) or not above[-1]:
            return math.nan
        calm = np.flatnonzero(~above)  # the warning is the start of the last stretch above the threshold
        first = calm[-1] + 1 if len(calm) else 0
        return float(starts[broke[0]] - s["t"][first])

    # -- reading ---------------------------------------------------------------------------
    def explain(self) -> str:
        """What decided this fleet's latency, losses and cost, in plain words."""
        lines = []
        counts = self.counts()
        sent = sum(counts.values())
        lost = {k: v for k, v in counts.items() if k != "ok" and v}
        if lost:
            lines.append("lost requests: " + ", ".join(f"{v} {k} ({v / sent:.1%})" for k, v in lost.items()))
        reach, hit = self.reachable_hit_rate, self.hit_rate
        if reach > 0.01 and hit == 0:  # prefix_cache=False, or every hit lost
            lines.append(f"prefix cache: none of the {reach:.1%} of prompt tokens that could be reused hit (the "
                         "replicas' prefix cache is off, or the router and evictions lose every hit)")
        elif reach > 0.01:
            loss = 1.0 - hit / reach
            lines.append(f"prefix cache: {hit:.1%} of prompt tokens hit of {reach:.1%} reusable: the router and "
                         f"evictions lose {loss:.0%} of prefix hits")
        tpot = f" and TPOT {fmt(self.tpot_slo_s * 1e3)} ms" if math.isfinite(self.tpot_slo_s) else ""
        lines.append(f"P99 TTFT {fmt(self.ttft_percentile() * 1e3)} ms; goodput {share_text(self.goodput())} "
                     "within "
                     f"TTFT {fmt(self.ttft_slo_s * 1e3)} ms{tpot}")
        s = self.samples
        if len(s.get("t", ())):
            lines.append(f"replicas: {int(np.min(s['ready']))} to {int(np.max(s['running']))} running; mean "
                         f"utilization {float(np.mean(s['utilization'])):.0%}")
            lead = self.queue_lead_s()
            if math.isfinite(lead):
                lines.append(f"queue depth warned {fmt(lead)} s before P99 TTFT broke its SLO")
        lines.append(f"availability {self.availability:.5f} (at least {self.need} "
                     f"replica{'' if self.need == 1 else 's'} serving)")
        per = self.usd_per_million_output
        lines.append(f"cost {fmt(self.usd)} USD over {duration_text(self.horizon_s)}"
                     + (f" ({fmt(per)} USD per million output tokens served)" if math.isfinite(per) else ""))
        lines.extend(self.notes)
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        """Summary figures, JSON-ready."""
        def num(x: float) -> float | None:
            return None if math.isnan(x) else x
        s = self.samples
        sampled = bool(len(s.get("t", ())))
        return {"name": self.name, "requests": self.counts(), "p99_ttft_s": num(self.ttft_percentile()),
                "goodput": num(self.goodput()), "hit_rate": self.hit_rate,
                "reachable_hit_rate": self.reachable_hit_rate, "usd": num(self.usd),
                "usd_per_million_output": num(self.usd_per_million_output),
                "availability": self.availability, "need": self.need, "horizon_s": self.horizon_s,
                "ttft_slo_s": num(self.ttft_slo_s),
                "tpot_slo_s": num(self.tpot_slo_s) if math.isfinite(self.tpot_slo_s) else None,
                "replicas_min": int(np.min(s["ready"])) if sampled else None,
                "replicas_max": int(np.max(s["running"])) if sampled else None,
                "mean_utilization": float(np.mean(s["utilization"])) if sampled else None,
                "queue_lead_s": num(self.queue_lead_s()) if sampled else None,
                "notes": list(self.notes)}

    def __str__(self) -> str:
        c = self.counts()
        return (f"fleet {self.name}: {sum(c.values())} requests over {duration_text(self.horizon_s)}, "
                f"{c['ok']} served; P99 TTFT {fmt(self.ttft_percentile() * 1e3)} ms, "
                f"goodput {share_text(self.goodput())}, "
                f"prefix hits {self.hit_rate:.1%}, availability {self.availability:.5f}, {fmt(self.usd)} USD")

    def __repr__(self) -> str:
        return f"<FleetResult: {self}>"

    def _repr_html_(self) -> str:
        import html

        return f"<pre><b>{html.escape(str(self))}</b>\n\n{html.escape(self.explain())}</pre>"  # (the headline first)

    def plot(self, path: str | None = None) -> Any:
        """Replicas, queue depth, P99 TTFT and spend over time (needs matplotlib); saved to
        ``path`` when given; returns the figure."""
        from .plot import plot_fleet
        return plot_fleet(self, path)
