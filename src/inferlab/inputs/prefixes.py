"""Prompts that share a leading part: system prompts, documents, conversations.

A workload's requests can carry a prefix that other requests share, which an engine with a
prefix cache (:mod:`~inferlab.serving.prefix_cache`) computes once:

- ``shared``: every prompt starts with one of ``groups`` prefixes of ``tokens`` tokens (a
  system prompt, few-shot examples, a document in retrieval-augmented generation), drawn
  uniformly or with Zipf popularity (``zipf`` exponent ``s``: the ``r``-th most popular
  has weight ``r^-s``). The prefix is part of the prompt (``isl`` counts it).
- ``sessions``: conversations of ``turns`` turns. Turn ``t``'s prompt is the conversation
  so far (turn ``t - 1``'s prompt and answer) plus a new message of ``isl`` tokens; turn
  ``t + 1`` is sent ``think_s`` after turn ``t``'s answer is complete. Conversations start
  at the workload's arrival process thinned to ``rate / turns`` (so that requests arrive
  at ``rate`` on average), or all at once offline.

Each request then has a *stream* (the shared sequence it reads from), the number of its
prompt's leading tokens on that stream (what a cache can hit), and the number of its
tokens that continue the stream (what it leaves for later requests: the prefix, or the
whole turn of a conversation).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import numpy as np

from ..checks import boolean
from ..errors import SpecError, did_you_mean
from .limits import MAX_REQUESTS, MAX_SPAN_S, MAX_TOKENS

if TYPE_CHECKING:
    from .workload import Workload

_KINDS = ("shared", "sessions")
#: Most distinct shared prefixes: one per request of the largest simulation.
MAX_GROUPS = MAX_REQUESTS
#: Most turns of one conversation; its last prompt holds every turn before it, and a context
#: window of 10M tokens at 10,000 tokens a turn holds 1,000.
MAX_TURNS = 1000
#: Largest Zipf exponent: at 100 the second most popular prefix is drawn 2^-100 as often as
#: the first, which is one prefix.
MAX_ZIPF = 100.0
_EXAMPLE = "e.g. 'shared:tokens=1000,groups=8', 'shared:tokens=4000,groups=200,zipf=1.1' or 'sessions:turns=4,think=5'"


@dataclass(frozen=True)
class Prefixes:
    """Which requests share a prompt prefix, and whether the engine caches prefixes.

    Parameters
    ----------
    kind : {"shared", "sessions"}
    tokens : int [token]
        ``shared``: length of each prefix (a prompt shorter than it is all prefix).
    groups : int
        ``shared``: distinct prefixes.
    zipf : float
        ``shared``: popularity exponent (0: uniform).
    turns : int
        ``sessions``: turns per conversation.
    think_s : float [s]
        ``sessions``: time between an answer and the next turn.
    cache : bool
        Whether the engine keeps and reuses prefix blocks (vLLM ``enable_prefix_caching``).
    """

    kind: Literal["shared", "sessions"] = "shared"
    tokens: int = 0
    groups: int = 1
    zipf: float = 0.0
    turns: int = 2
    think_s: float = 0.0
    cache: bool = True

    def __post_init__(self) -> None:
        if self.kind not in _KINDS:
            raise SpecError(f"prefix: unknown kind {self.kind!r}; allowed: {', '.join(_KINDS)} ({_EXAMPLE})")
        ints = {"tokens": (self.tokens, 1 if self.kind == "shared" else 0, MAX_TOKENS),
                "groups": (self.groups, 1, MAX_GROUPS), "turns": (self.turns, 1, MAX_TURNS)}
        for name, (value, low, high) in ints.items():
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not low <= value <= high:
                raise SpecError(f"prefix: {name} must be an integer from {low} to {high:,}, got {value!r:.80} "
                                f"({_EXAMPLE})")
        for name, high in (("zipf", MAX_ZIPF), ("think_s", MAX_SPAN_S)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float, np.number)) or not (
                    math.isfinite(value) and 0 <= value <= high):
                raise SpecError(f"prefix: {name} must be a finite number from 0 to {high:g}, got {value!r:.80}")
        boolean("prefix: cache", self.cache)

    @classmethod
    def parse(cls, text: str) -> Prefixes:
        """Read ``KIND:key=value,...``: keys ``tokens``, ``groups``, ``zipf`` (shared),
        ``turns``, ``think`` [s] (sessions), ``cache=off``.

        >>> Prefixes.parse("shared:tokens=1000,groups=8")
        Prefixes(kind='shared', tokens=1000, groups=8, zipf=0.0, turns=2, think_s=0.0, cache=True)
        """
        kind, _, rest = str(text).strip().partition(":")
        keys = {"shared": {"tokens": int, "groups": int, "zipf": float}, "sessions": {"turns": int, "think": float}}
        if kind not in keys:
            raise SpecError(f"prefix {text!r}: start with shared: or sessions:{did_you_mean(kind, keys)}; {_EXAMPLE}")
        allowed = {**keys[kind], "cache": str}
        values: dict[str, object] = {}
        for item in (part.strip() for part in rest.split(",") if part.strip()):
            key, sep, raw = item.partition("=")
            key = key.strip().lower()
            if not sep or key not in allowed:
                raise SpecError(f"prefix {text!r}: {item!r}{did_you_mean(key, allowed)} is not one of "
                                f"{', '.join(k + '=' for k in allowed)} for {kind}; {_EXAMPLE}")
            if ("think_s" if key == "think" else key) in values:
                raise SpecError(f"prefix {text!r}: {key}= is given twice; give it once")
            if key == "cache":
                if raw.strip().lower() not in ("on", "off"):
                    raise SpecError(f"prefix {text!r}: cache must be on or off, got {raw!r}")
                values["cache"] = raw.strip().lower() == "on"
                continue
            try:
                values["think_s" if key == "think" else key] = allowed[key](raw)  # type: ignore[operator]
            except ValueError:
                raise SpecError(f"prefix {text!r}: {key}={raw!r} is not a number") from None
        if kind == "shared" and "tokens" not in values:
            raise SpecError(f"prefix {text!r}: the prefix length tokens=N is missing; {_EXAMPLE}")
        return cls(kind=kind, **values)  # type: ignore[arg-type]

    def __str__(self) -> str:
        if self.kind == "shared":
            text = f"shared:tokens={self.tokens},groups={self.groups}" + (f",zipf={self.zipf:g}" if self.zipf else "")
        else:
            text = f"sessions:turns={self.turns},think={self.think_s:g}"
        return text + ("" if self.cache else ",cache=off")

    def check_held(self, longest: float) -> None:
        """Refuse a shared prefix longer than every prompt (the ``longest`` has that many tokens):
        a prompt holds its prefix."""
        if self.kind == "shared" and longest < self.tokens:
            raise SpecError(f"prefix {self}: the shared prefix of {self.tokens:,} tokens is longer than every prompt "
                            f"(the longest has {longest:,.0f} tokens); a prompt holds its prefix: give a shorter "
                            "prefix or longer prompts")

    def plan(self, workload: Workload) -> PrefixPlan:
        """Each request's lengths, stream, prefix and follow-up: the workload's draws, and for
        sessions its conversations built from them."""
        arrivals, isl, osl = workload.draw()
        isl, osl = isl.astype(float), osl.astype(float)
        if self.kind == "shared":
            if len(isl):
                self.check_held(float(np.max(isl)))
            rng = np.random.default_rng([workload.seed, 0x9FE])
            weights = np.arange(1.0, self.groups + 1.0) ** -float(self.zipf)
            stream = rng.choice(self.groups, size=len(isl), p=weights / weights.sum())
            on_stream = np.minimum(float(self.tokens), isl)
            none = np.full(len(isl), -1)
            return PrefixPlan(arrivals, isl, osl, stream, on_stream, on_stream, none, np.zeros(len(isl)), self.cache)
        if workload.mode == "closed_loop" or workload.trace is not None:
            raise SpecError("prefix sessions: conversations send their own next turns; give a rate (requests/s, "
                            "conversations start at rate / turns) or offline, not closed-loop clients or a trace")
        return self._sessions(arrivals, isl, osl)

    def _sessions(self, arrivals: np.ndarray, isl: np.ndarray, osl: np.ndarray) -> PrefixPlan:
        if np.isnan(arrivals).any():
            raise SpecError("prefix sessions: conversations send their own next turns; give a rate, a trace or "
                            "offline, not closed-loop clients")
        n, turns = len(isl), self.turns
        index = np.arange(n)
        session, turn = index // turns, index % turns
        starts = np.sort(arrivals)[: int(session[-1]) + 1] * turns if n else arrivals
        history = np.zeros(n)
        prompt = np.asarray(isl, float).copy()
        for t in range(1, turns):  # turn t extends turn t - 1 of the same conversation
            rows = np.flatnonzero(turn == t)
            history[rows] = prompt[rows - 1] + osl[rows - 1]
            prompt[rows] = history[rows] + isl[rows]
        nxt = np.where((turn < turns - 1) & (index + 1 < n), index + 1, -1)
        sent = np.where(turn == 0, starts[session], np.nan)
        think = np.where(turn > 0, float(self.think_s), 0.0)
        return PrefixPlan(sent, prompt, osl, session, history, prompt + osl, nxt, think, self.cache)


@dataclass(frozen=True)
class PrefixPlan:
    """Per-request prefix facts, arrays over requests (see :class:`Prefixes`).

    Attributes
    ----------
    arrivals : array [s]
        Send times; NaN for a later turn, sent ``think_s`` after the turn before it ends.
    isl, osl : arrays [token]
        Prompt and output lengths (a conversation's prompts include its history).
    stream : int array
        Shared sequence each request reads from.
    prefix : array [token]
        Leading prompt tokens on the stream: what a cache can hit.
    extends : array [token]
        Tokens of the request's sequence on the stream: what it leaves cached.
    next_turn : int array
        Request sent after this one finishes (-1: none).
    think_s : array [s]
        Delay from the previous turn's end to this request.
    cache : bool
        Whether the engine caches prefixes.
    """

    arrivals: np.ndarray
    isl: np.ndarray
    osl: np.ndarray
    stream: np.ndarray
    prefix: np.ndarray
    extends: np.ndarray
    next_turn: np.ndarray
    think_s: np.ndarray
    cache: bool = True

    def without(self, dropped: np.ndarray) -> PrefixPlan:
        """The plan less the ``dropped`` requests (a bool mask) and every later turn of their
        conversations (a conversation ends at a turn the engine refused)."""
        gone, nxt = np.asarray(dropped, bool).copy(), self.next_turn
        for i in np.flatnonzero(gone):
            j = int(nxt[i])
            while j >= 0 and not gone[j]:
                gone[j], j = True, int(nxt[j])
        keep = ~gone
        index = np.cumsum(keep) - 1
        kept_next = nxt[keep]
        follows = kept_next >= 0
        kept_next[follows] = np.where(keep[kept_next[follows]], index[kept_next[follows]], -1)
        return PrefixPlan(self.arrivals[keep], self.isl[keep], self.osl[keep], self.stream[keep], self.prefix[keep],
                          self.extends[keep], kept_next, self.think_s[keep], self.cache)


def shared_by_hit_rate(hit_rate: float, isl: float) -> Prefixes | None:
    """A stated prefix-cache hit rate ``h`` as a structure the simulation can run: one prefix
    of ``h x isl`` tokens that every prompt shares, which the cache finds while it holds it
    (None when that is under one token). Prompts shorter than the prefix are all prefix, so
    with spread-out lengths the simulated hit rate is somewhat below ``h``."""
    tokens = round(hit_rate * isl)
    return Prefixes(kind="shared", tokens=tokens, groups=1) if tokens >= 1 else None


def prompt_pool(prompts: int, isl: float) -> Prefixes:
    """A client that draws each prompt from ``prompts`` distinct ones (a synthetic benchmark
    dataset: AIPerf and genai-perf generate 100 by default and reuse them) as a structure the
    simulation can run: each distinct prompt is a prefix of ``isl`` tokens, so a repeat finds its
    whole prompt in the engine's prefix cache while the cache still holds it."""
    if isinstance(prompts, bool) or not isinstance(prompts, int) or prompts < 1:
        raise SpecError(f"prompts {prompts!r}: the distinct prompts a client draws from must be a whole number >= 1")
    return Prefixes(kind="shared", tokens=max(1, round(isl)), groups=min(prompts, MAX_GROUPS))


def prefixes(value: Prefixes | str | dict) -> Prefixes:
    """A :class:`Prefixes` from itself, its text form or a mapping of its fields."""
    if isinstance(value, Prefixes):
        return value
    if isinstance(value, str):
        return Prefixes.parse(value)
    if isinstance(value, dict):
        unknown = sorted(set(value) - set(Prefixes.__dataclass_fields__))
        if unknown:
            raise SpecError(f"prefix: unknown field(s) {', '.join(unknown)}; allowed: "
                            f"{', '.join(Prefixes.__dataclass_fields__)}")
        return Prefixes(**value)
    raise SpecError(f"prefix must be a Prefixes, a text ({_EXAMPLE}) or a mapping of its fields, got {value!r}")
