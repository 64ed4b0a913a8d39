"""The autoscaler: a signal averaged over the ready replicas, a target for it, and the
replica count that would bring it to the target.

.. math:: n' = \\lceil n \\, x / x^* \\rceil

(Kubernetes' Horizontal Pod Autoscaler rule [1]), evaluated every ``period_s``, skipped
within a ``tolerance`` of the target, scaling down only to the highest count wanted over
the last ``scale_down_delay_s`` (the HPA's stabilization window [1]).

Signals, each a mean over the ready replicas:

- ``utilization``: tokens processed over what the replica processes at full prefill
  budget (its peak, :attr:`~inferlab.fleet.simulation.ReplicaKind.peak_tokens_per_s`);
  throughput can only follow demand up to the peak, so it lags a rise and, capped at 1,
  asks for at most ``1 / target`` times the replicas per period; a replica whose iterations
  are decode steps stays far below that peak even when saturated (0.3-0.5 for a sparse MoE
  model), so a target above that level never scales it (the result says so:
  :func:`unreached_note`). (The busy share of
  time, what ``nvidia-smi`` reports, is near 1 at any load of an in-flight-batching engine.)
- ``queue``: requests waiting (not yet past their prompt), which grows without bound in
  overload and leads.
- ``concurrency``: requests in flight (waiting and running), Knative's signal [2].
- ``kv``: share of the KV pool in use.
- ``rate``: arrivals [request/s].

References
----------
.. [1] Kubernetes documentation, "Horizontal Pod Autoscaling", algorithm details (tolerance
   0.1, scale-down stabilization window 300 s, sync period 15 s).
   https://kubernetes.io/docs/tasks/run-application/horizontal-pod-autoscale/
.. [2] Knative documentation, "Configuring concurrency" (the KPA scales on in-flight
   requests per replica). https://knative.dev/docs/serving/autoscaling/concurrency/
"""

from __future__ import annotations

import difflib
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..checks import integer, real
from ..errors import SpecError

SIGNALS = ("utilization", "queue", "concurrency", "kv", "rate")
#: Signals that are a share of what a replica holds or does (a target above 1 is never reached).
SHARES = ("utilization", "kv")
#: What each signal's target means, for the message that asks for one.
_TARGET_HINTS = {"utilization": "a share of the peak, e.g. 0.7", "concurrency": "requests in flight per replica, "
                 "e.g. 16", "kv": "a share of the KV pool, e.g. 0.8", "rate": "requests/s per replica"}
#: The queue's target when none is given: requests waiting per replica.
DEFAULT_QUEUE_TARGET = 4.0
#: HPA defaults [1].
DEFAULT_PERIOD_S = 15.0
#: Shortest control period: KEDA polls its scalers every 30 s by default and accepts 1 s
#: (pollingInterval); a shorter one would only make the simulation tick for nothing.
MIN_PERIOD_S = 1.0
DEFAULT_SCALE_DOWN_DELAY_S = 300.0
DEFAULT_TOLERANCE = 0.1


@dataclass(frozen=True)
class Autoscaler:
    """Scaling policy.

    Parameters
    ----------
    signal : {"utilization", "queue", "concurrency", "kv", "rate"}
    target : float, optional
        Signal value to hold per replica [-, request, request, -, request/s]; required except
        for ``queue`` (:data:`DEFAULT_QUEUE_TARGET`), at most 1 for the shares (``utilization``,
        ``kv``).
    min_replicas, max_replicas : int
    period_s, scale_down_delay_s : float [s]
    tolerance : float
        Relative band around the target with no action [-].
    """

    signal: str = "queue"
    target: float | None = None
    min_replicas: int = 1
    max_replicas: int = 64
    period_s: float = DEFAULT_PERIOD_S
    scale_down_delay_s: float = DEFAULT_SCALE_DOWN_DELAY_S
    tolerance: float = DEFAULT_TOLERANCE

    def __post_init__(self) -> None:
        if not isinstance(self.signal, str) or self.signal not in SIGNALS:
            close = difflib.get_close_matches(str(self.signal), SIGNALS, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise SpecError(f"autoscaler signal {self.signal!r} is unknown{hint} (allowed: {', '.join(SIGNALS)})")
        if self.target is None:  # the queue's default would mean nothing for the other signals
            if self.signal != "queue":
                raise SpecError(f"autoscaler: signal {self.signal!r} needs a target ({_TARGET_HINTS[self.signal]})")
            object.__setattr__(self, "target", DEFAULT_QUEUE_TARGET)
        for name in ("target", "period_s", "scale_down_delay_s", "tolerance"):
            object.__setattr__(self, name, real(f"autoscaler.{name}", getattr(self, name), minimum=0.0, maximum=1e9))
        for name in ("min_replicas", "max_replicas"):
            object.__setattr__(self, name, integer(f"autoscaler.{name}", getattr(self, name), maximum=100_000))
        if not (self.target > 0 and math.isfinite(self.target)):
            raise SpecError(f"autoscaler target must be a number > 0, got {self.target}")
        if self.signal in SHARES and self.target > 1.0:
            raise SpecError(f"autoscaler: signal {self.signal!r} is a share, at most 1; a target of {self.target:g} is "
                            f"never reached, so it never scales up ({_TARGET_HINTS[self.signal]})")
        if not 1 <= self.min_replicas <= self.max_replicas:
            raise SpecError(f"autoscaler: need 1 <= min_replicas <= max_replicas, got {self.min_replicas}, "
                            f"{self.max_replicas}")
        if not (self.period_s >= MIN_PERIOD_S and self.scale_down_delay_s >= 0 and self.tolerance >= 0):
            raise SpecError(f"autoscaler: period_s must be at least {MIN_PERIOD_S:g} s (got {self.period_s:g}); "
                            "scale_down_delay_s and tolerance >= 0")


def desired_replicas(policy: Autoscaler, ready: int, value: float) -> int:
    """Replicas that bring the signal ``value`` (mean over ``ready`` replicas) to the target,
    within the policy's bounds; ``ready`` when within the tolerance."""
    ratio = value / policy.target
    if abs(ratio - 1.0) <= policy.tolerance:
        want = ready
    else:
        want = math.ceil(max(ready, 1) * ratio - 1e-9)
    return min(max(want, policy.min_replicas), policy.max_replicas)


def unreached_note(policies: list, utilization: Any, late_share: float) -> tuple[str, ...]:
    """A note where an autoscaler on ``utilization`` never saw its target while ``late_share`` of
    the requests missed their TTFT objective: tokens over a replica's full-budget prefill rate
    stay well below 1 where decode steps fill its iterations (a sparse MoE model's prefill
    rate is high for its decode), so that autoscaler never scaled up."""
    targets = [a.target * (1.0 - a.tolerance) for a in policies if a is not None and a.signal == "utilization"]
    peak = float(np.max(utilization)) if np.size(utilization) else 0.0
    if not targets or peak >= min(targets) or late_share <= 0.05:
        return ()
    return (f"autoscaler: the utilization signal peaked at {peak:.2f}, below its target, while {late_share:.0%} of "
            "the requests missed the TTFT objective: a replica busy with decode steps processes far fewer tokens "
            "than its full-budget prefill rate, so the signal never asked for more; scale on queue or concurrency, "
            "or set a target below that peak",)


def flapping_note(events: list[tuple[float, str, int]], pool_of: list[int], policies: list) -> tuple[str, ...]:
    """A note where an autoscaler ordered replicas within two of its periods of scaling others
    of the same pool down: draining replicas are not taken back (a Kubernetes pod once
    terminating is gone), so each such turn pays a cold start while warm GPUs drain."""
    last_down: dict[int, float] = {}
    turns: set[tuple[int, float]] = set()  # (pool, time): replicas ordered together are one turn
    for t, what, i in events:
        if i < 0 or i >= len(pool_of) or policies[pool_of[i]] is None:
            continue
        k = pool_of[i]
        if what == "scale down":
            last_down[k] = t
        elif what == "order" and k in last_down and t - last_down[k] <= 2.0 * policies[k].period_s:
            turns.add((k, t))
    if not turns:
        return ()
    signals = sorted({a.signal for a in policies if a is not None})
    n = len(turns)
    # a queue (or a share) reads low at any surplus; concurrency and the rate follow the load itself
    lagging = [x for x in signals if x not in ("concurrency", "rate")]
    why = ("the signal read low while the replicas kept up (a queue reads 0 at any surplus), then high once they "
           "were gone" if lagging else "the load fell below the target long enough to scale down, then rose again")
    fix = ("a longer scale_down_delay_s, or a signal that follows the load (concurrency, rate), steadies it" if lagging
           else "a longer scale_down_delay_s, or a lower target (more headroom per replica), steadies it")
    return (f"autoscaler: {n} time{'s' if n > 1 else ''} it ordered replicas within two periods of scaling "
            f"others down ({', '.join(signals)}): {why}; draining replicas are not taken back, so each turn pays a "
            f"cold start. A{fix[1:]}",)


#: Most control ticks (autoscaler evaluations and samples) a run takes: 17-30 us each, two to four
#: minutes (a year at the default 15 s period is 4.2 million, about 70 s); a year at a 1 s period
#: would be 63 million, a quarter of an hour or more whatever the traffic.
MAX_TICKS = 8_000_000


def check_ticks(horizon_s: float, sample_s: float, scalers: list) -> None:
    """Refuse a run whose control ticks over ``horizon_s`` pass :data:`MAX_TICKS` (one line saying
    what would fit)."""
    if not math.isfinite(horizon_s):
        return
    scalers = list({id(a): a for a in scalers if a is not None}.values())  # (a pool's is also the fleet's)
    periods = [("autoscaler period_s", a.period_s) for a in scalers] + [("sample_s", sample_s)]
    ticks = sum(horizon_s / p for _, p in periods)
    if ticks > MAX_TICKS:
        name, shortest = min(periods, key=lambda x: x[1])
        raise SpecError(f"fleet: {horizon_s / 3600.0:,.4g} h with {name} {shortest:g} s is {ticks:,.0f} control ticks; "
                        f"at most {MAX_TICKS:,} (a few minutes): lengthen the period or shorten the horizon")


def starting_count(replicas: int, policy: Autoscaler | None, where: str) -> str | None:
    """The note on a fleet's (or a pool's) starting ``replicas`` outside its autoscaler's bounds,
    which the autoscaler brings within them at its first evaluation, as Kubernetes' HPA does: above
    ``max_replicas`` the extra ones are scaled down (paid until then); below ``min_replicas`` (0
    included) the rest are ordered and serve after their cold start. None within the bounds, or
    without an autoscaler."""
    if policy is None or policy.min_replicas <= replicas <= policy.max_replicas:
        return None
    start = f"{where} starts {replicas} replica{'s' * (replicas != 1)}"
    if replicas > policy.max_replicas:
        return (f"{start}, above the autoscaler's max_replicas {policy.max_replicas}: it scales down to "
                f"{policy.max_replicas} at its first evaluation ({policy.period_s:g} s)")
    return (f"{start}, below the autoscaler's min_replicas {policy.min_replicas}: it orders the rest at its first "
            f"evaluation ({policy.period_s:g} s), and they serve only after their cold start")
