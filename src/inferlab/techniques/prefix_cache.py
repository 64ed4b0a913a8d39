"""Prefix caching: prompt tokens whose KV cache is already held skip the prefill.

An engine with a prefix cache (vLLM automatic prefix caching, SGLang RadixAttention) keeps
the KV blocks of earlier prompts and matches a new prompt against them *from its first
token*; the longest matching prefix is not recomputed. The prefill then runs only the
remaining ``isl - cached`` tokens, whose attention still reads the cached keys and values:
the technique changes the shape of the step (``Step.prefill(batch, isl, cached)``), and
the core never learns that a cache exists.

Memory is unchanged: the cached prefix's KV blocks stay resident while a sequence uses
them, so a sequence holds ``isl + osl`` tokens of KV cache exactly as without caching
(:func:`kv_resident_tokens`). Sequences of one batch that share a prefix share its blocks
in the engine, so this is an upper bound; the blocks an engine keeps for future hits live
in the free part of the pool and are evicted first.

Glossary: ``isl`` prompt tokens, ``cached`` prompt tokens found in the cache, ``hit_rate``
share of prompt tokens found in the cache, ``replicas`` engine instances behind a router.

References
----------
.. [1] Kwon et al., "Efficient Memory Management for Large Language Model Serving with
       PagedAttention", SOSP 2023, sec. 4.4 (shared prefix blocks).
.. [2] Zheng et al., "SGLang: Efficient Execution of Structured Language Model Programs",
       2024, sec. 3 (RadixAttention; cache-aware scheduling).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, replace

import numpy as np

from ..core.graph import Step
from ..core.ops import ArrayLike
from ..checks import from_fields
from ..errors import SpecError, did_you_mean
from .step import ResolvedDeployment, StepResult, run_step

_NUMBER = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?%?$")
_ROUTING = {"aware": True, "random": False}
_PREFIX = {"first": True, "later": False}


@dataclass(frozen=True)
class PrefixCache:
    """What a prefix cache finds for each prompt.

    Give either ``cached_tokens`` or ``hit_rate``.

    Parameters
    ----------
    cached_tokens : float, optional [token]
        Length of a stable prefix (system prompt, few-shot examples, a shared document)
        that every prompt starts with and that the cache holds.
    hit_rate : float, optional [1]
        Share of prompt tokens found in the cache, as engines report it (vLLM's
        ``prefix_cache_hit_rate``), in [0, 1].
    stable_prefix_first : bool
        Whether the stable part comes first in the prompt. A prefix cache matches from the
        first token, so a prompt that starts with varying text (a timestamp, the user's
        question before the shared document) caches nothing.
    replicas : int
        Engine instances behind the router.
    cache_aware_routing : bool
        Whether the router sends a request to the replica that holds its prefix (SGLang
        router, llm-d). Otherwise (round robin, least loaded) a request lands there with
        probability ``1 / replicas``.
    """

    cached_tokens: float | None = None
    hit_rate: float | None = None
    stable_prefix_first: bool = True
    replicas: int = 1
    cache_aware_routing: bool = True

    def __post_init__(self) -> None:
        if (self.cached_tokens is None) == (self.hit_rate is None):
            raise SpecError("prefix cache: give exactly one of cached_tokens (a stable prefix length in tokens) "
                            "or hit_rate (the share of prompt tokens found in the cache, 0 to 1)")
        for name in ("cached_tokens", "hit_rate"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float, np.number))):
                raise SpecError(f"prefix cache: {name} must be a number, got {value!r}")
        if self.cached_tokens is not None and not (np.isfinite(self.cached_tokens) and self.cached_tokens >= 0):
            raise SpecError(f"prefix cache: cached_tokens must be a finite number >= 0, got {self.cached_tokens!r}")
        if self.hit_rate is not None and not 0.0 <= self.hit_rate <= 1.0:
            raise SpecError(f"prefix cache: hit_rate must be in [0, 1], got {self.hit_rate!r} "
                            "(write 50% or 0.5 for half of the prompt tokens)")
        if isinstance(self.replicas, bool) or not isinstance(self.replicas, (int, np.integer)) or self.replicas < 1:
            raise SpecError(f"prefix cache: replicas must be an integer >= 1, got {self.replicas!r}")

    @property
    def routing_hit_probability(self) -> float:
        """Chance that a request reaches the replica holding its prefix [1].

        Notes
        -----
        Assumes the prefix lives on one replica (the one that served it first, as long
        as the prefix is rare enough or the cache small enough not to be copied onto
        every replica): cache-aware routing always finds it, routing that ignores the
        cache finds it with probability ``1 / replicas``. A prefix hot enough to be
        cached on every replica behaves as ``cache_aware_routing=True``.
        """
        return 1.0 if self.cache_aware_routing else 1.0 / self.replicas

    def over_ranks(self, ranks: int) -> PrefixCache:
        """This cache behind a deployment of ``ranks`` data-parallel ranks (``dp``, and attention
        DP's ranks), each with a cache of its own: routing that ignores the cache spreads
        requests over ``replicas x ranks`` caches; cache-aware routing is unchanged."""
        return self if self.cache_aware_routing or ranks == 1 else replace(self, replicas=self.replicas * ranks)

    @classmethod
    def optional(cls, value: object) -> PrefixCache | None:
        """:meth:`of`, or None for None (no prefix cache)."""
        return None if value is None else cls.of(value)

    @classmethod
    def of(cls, value: object) -> PrefixCache:
        """From itself, a hit rate, its text (``"tokens=1500,replicas=4"``) or a mapping of its
        fields (``{"cached_tokens": 1500}``).

        >>> PrefixCache.of({"hit_rate": 0.5}) == PrefixCache.of(0.5) == PrefixCache.parse("50%")
        True
        """
        if isinstance(value, cls):
            return value
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return cls(hit_rate=float(value))
        if isinstance(value, str):
            return cls.parse(value)
        if isinstance(value, Mapping):
            return from_fields(cls, value, "prefix_cache")
        raise SpecError(f"prefix_cache must be a hit rate, a text like 'tokens=1500', a mapping of its fields or a "
                        f"PrefixCache, got {value!r:.60}")

    @classmethod
    def parse(cls, text: str) -> PrefixCache:
        """Read a command-line value.

        Grammar (comma-separated, no spaces needed)::

            SPEC    := AMOUNT ("," OPTION)*
            AMOUNT  := RATE | "hit=" RATE | "tokens=" NUMBER
            RATE    := a number in [0, 1], or a percentage such as 50%
            OPTION  := "replicas=" INTEGER | "routing=" ("aware" | "random")
                     | "prefix=" ("first" | "later")

        Examples
        --------
        >>> PrefixCache.parse("0.5")
        PrefixCache(cached_tokens=None, hit_rate=0.5, stable_prefix_first=True, replicas=1, cache_aware_routing=True)
        >>> PrefixCache.parse("tokens=1500,replicas=4,routing=random").routing_hit_probability
        0.25
        """
        if not isinstance(text, str) or not text.strip():
            raise SpecError(f"prefix cache: expected a hit rate such as '0.5' or a prefix such as 'tokens=1500', "
                            f"got {text!r}")
        items = [item.strip() for item in text.split(",")]
        kw: dict[str, object] = {}
        for n, item in enumerate(items):
            key, sep, value = item.partition("=")
            key, value = key.strip().lower(), value.strip().lower()
            if not sep and n == 0:
                key, value = "hit", key
            if key == "hit" and n == 0:
                kw["hit_rate"] = _rate(value, text)
            elif key == "tokens" and n == 0:
                kw["cached_tokens"] = _number(value, "tokens", text)
            elif key == "replicas" and n > 0:
                count = _number(value, "replicas", text)
                if count != int(count):
                    raise SpecError(f"prefix cache {text!r}: replicas must be a whole number, got {value!r}")
                kw["replicas"] = int(count)
            elif key == "routing" and n > 0:
                kw["cache_aware_routing"] = _choice(value, _ROUTING, "routing", text)
            elif key == "prefix" and n > 0:
                kw["stable_prefix_first"] = _choice(value, _PREFIX, "prefix", text)
            else:
                where = "first item" if n == 0 else f"item {item!r}" + did_you_mean(key, ("replicas", "routing", "prefix"))
                raise SpecError(f"prefix cache {text!r}: unexpected {where}; start with a hit rate ('0.5', '50%', "
                                "'hit=0.5') or a prefix length ('tokens=1500'), then optional replicas=N, "
                                "routing=aware|random, prefix=first|later")
        return cls(**kw)  # type: ignore[arg-type]


def _number(value: str, what: str, text: str) -> float:
    if not _NUMBER.match(value) or value.endswith("%"):
        raise SpecError(f"prefix cache {text!r}: {what} must be a number, got {value!r}")
    return float(value)


def _rate(value: str, text: str) -> float:
    if not _NUMBER.match(value):
        raise SpecError(f"prefix cache {text!r}: the hit rate must be a number in [0, 1] or a percentage, got "
                        f"{value!r}; for a prefix length write tokens=N")
    rate = float(value[:-1]) / 100.0 if value.endswith("%") else float(value)
    if not 0.0 <= rate <= 1.0:
        raise SpecError(f"prefix cache {text!r}: the hit rate {value} is outside [0, 1]; for a prefix length "
                        f"write tokens={value}")
    return rate


def _choice(value: str, allowed: dict[str, bool], what: str, text: str) -> bool:
    if value not in allowed:
        raise SpecError(f"prefix cache {text!r}: {what} must be one of {', '.join(allowed)}, got {value!r}"
                        f"{did_you_mean(value, allowed)}")
    return allowed[value]


def effective_cached_tokens(isl: ArrayLike, cache: PrefixCache, *, block_size: int = 1) -> np.ndarray:
    """Expected prompt tokens per request that the prefill skips [token].

    Parameters
    ----------
    isl : array [token]
        Prompt lengths.
    cache : PrefixCache
    block_size : int [token]
        KV page size of the engine: caches match whole pages, so a stable prefix of
        ``cached_tokens`` hits ``floor(cached_tokens / block_size)`` pages. A measured
        ``hit_rate`` already counts whole pages and is not rounded.

    Returns
    -------
    array [token]

    Notes
    -----
    ``p x min(c, isl - 1)`` with ``c = floor(cached_tokens / block) x block`` or
    ``c = hit_rate x isl``, ``p`` = :attr:`PrefixCache.routing_hit_probability`, and 0 when
    the stable part is not first. At least the last prompt token is recomputed: its
    logits give the first output token (vLLM caps a full hit the same way).

    Every request is given the expected cached length (mean field). GEMM work is linear
    in the cached length; attention pairs ``(isl^2 - c^2) / 2`` are concave in it, so the
    mean field slightly overestimates attention work when hits and misses mix.

    Examples
    --------
    >>> float(effective_cached_tokens(2048, PrefixCache(cached_tokens=1500), block_size=16))
    1488.0
    """
    isl = np.asarray(isl, float)
    if not cache.stable_prefix_first:
        return np.zeros_like(isl)
    if cache.cached_tokens is not None:
        per_hit = np.floor(cache.cached_tokens / block_size) * block_size + 0.0 * isl
    else:
        per_hit = cache.hit_rate * isl
    per_hit = np.clip(per_hit, 0.0, np.maximum(isl - 1.0, 0.0))
    return np.asarray(cache.routing_hit_probability * per_hit, float)


def prefill_with_cache(dep: ResolvedDeployment, batch: ArrayLike, isl: ArrayLike, cache: PrefixCache | None, *,
                       block_size: int = 1) -> StepResult:
    """The prefill of ``batch`` prompts of ``isl`` tokens, the cached prefix skipped.

    The step computes ``isl - cached`` new tokens per prompt; their attention reads the
    ``cached`` tokens' KV (see :class:`inferlab.core.ops.Attention`). ``cache=None`` or a
    hit rate of 0 is the plain prefill.
    """
    cached = 0.0 if cache is None else effective_cached_tokens(isl, cache, block_size=block_size)
    return run_step(dep, Step.prefill(batch, isl, cached))


def kv_resident_tokens(isl: ArrayLike, osl: ArrayLike, cache: PrefixCache | None = None) -> np.ndarray:
    """KV-cache tokens a sequence holds at its longest [token]: ``isl + osl``.

    The cached prefix is read by every decode step, so it stays resident: caching saves
    prefill compute, not memory. Memory planning takes this length unchanged.
    """
    return np.asarray(isl, float) + np.asarray(osl, float)
