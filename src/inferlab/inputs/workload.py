"""Workloads: how requests arrive and how long their prompts and outputs are.

Arrivals are ``offline`` (all queued at time zero), Poisson at a ``rate``, a given
``trace`` of arrival times, or a closed loop of ``concurrency`` clients that each send
the next request when the last one finishes. Lengths are fixed or drawn from uniform,
lognormal or empirical distributions, reproducibly from ``seed``.

A static batch (``batch_size``, what :func:`inferlab.estimate` predicts) is the fifth
mode: ``batch_size``, ``isl`` and ``osl`` are whole numbers or lists of them, axes of a
grid (:mod:`.static_batch`). ``to_dict()`` and ``Workload.from_dict()`` give the one
YAML/JSON form.

The workload stays a frozen dataclass validated in ``__post_init__`` rather than a
pydantic model: the serving simulator copies it per replica (``dataclasses.replace``)
and reads its fields on every run, and the numbers it draws must not change.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from ..checks import boolean, integer, real, real_array
from ..errors import SpecError, did_you_mean
from . import static_batch
from .limits import MAX_REQUESTS, MAX_SPAN_S, MAX_TOKENS
from .prefixes import prefixes

#: Largest sigma of a lognormal length: at 3 a request in a million is ~e^(3 x 4.75) ~ 10^6
#: times the median already.
MAX_SIGMA = 3.0
#: Keyword arguments of the entry points that describe a workload (a static batch's and traffic's).
WORKLOAD_KWARGS = ("isl", "osl", "batch_size", "prefill_batch", "waves", "rate", "concurrency", "trace", "offline",
                   "num_requests", "seed", "stagger", "prefix")
#: Highest arrival rate [request/s]: beyond it every request arrives within a nanosecond
#: of the last, which is ``offline=True``.
MAX_RATE = 1e9


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
        kinds = ("fixed", "uniform", "lognormal", "empirical")
        if not isinstance(self.kind, str) or self.kind not in kinds:
            raise SpecError(f"lengths: unknown kind {self.kind!r}; allowed: {', '.join(kinds)}")
        tokens = {"minimum": 1, "maximum": MAX_TOKENS, "what": "tokens", "whole_floats": True}
        if self.kind == "fixed":
            object.__setattr__(self, "value", integer("lengths: value", self.value, **tokens))
        elif self.kind == "uniform":
            low = integer("lengths: low", self.low, **tokens)
            high = integer("lengths: high", self.high, **tokens)
            if low > high:
                raise SpecError(f"lengths: uniform low {low} is above high {high}; give low <= high")
            object.__setattr__(self, "low", low)
            object.__setattr__(self, "high", high)
        elif self.kind == "lognormal":
            object.__setattr__(self, "mean", real("lengths: mean", self.mean, minimum=1.0, maximum=MAX_TOKENS,
                                                  unit="token"))
            object.__setattr__(self, "sigma", real("lengths: sigma", self.sigma, minimum=0.0, maximum=MAX_SIGMA))
        else:
            values = self.values
            if not isinstance(values, (list, tuple, np.ndarray)) or len(values) == 0:
                raise SpecError(f"lengths: empirical values must be a non-empty list of token counts, got {values!r:.80}")
            if len(values) > MAX_REQUESTS:
                raise SpecError(f"lengths: {len(values):,} empirical values; at most {MAX_REQUESTS:,}")
            object.__setattr__(self, "values", tuple(integer("lengths: values", v, **tokens) for v in values))

    @classmethod
    def of(cls, value: int | str | Mapping[str, Any] | Lengths | Sequence[int]) -> Lengths:
        """A fixed count, a list (empirical), a text as the command line takes it (:meth:`parse`),
        a mapping of the fields (``{"kind": "lognormal", "mean": 1024, "sigma": 0.5}``, as scenario
        and workload files hold it) or a ready distribution."""
        if isinstance(value, Lengths):
            return value
        from ..units import is_quantity, to_si_array

        if is_quantity(value):  # 2 ktok is 2,000 tokens; another dimension is refused
            value = to_si_array(value, "token", "lengths")
            value = value.item() if value.ndim == 0 else value
        if isinstance(value, (float, np.floating)) and float(value).is_integer():
            value = int(value)  # 1.5e3 in a file: a whole count written as a number with an exponent
        if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
            return cls("fixed", value=int(value))
        if isinstance(value, (list, tuple)) or isinstance(value, np.ndarray) and value.ndim == 1:
            return cls("empirical", values=tuple(value))
        if isinstance(value, str):
            return cls.parse(value)
        if isinstance(value, Mapping):
            allowed = tuple(cls.__dataclass_fields__)
            unknown = sorted(str(k) for k in value if k not in allowed)
            if unknown:
                raise SpecError(f"lengths: unknown key {unknown[0]!r}{did_you_mean(unknown[0], allowed)} in a "
                                f"distribution; allowed: {', '.join(allowed)}")
            return cls(**value)
        raise SpecError(f"lengths must be a token count, a list of counts, a text like "
                        f"'lognormal:mean=1024,sigma=0.5', a mapping of its fields or a Lengths, got {value!r:.80}")

    @classmethod
    def parse(cls, text: str) -> Lengths:
        """Token counts as text: ``2048`` (fixed), ``128,512,2048`` (drawn from these),
        ``uniform:128-2048``, ``lognormal:mean=1024,sigma=0.5``.

        >>> Lengths.parse("uniform:128-2048")
        Lengths(kind='uniform', value=0, low=128, high=2048, mean=0.0, sigma=0.0, values=())
        """
        kind, _, rest = text.strip().partition(":")
        try:
            if not rest:
                values = [int(v) for v in kind.split(",") if v.strip()]
                if len(values) == 1:
                    return cls("fixed", value=values[0])
                return cls("empirical", values=tuple(values))
            if kind == "uniform":
                low, high = (int(v) for v in rest.split("-"))
                return cls("uniform", low=low, high=high)
            if kind == "lognormal":
                fields = dict(part.split("=", 1) for part in rest.split(","))
                if set(fields) <= {"mean", "sigma"}:
                    return cls("lognormal", mean=float(fields["mean"]), sigma=float(fields.get("sigma", 0.0)))
        except SpecError as exc:  # well formed, but not a valid distribution: its own message says why
            raise SpecError(f"lengths {text!r}: {exc}") from None
        except (ValueError, KeyError, TypeError):
            pass
        hint = did_you_mean(kind, ("uniform", "lognormal")) if rest and kind not in ("uniform", "lognormal") else ""
        raise SpecError(f"lengths {text!r}{hint} is not an integer, integers separated by commas, uniform:LOW-HIGH or "
                        "lognormal:mean=M,sigma=S")

    def sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """``n`` draws as int64 (at least 1)."""
        if self.kind == "fixed":
            out = np.full(n, self.value)
        elif self.kind == "uniform":
            out = rng.integers(self.low, self.high + 1, size=n)
        elif self.kind == "lognormal":
            mu = np.log(self.mean) - self.sigma**2 / 2.0  # so that the mean is ``mean``
            out = np.rint(rng.lognormal(mu, self.sigma, size=n))
            if out.size and out.max() > MAX_TOKENS:  # a tail this long means sigma describes no real workload
                raise SpecError(f"lengths: lognormal(mean={self.mean:g}, sigma={self.sigma:g}) drew "
                                f"{out.max():.3g} tokens, more than {MAX_TOKENS:,}; give a smaller sigma")
        else:
            out = rng.choice(np.asarray(self.values), size=n)
        return np.maximum(np.asarray(out, np.int64), 1)

    @property
    def expected(self) -> float:
        """Mean token count."""
        return {"fixed": float(self.value), "uniform": (self.low + self.high) / 2.0, "lognormal": self.mean,
                "empirical": float(np.mean(self.values) if self.values else 0.0)}[self.kind]

    @property
    def second_moment_ratio(self) -> float:
        """``E[X^2] / E[X]^2`` of the token count (1 for a fixed one; ``exp(sigma^2)`` for a lognormal)."""
        if self.kind == "fixed":
            return 1.0
        if self.kind == "uniform":
            mean, n = (self.low + self.high) / 2.0, self.high - self.low + 1.0
            return 1.0 + (n * n - 1.0) / 12.0 / mean**2
        if self.kind == "lognormal":
            return float(np.exp(self.sigma**2))
        v = np.asarray(self.values, float)
        return float(np.mean(v * v) / np.mean(v) ** 2)

    def quantiles(self, u: np.ndarray) -> np.ndarray:
        """Token counts at probabilities ``u`` in (0, 1) (unrounded for the continuous kinds)."""
        from scipy.special import ndtri

        u = np.asarray(u, float)
        if self.kind == "fixed":
            return np.full(u.shape, float(self.value))
        if self.kind == "uniform":
            return self.low + u * (self.high - self.low)
        if self.kind == "lognormal":
            return self.mean * np.exp(self.sigma * ndtri(u) - self.sigma**2 / 2.0)
        return np.quantile(np.asarray(self.values, float), u, method="inverted_cdf")  # the values drawn, not between them


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

    ``batch_size`` (a static batch, instead of the four): requests processed together
    [request], a whole number or a list; ``isl`` and ``osl`` are then whole numbers or
    lists too, axes that broadcast together (``grid="broadcast"``, as
    :func:`inferlab.estimate` takes arrays) or span every combination (``grid="outer"``,
    as ``inferlab estimate --batch 1,8 --isl 128,1024``). ``prefill_batch`` is the prefill
    pool's batch of a disaggregated deployment, ``waves`` runs a batch whose KV cache does
    not fit in waves. ``prefix`` (traffic modes): prompts that share a prefix
    (:class:`~inferlab.inputs.prefixes.Prefixes`, its text or a mapping of its fields),
    kept as given; the serving layer that simulates it checks its fields.
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
    batch_size: int | tuple[int, ...] | None = None
    prefill_batch: int | tuple[int, ...] | None = None
    grid: Literal["broadcast", "outer"] = "broadcast"
    waves: bool = False
    prefix: Any = None

    def __post_init__(self) -> None:
        modes = [self.rate is not None, self.trace is not None, self.concurrency is not None, self.offline is True,
                 self.batch_size is not None]
        if self.batch_size is not None:
            if sum(modes) != 1:
                raise SpecError("workload: a static batch (batch_size) has no arrivals; give batch_size or one of "
                                "rate, trace, concurrency and offline=True")
            static_batch.check(self)
            return
        unused = [name for name, given in (("prefill_batch", self.prefill_batch is not None), ("waves", self.waves),
                                           ("grid", self.grid != "broadcast")) if given]
        if unused:
            raise SpecError(f"workload: {', '.join(unused)} applies only to a static batch (batch_size); drop it")
        if self.prefix is not None:
            try:
                object.__setattr__(self, "prefix", prefixes(self.prefix))
            except SpecError as exc:
                raise SpecError(f"workload: prefix: {exc}") from None
        for name in ("isl", "osl"):
            try:
                object.__setattr__(self, name, Lengths.of(getattr(self, name)))
            except SpecError as exc:
                raise SpecError(f"workload: {name}: {exc}") from None
        object.__setattr__(self, "offline", boolean("workload: offline", self.offline))
        object.__setattr__(self, "stagger", boolean("workload: stagger", self.stagger))
        object.__setattr__(self, "seed", integer("workload: seed", self.seed, minimum=0, maximum=2**64 - 1,
                                                 what=""))
        modes = [self.rate is not None, self.trace is not None, self.concurrency is not None, self.offline]
        if sum(modes) != 1:
            raise SpecError("workload: give exactly one of rate (requests/s), trace (arrival times), "
                            "concurrency (closed-loop clients) or offline=True (or batch_size for a static batch)")
        if self.trace is not None:
            trace = real_array("workload: trace", self.trace, minimum=0.0, maximum=MAX_SPAN_S,
                               max_size=MAX_REQUESTS, unit="s")
            object.__setattr__(self, "trace", tuple(trace.tolist()))
            object.__setattr__(self, "num_requests", len(trace))
        n = integer("workload: num_requests", self.num_requests, maximum=MAX_REQUESTS, what="requests",
                    whole_floats=True)
        object.__setattr__(self, "num_requests", n)
        if self.concurrency is not None:
            object.__setattr__(self, "concurrency", integer("workload: concurrency", self.concurrency,
                                                            maximum=MAX_REQUESTS, what="clients", whole_floats=True))
        if self.rate is not None:
            self._check_rate(n)

    def _check_rate(self, n: int) -> None:
        rate = real("workload: rate", self.rate, minimum=0.0, maximum=MAX_RATE, include_minimum=False,
                    unit="request/s")
        if n / rate > MAX_SPAN_S:
            raise SpecError(f"workload: {n:,} requests at {rate:g} requests/s arrive over about {n / rate:.3g} s; "
                            f"at most {MAX_SPAN_S:g} s (11.6 days) can be simulated at microsecond resolution: "
                            f"give a rate of at least {n / MAX_SPAN_S:.3g} requests/s or fewer requests")
        object.__setattr__(self, "rate", rate)

    @property
    def mode(self) -> str:
        """``offline``, ``online`` (rate or trace), ``closed_loop`` or ``static_batch``."""
        if self.batch_size is not None:
            return "static_batch"
        if self.offline:
            return "offline"
        return "closed_loop" if self.concurrency is not None else "online"

    def draw(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Arrival times (NaN: decided by the closed loop), prompt and output lengths.

        Prompt lengths, output lengths and arrival gaps are three streams of the seed, so the
        first ``k`` requests of ``n`` are the ``k`` requests of a shorter run: more requests
        extend a run, they do not redraw it (the planner's probes lengthen their runs).
        """
        rng = np.random.default_rng(self.seed)
        n = self.num_requests
        isl, osl = (lengths.sample(n, np.random.default_rng([self.seed, k]))
                    for k, lengths in ((1, self.isl), (2, self.osl)))
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

    def to_dict(self) -> dict[str, Any]:
        """The one JSON-ready form: the mode's fields, lengths as a number, a list or a mapping."""
        if self.batch_size is not None:
            return static_batch.to_dict(self)
        out: dict[str, Any] = {"isl": lengths_dict(self.isl), "osl": lengths_dict(self.osl),
                               "num_requests": self.num_requests}
        if self.rate is not None:
            out["rate"] = self.rate
        elif self.trace is not None:
            out["trace"] = list(self.trace)
        elif self.concurrency is not None:
            out["concurrency"] = self.concurrency
        else:
            out["offline"] = True
        out.update(seed=self.seed, stagger=self.stagger)
        if self.prefix is not None:
            out["prefix"] = {f: getattr(self.prefix, f) for f in self.prefix.__dataclass_fields__}
        return out

    @classmethod
    def from_dict(cls, data: Any) -> Workload:
        """A Workload from :meth:`to_dict`'s form (or any mapping of its fields)."""
        if not isinstance(data, dict):
            raise SpecError(f"workload: expected a mapping of fields, got {type(data).__name__}")
        unknown = sorted(str(k) for k in set(data) - set(cls.__dataclass_fields__))
        if unknown:
            raise SpecError(f"workload: unknown key(s) {', '.join(unknown)[:200]}"
                            f"{did_you_mean(unknown[0], cls.__dataclass_fields__)}; allowed: "
                            f"{', '.join(cls.__dataclass_fields__)}")
        fields = dict(data)
        for name in ("isl", "osl"):
            if isinstance(fields.get(name), (dict, str)):
                fields[name] = Lengths.of(fields[name])
        if isinstance(fields.get("trace"), list):
            fields["trace"] = tuple(fields["trace"])
        return cls(**fields)

    def estimate_kwargs(self) -> dict[str, Any]:
        """Keyword arguments of :func:`inferlab.estimate`: a static batch's axes (and ``waves``)."""
        if self.batch_size is None:
            raise SpecError(f"estimate predicts a static batch, but the workload is {self.mode}: give "
                            "Workload(batch_size=...), or serve() the traffic")
        return static_batch.estimate_kwargs(self)

    def serve_kwargs(self) -> dict[str, Any]:
        """Keyword arguments of :func:`inferlab.serve`: lengths, arrivals, seed and prefix structure."""
        if self.batch_size is not None:
            raise SpecError("serve simulates traffic, but the workload is a static batch: give a rate, a trace, "
                            "a concurrency or offline=True, or estimate() the batch")
        kw: dict[str, Any] = {"isl": self.isl, "osl": self.osl, "num_requests": self.num_requests, "rate": self.rate,
                              "concurrency": self.concurrency, "trace": self.trace, "offline": self.offline,
                              "seed": self.seed, "stagger": self.stagger}
        if self.prefix is not None:
            kw["prefix"] = self.prefix
        return kw


def lengths_dict(lengths: Lengths) -> Any:
    """A :class:`Lengths` as a number (fixed), a list (empirical) or a mapping of its fields."""
    if lengths.kind == "fixed":
        return lengths.value
    if lengths.kind == "empirical":
        return list(lengths.values)
    if lengths.kind == "uniform":
        return {"kind": "uniform", "low": lengths.low, "high": lengths.high}
    return {"kind": "lognormal", "mean": lengths.mean, "sigma": lengths.sigma}
