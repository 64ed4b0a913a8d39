"""Workloads: how requests arrive and how long their prompts and outputs are.

Arrivals are ``offline`` (all queued at time zero), Poisson at a ``rate``, a given
``trace`` of arrival times, or a closed loop of ``concurrency`` clients that each send
the next request when the last one finishes. Lengths are fixed or drawn from uniform,
lognormal or empirical distributions, reproducibly from ``seed``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from ..errors import SpecError


@dataclass(frozen=True)
class Lengths:
    """A distribution of token counts.

    ``kind``: ``fixed`` (``value``), ``uniform`` (``low``..``high`` inclusive),
    ``lognormal`` (``mean`` tokens and ``sigma`` of the log), ``empirical`` (``values``
    drawn with replacement).
    """

    kind: Literal["fixed", "uniform", "lognormal", "empirical"] = "fixed"
    value: int = 0
    low: int = 0
    high: int = 0
    mean: float = 0.0
    sigma: float = 0.0
    values: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        checks = {
            "fixed": self.value >= 1,
            "uniform": 1 <= self.low <= self.high,
            "lognormal": self.mean >= 1 and self.sigma >= 0,
            "empirical": len(self.values) > 0 and min(self.values) >= 1,
        }
        if self.kind not in checks:
            raise SpecError(f"lengths: unknown kind {self.kind!r}; allowed: {', '.join(checks)}")
        if not checks[self.kind]:
            raise SpecError(f"lengths: invalid {self.kind} parameters {self}; token counts must be >= 1")

    @classmethod
    def of(cls, value: int | Lengths | Sequence[int]) -> Lengths:
        """A fixed count, a list (empirical) or a ready distribution."""
        if isinstance(value, Lengths):
            return value
        if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
            return cls("fixed", value=int(value))
        if isinstance(value, (list, tuple, np.ndarray)):
            return cls("empirical", values=tuple(int(v) for v in value))
        raise SpecError(f"lengths must be a token count, a list of counts or a Lengths, got {value!r}")

    def sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """``n`` draws as int64 (at least 1)."""
        if self.kind == "fixed":
            out = np.full(n, self.value)
        elif self.kind == "uniform":
            out = rng.integers(self.low, self.high + 1, size=n)
        elif self.kind == "lognormal":
            mu = np.log(self.mean) - self.sigma**2 / 2.0  # so that the mean is ``mean``
            out = np.rint(rng.lognormal(mu, self.sigma, size=n))
        else:
            out = rng.choice(np.asarray(self.values), size=n)
        return np.maximum(np.asarray(out, np.int64), 1)

    @property
    def expected(self) -> float:
        """Mean token count."""
        return {"fixed": float(self.value), "uniform": (self.low + self.high) / 2.0, "lognormal": self.mean,
                "empirical": float(np.mean(self.values) if self.values else 0.0)}[self.kind]


@dataclass(frozen=True)
class Workload:
    """Requests to serve.

    Exactly one of ``rate`` (Poisson arrivals per second), ``trace`` (arrival times [s]),
    ``concurrency`` (closed-loop clients) or ``offline=True`` (everything queued at 0).

    ``stagger`` (closed loop): after the opening burst of ``concurrency`` simultaneous
    requests, spread the clients' second requests evenly over one request's expected
    duration, so that the steady state has clients out of step. That is what benchmarks
    measure after a few rounds (output lengths, HTTP and tokenization jitter pull clients
    apart); ``False`` keeps clients that finish together in lockstep, each round a burst.
    """

    isl: Lengths = field(default_factory=lambda: Lengths("fixed", value=1024))
    osl: Lengths = field(default_factory=lambda: Lengths("fixed", value=128))
    num_requests: int = 1000
    rate: float | None = None
    trace: tuple[float, ...] | None = None
    concurrency: int | None = None
    offline: bool = False
    seed: int = 0
    stagger: bool = True

    def __post_init__(self) -> None:
        object.__setattr__(self, "isl", Lengths.of(self.isl))
        object.__setattr__(self, "osl", Lengths.of(self.osl))
        modes = [self.rate is not None, self.trace is not None, self.concurrency is not None, self.offline]
        if sum(modes) != 1:
            raise SpecError("workload: give exactly one of rate (requests/s), trace (arrival times), "
                            "concurrency (closed-loop clients) or offline=True")
        if self.rate is not None and not self.rate > 0:
            raise SpecError(f"workload: rate must be > 0 requests/s, got {self.rate}")
        if self.concurrency is not None and self.concurrency < 1:
            raise SpecError(f"workload: concurrency must be >= 1, got {self.concurrency}")
        if self.trace is not None:
            object.__setattr__(self, "num_requests", len(self.trace))
        if self.num_requests < 1:
            raise SpecError(f"workload: num_requests must be >= 1, got {self.num_requests}")

    @property
    def mode(self) -> str:
        """``offline``, ``online`` (rate or trace) or ``closed_loop``."""
        if self.offline:
            return "offline"
        return "closed_loop" if self.concurrency is not None else "online"

    def draw(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Arrival times (NaN: decided by the closed loop), prompt and output lengths."""
        rng = np.random.default_rng(self.seed)
        n = self.num_requests
        isl, osl = self.isl.sample(n, rng), self.osl.sample(n, rng)
        if self.offline:
            arrivals = np.zeros(n)
        elif self.rate is not None:
            arrivals = np.cumsum(rng.exponential(1.0 / self.rate, size=n))
        elif self.trace is not None:
            arrivals = np.sort(np.asarray(self.trace, float))
        else:
            arrivals = np.full(n, np.nan)
            arrivals[: min(self.concurrency or 0, n)] = 0.0
        return arrivals, isl, osl

    def turnaround(self, period_s: float) -> np.ndarray:
        """Closed loop: how long after its client's previous request ends each request is
        sent [s]. With ``stagger``, the second round's requests wait ``j / concurrency`` of
        ``period_s`` (one request's expected duration), ``j = 0 .. concurrency - 1``."""
        out = np.zeros(self.num_requests)
        c = self.concurrency or 0
        if self.stagger and c > 1:
            second = out[c:2 * c]
            second[:] = period_s * np.arange(len(second)) / c
        return out
