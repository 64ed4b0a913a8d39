"""Traffic over time: a request rate that follows a daily curve, a ramp or a burst (or a
trace file), the requests' lengths, and the prefixes they share.

Arrivals are a Poisson process with a time-varying rate ``lambda(t)``: unit-rate arrival
times ``u_k`` mapped through the inverse of the cumulative rate ``Lambda(t) = int_0^t
lambda``, so that ``t_k = Lambda^{-1}(u_k)`` (the time-rescaling theorem).

References
----------
.. [1] Brown, Barbieri, Ventura, Kass and Frank, "The time-rescaling theorem and its
   application to neural spike train data analysis", Neural Computation 14(2), 2002.
.. [2] Patel et al., "Splitwise: Efficient generative LLM inference using phase splitting",
   ISCA 2024, fig. 3 (Azure LLM inference traces: coding and conversation load varies over
   the day). The daily amplitude and peak hour below are assumptions shaped after it.
"""

from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Literal

import numpy as np

from ..checks import real
from ..errors import SpecError
from ..specs.validation import read_text
from ..inputs.workload import MAX_RATE, Lengths

#: Daily curve: peak-to-mean swing of the rate. An assumption (busy afternoon, quiet night; [2]).
DEFAULT_DAILY_AMPLITUDE = 0.6
#: Hour of the daily peak (local time). An assumption.
DEFAULT_PEAK_HOUR = 14.0
_SHAPES = ("constant", "daily", "ramp", "burst")
_DAY_S = 86400.0


#: Requests one fleet simulation takes at most (a day at 115 requests/s): each holds about 1 kB
#: while simulated (1.8 million took 1.5 GB), so that the cap stays within a laptop's memory.
MAX_REQUESTS = 10**7


def check_count(n: float, what: str) -> None:
    """Refuse more requests than one simulation holds (:data:`MAX_REQUESTS`)."""
    if n > MAX_REQUESTS:
        raise SpecError(f"fleet: {what} about {n:.3g} requests; at most {MAX_REQUESTS:.0e} are simulated (a day at "
                        "115 requests/s; each takes about 1 kB of memory): lower the rate or the horizon, or "
                        "simulate a representative hour")

@dataclass(frozen=True)
class Profile:
    """Request rate over time [request/s].

    Parameters
    ----------
    shape : {"constant", "daily", "ramp", "burst"}
    rate : float [request/s]
        Mean rate (``daily``), base rate (``burst``), start rate (``ramp``), or the rate.
    peak_rate : float [request/s]
        ``ramp``: the rate at ``end_s``; ``burst``: the rate during the burst.
    start_s, end_s : float [s]
        ``ramp``: the rise; ``burst``: the burst.
    amplitude : float
        ``daily``: ``rate (1 + amplitude cos(2 pi (t - peak) / day))``.
    peak_hour : float [h]
        ``daily``: when the rate peaks.
    """

    shape: Literal["constant", "daily", "ramp", "burst"] = "constant"
    rate: float = 1.0
    peak_rate: float = 0.0
    start_s: float = 0.0
    end_s: float = 0.0
    amplitude: float = DEFAULT_DAILY_AMPLITUDE
    peak_hour: float = DEFAULT_PEAK_HOUR

    def __post_init__(self) -> None:
        if not isinstance(self.shape, str) or self.shape not in _SHAPES:
            raise SpecError(f"traffic shape {self.shape!r} is unknown; allowed: {', '.join(_SHAPES)}")
        for name, high in (("rate", MAX_RATE), ("peak_rate", MAX_RATE), ("start_s", 1e9), ("end_s", 1e9),
                           ("amplitude", 1.0), ("peak_hour", 24.0)):
            object.__setattr__(self, name, real(f"traffic.{name}", getattr(self, name), minimum=0.0, maximum=high))
        uses = {"constant": (), "daily": ("amplitude", "peak_hour"), "ramp": ("peak_rate", "start_s", "end_s"),
                "burst": ("peak_rate", "start_s", "end_s")}[self.shape]
        unused = [f.name for f in fields(self) if f.name not in ("shape", "rate", *uses)
                  and getattr(self, f.name) != f.default]
        if unused:
            raise SpecError(f"traffic {self.shape}: {', '.join(unused)} do{'es' if len(unused) == 1 else ''} not apply "
                            f"to a {self.shape} rate; "
                            + (f"it takes {', '.join(uses)}" if uses else "it takes only rate")
                            + "; drop the others or change the shape")
        if self.shape in ("ramp", "burst") and not self.end_s > self.start_s:
            raise SpecError(f"traffic {self.shape}: end_s ({self.end_s}) must be after start_s ({self.start_s})")

    def rate_at(self, t: np.ndarray) -> np.ndarray:
        """The rate at times ``t`` [s] -> [request/s]."""
        t = np.asarray(t, float)
        if self.shape == "daily":
            phase = 2.0 * np.pi * (t / _DAY_S - self.peak_hour / 24.0)
            return self.rate * (1.0 + self.amplitude * np.cos(phase))
        if self.shape == "ramp":
            x = np.clip((t - self.start_s) / (self.end_s - self.start_s), 0.0, 1.0)
            return self.rate + (self.peak_rate - self.rate) * x
        if self.shape == "burst":
            return np.where((t >= self.start_s) & (t < self.end_s), self.peak_rate, self.rate)
        return np.full_like(t, self.rate)

    def arrivals(self, horizon_s: float, rng: np.random.Generator, *, scale: float = 1.0) -> np.ndarray:
        """Poisson arrival times in ``[0, horizon_s)`` [s] at ``scale`` times the rate (time rescaling)."""
        grid = np.linspace(0.0, horizon_s, max(int(horizon_s / 10.0), 2) + 1)
        if self.shape in ("ramp", "burst"):  # its edges on the grid: a burst of any length, anywhere, is counted
            edges = np.array([self.start_s, self.end_s])
            grid = np.union1d(grid, edges[(edges > 0.0) & (edges < horizon_s)])
        # the rate at each interval's middle: exact for a burst's steps and a ramp's lines between the edges
        lam = self.rate_at(0.5 * (grid[1:] + grid[:-1])) * scale
        cum = np.concatenate([[0.0], np.cumsum(lam * np.diff(grid))])
        total = cum[-1]
        if total <= 0:
            return np.zeros(0)
        check_count(total, f"the traffic sends over {horizon_s:g} s")
        n = rng.poisson(total)
        u = np.sort(rng.uniform(0.0, total, n))
        return np.interp(u, cum, grid)


@dataclass(frozen=True)
class Requests:
    """The fleet's requests, arrays over requests in arrival order of first turns.

    Attributes
    ----------
    arrival : array [s]
        When each is sent; NaN for a conversation's later turn (sent ``think_s`` after the
        turn before it finishes).
    isl, osl : array [token]
    stream : int array
        Shared sequence its prompt starts with (-1: none).
    prefix : array [token]
        Leading prompt tokens on the stream (what a cache can hit).
    extends : array [token]
        Tokens of its sequence on the stream (what it leaves cached).
    next_turn : int array
        The conversation's next request (-1: none).
    think_s : array [s]
    region : str array, optional
        Where each user is ("local" when absent).
    model : str array, optional
        The model each asks for ("" when absent: any pool).
    """

    arrival: np.ndarray
    isl: np.ndarray
    osl: np.ndarray
    stream: np.ndarray
    prefix: np.ndarray
    extends: np.ndarray
    next_turn: np.ndarray
    think_s: np.ndarray
    region: np.ndarray | None = None
    model: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.isl)


def plain(arrival: np.ndarray, isl: np.ndarray, osl: np.ndarray) -> Requests:
    """Requests that share nothing."""
    n = len(isl)
    none = np.full(n, -1)
    return Requests(np.asarray(arrival, float), np.asarray(isl, float), np.asarray(osl, float), none,
                    np.zeros(n), np.zeros(n), none, np.zeros(n))


def shared(arrival: np.ndarray, isl: np.ndarray, osl: np.ndarray, *, tokens: int, groups: int, zipf: float,
           rng: np.random.Generator, first_stream: int = 0) -> Requests:
    """Prompts that start with one of ``groups`` prefixes of ``tokens`` (documents, system
    prompts) of Zipf popularity ``zipf``."""
    weights = np.arange(1.0, groups + 1.0) ** -float(zipf)
    stream = first_stream + rng.choice(groups, size=len(isl), p=weights / weights.sum())
    on = np.minimum(float(tokens), np.asarray(isl, float))
    base = plain(arrival, isl, osl)
    return Requests(base.arrival, base.isl, base.osl, stream, on, on, base.next_turn, base.think_s)


def sessions(starts: np.ndarray, isl: np.ndarray, osl: np.ndarray, *, turns: int, think_s: float,
             first_stream: int = 0) -> Requests:
    """Conversations started at ``starts`` [s], of ``turns`` turns: turn ``t``'s prompt is the
    conversation so far plus a new message of ``isl`` tokens (the draws, ``turns`` per conversation)."""
    n = len(starts) * turns
    isl, osl = np.asarray(isl, float)[:n], np.asarray(osl, float)[:n]
    index = np.arange(n)
    session, turn = index // turns, index % turns
    prompt, history = isl.copy(), np.zeros(n)
    for t in range(1, turns):
        rows = np.flatnonzero(turn == t)
        history[rows] = prompt[rows - 1] + osl[rows - 1]
        prompt[rows] = history[rows] + isl[rows]
    nxt = np.where(turn < turns - 1, index + 1, -1)
    sent = np.where(turn == 0, np.asarray(starts, float)[session], np.nan)
    think = np.where(turn > 0, float(think_s), 0.0)
    return Requests(sent, prompt, osl, first_stream + session, history, prompt + osl, nxt, think)


def concat(parts: list[Requests]) -> Requests:
    """Several request sets as one (indices of later turns shifted)."""
    out, offset = {}, 0
    fields = Requests.__dataclass_fields__
    for name in fields:
        out[name] = []
    for p in parts:
        for name in fields:
            v = getattr(p, name)
            if v is None:
                v = np.full(len(p), "local" if name == "region" else "", object)
            out[name].append(np.where(v >= 0, v + offset, -1) if name == "next_turn" else v)
        offset += len(p)
    return Requests(**{k: np.concatenate(v) if v else np.zeros(0) for k, v in out.items()})


def lengths(value: object, n: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` lengths [token] from a count, a distribution mapping or a :class:`Lengths`."""
    return Lengths.of(value).sample(n, rng).astype(float)  # type: ignore[arg-type]


def read_trace(path: str | Path) -> Requests:
    """Requests from a CSV file with columns ``arrival_s``, ``isl``, ``osl`` and optionally
    ``session`` (requests of one session follow each other, each prompt extending the one
    before) or ``prefix_id`` with ``prefix_tokens`` (a shared prefix)."""
    p = Path(path)
    if not p.is_file():
        raise SpecError(f"trace file {str(p)!r} {'is a folder' if p.is_dir() else 'not found'}; give a CSV with "
                        "columns arrival_s,isl,osl")
    text = read_text(p, f"trace {p.name}")  # (without a spreadsheet's byte-order mark)
    check_count(text.count("\n") - 1, f"the trace {p.name} holds")  # (before its rows are parsed)
    rows = list(csv.DictReader(io.StringIO(text, newline=""), skipinitialspace=True))  # 'arrival_s, isl, osl' too
    need = {"arrival_s", "isl", "osl"}
    if not rows or not need <= set(rows[0]):
        raise SpecError(f"trace {p.name}: needs the columns arrival_s, isl, osl (got {sorted(rows[0]) if rows else []})")
    arrival, isl, osl = (np.array([_cell(p.name, line, r, col) for line, r in enumerate(rows, 2)])
                         for col in ("arrival_s", "isl", "osl"))
    if np.any(arrival < 0):
        raise SpecError(f"trace {p.name}: line {int(np.argmax(arrival < 0)) + 2}, column arrival_s: a time >= 0 [s], "
                        f"got {arrival[arrival < 0][0]:g}")
    _tokens(p.name, "isl", isl, 1)
    _tokens(p.name, "osl", osl, 1)
    n = len(rows)
    order = np.argsort(arrival, kind="stable")
    arrival, isl, osl = arrival[order], isl[order], osl[order]
    rows = [rows[i] for i in order]
    stream, prefix = np.full(n, -1), np.zeros(n)
    if "prefix_id" in rows[0]:
        ids = {key: k for k, key in enumerate(dict.fromkeys(r["prefix_id"] for r in rows))}
        stream = np.array([ids[r["prefix_id"]] for r in rows])
        given = np.array([_cell(p.name, int(order[i]) + 2, r, "prefix_tokens") if r.get("prefix_tokens") else 0.0
                          for i, r in enumerate(rows)])
        _tokens(p.name, "prefix_tokens", given, 0, lines=order)
        prefix = np.minimum(given, isl)
    elif "session" in rows[0]:
        ids = {key: k for k, key in enumerate(dict.fromkeys(r["session"] for r in rows))}
        stream = np.array([ids[r["session"]] for r in rows])
        last: dict[int, int] = {}
        for i, s in enumerate(stream.tolist()):  # the previous turn's sequence is this prompt's prefix
            if s in last:
                j = last[s]
                prefix[i] = min(isl[j] + osl[j], isl[i])
            last[s] = i
    extends = np.where(stream >= 0, np.maximum(prefix, isl + osl if "session" in rows[0] else prefix), 0.0)
    none = np.full(n, -1)
    return Requests(arrival, isl, osl, stream, prefix, extends, none, np.zeros(n))


def _tokens(name: str, column: str, values: np.ndarray, least: int, lines: np.ndarray | None = None) -> None:
    """Refuse a token count that is not a whole number >= ``least``, naming its line (``lines``:
    each value's row in the file, where the values were sorted)."""
    bad = np.flatnonzero((values < least) | (values != np.round(values)))
    if bad.size:
        row = int(bad[0] if lines is None else lines[bad[0]])
        raise SpecError(f"trace {name}: line {row + 2}, column {column}: a token count is a whole number >= {least}, "
                        f"got {values[bad[0]]:g}")


def _cell(name: str, line: int, row: dict, column: str) -> float:
    """One cell of a trace as a finite number, or a SpecError naming the file, line and column."""
    raw = row.get(column)
    try:
        value = float(raw)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        value = math.nan
    if not math.isfinite(value):
        missing = "missing (a short row)" if raw is None else f"{raw!r:.30} is not a finite number"
        raise SpecError(f"trace {name}: line {line}, column {column}: {missing}")
    return value
