"""Workloads: how requests arrive and how long their prompts and outputs are.

Arrivals are ``offline`` (all queued at time zero), Poisson at a ``rate``, a given
``trace`` of arrival times, or a closed loop of ``concurrency`` clients that each send
the next request when the last one finishes; a rate or a trace may be capped at
``max_concurrency`` requests in flight. Lengths are fixed or drawn from uniform,
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

from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from ..checks import boolean, integer, real, real_array
from ..errors import SpecError, did_you_mean, option_name
from . import static_batch
from .lengths import Lengths, lengths_dict
from .limits import MAX_REQUESTS, MAX_SPAN_S
from .prefixes import prefixes


def _named(key: str) -> str:
    """A workload field as messages name it: the flag that gave it from the CLI (``--num-requests``),
    else ``workload: num_requests``."""
    name = option_name(key)
    return name if name != key else f"workload: {key}"


#: Keyword arguments of the entry points that describe a workload (a static batch's and traffic's).
WORKLOAD_KWARGS = ("isl", "osl", "batch_size", "prefill_batch", "waves", "rate", "concurrency", "trace", "offline",
                   "max_concurrency", "num_requests", "seed", "stagger", "prefix")
#: Highest arrival rate [request/s]: beyond it every request arrives within a nanosecond
#: of the last, which is ``offline=True``.
MAX_RATE = 1e9


@dataclass(frozen=True)
class Workload:
    """Requests to serve.

    Exactly one of ``rate`` (Poisson arrivals per second), ``trace`` (arrival times [s]),
    ``concurrency`` (closed-loop clients) or ``offline=True`` (everything queued at 0).

    ``max_concurrency`` (with a rate or a trace): at most that many requests in flight; a
    request due while that many are in flight waits for one to finish, and is timed from
    when it is sent (``vllm bench serve --max-concurrency``, SGLang's ``bench_serving``,
    GuideLLM's ``max_concurrency``: their clients hold it before the request starts).

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
    max_concurrency: int | None = None
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
                raise SpecError(f"{_named(name)}: {exc}") from None
        object.__setattr__(self, "offline", boolean(_named("offline"), self.offline))
        object.__setattr__(self, "stagger", boolean(_named("stagger"), self.stagger))
        object.__setattr__(self, "seed", integer(_named("seed"), self.seed, minimum=0, maximum=2**64 - 1,
                                                 what=""))
        modes = [self.rate is not None, self.trace is not None, self.concurrency is not None, self.offline]
        if sum(modes) != 1:
            raise SpecError("workload: give exactly one of rate (requests/s), trace (arrival times), "
                            "concurrency (closed-loop clients) or offline=True (or batch_size for a static batch)")
        if self.trace is not None:
            trace = real_array(_named("trace"), self.trace, minimum=0.0, maximum=MAX_SPAN_S,
                               max_size=MAX_REQUESTS, unit="s")
            object.__setattr__(self, "trace", tuple(trace.tolist()))
            if self.num_requests not in (len(trace), Workload.num_requests):  # (the default: the trace's count)
                raise SpecError(f"workload: num_requests={self.num_requests!r} beside a trace of {len(trace):,} arrival "
                                "times: a trace sends one request per time; drop num_requests")
            object.__setattr__(self, "num_requests", len(trace))
        n = integer(_named("num_requests"), self.num_requests, maximum=MAX_REQUESTS, what="requests",
                    whole_floats=True, unit="request")
        object.__setattr__(self, "num_requests", n)
        if self.concurrency is not None:
            object.__setattr__(self, "concurrency", integer(_named("concurrency"), self.concurrency,
                                                            maximum=MAX_REQUESTS, what="clients", whole_floats=True,
                                                            unit="request"))
        if self.rate is not None:
            self._check_rate(n)
        if self.max_concurrency is not None:
            if self.rate is None and self.trace is None:
                raise SpecError("workload: max_concurrency caps the requests in flight of a rate or a trace; a closed "
                                "loop's clients are its concurrency, an offline run is limited by the engine's "
                                "max_num_seqs")
            object.__setattr__(self, "max_concurrency", integer(_named("max_concurrency"), self.max_concurrency,
                                                                maximum=MAX_REQUESTS, what="requests",
                                                                whole_floats=True, unit="request"))

    def _check_rate(self, n: int) -> None:
        rate = real(_named("rate"), self.rate, minimum=0.0, maximum=MAX_RATE, include_minimum=False,
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
            arrivals = self.client_starts(n)
        return arrivals, isl, osl

    def client_starts(self, n: int) -> np.ndarray:
        """Closed loop: send times of ``n`` requests [s], each client's first at 0 and the others
        NaN (sent as their client's previous one ends)."""
        arrivals = np.full(n, np.nan)
        arrivals[: min(self.concurrency or 0, n)] = 0.0
        return arrivals

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
        if self.max_concurrency is not None:
            out["max_concurrency"] = self.max_concurrency
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
                              "max_concurrency": self.max_concurrency, "seed": self.seed, "stagger": self.stagger}
        if self.prefix is not None:
            kw["prefix"] = self.prefix
        return kw
