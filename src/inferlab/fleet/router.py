"""Where a request goes: the router's policies over the replicas that take traffic.

- ``round_robin``: the next replica in turn.
- ``random``: a uniformly random replica.
- ``least_outstanding``: fewest requests sent and not finished; ties in turn (NGINX's
  ``least_conn`` tries tied servers round-robin [3]_), so that an idle fleet does not send
  everything to its first replica.
- ``least_kv``: smallest share of the KV pool in use or claimed by the requests it was sent and
  has not yet admitted: a router that counts its own sends, as Dynamo's KV router does, so
  that requests arriving between two iterations do not all go to the replica that was least
  loaded at the last one (ties in turn).
- ``cache_aware``: the replica whose own prefix cache holds most of the request's prefix,
  among those whose outstanding requests exceed the least loaded one's by at most
  ``balance`` (otherwise the least loaded): locality bounded by load, as SGLang's router
  and llm-d's prefix-aware scorer do.

A replica answers for its own cache (:meth:`~inferlab.serving.prefix_cache.PrefixCache.cached_tokens`),
so the prefix hits of cache-unaware routing (about ``1/N`` of the single-replica rate for
two-turn conversations over ``N`` replicas) emerge from where requests land.

References
----------
.. [1] SGLang, "SGLang Model Gateway (router)": cache-aware load balancing with an
   approximate radix tree per worker, falling back to the shortest queue when load is
   imbalanced. https://docs.sglang.ai/advanced_features/router.html
.. [2] llm-d, "Inference scheduler": prefix-cache-aware and load-aware scorers.
   https://llm-d.ai/docs/architecture
.. [3] NGINX, "ngx_http_upstream_module: least_conn": the server with the fewest active
   connections; if there are several, they are tried in turn (weighted round-robin).
   https://nginx.org/en/docs/http/ngx_http_upstream_module.html#least_conn
"""

from __future__ import annotations

import difflib
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..checks import integer
from ..errors import SpecError

POLICIES = ("round_robin", "random", "least_outstanding", "least_kv", "cache_aware")
#: ``cache_aware``: outstanding requests a replica may carry beyond the least loaded one and
#: still be chosen for its cache. An assumption in the range of SGLang's router defaults
#: (``balance_abs_threshold`` 64 with a relative bound); small here so that load wins early.
DEFAULT_BALANCE = 8


@dataclass(frozen=True)
class RouterConfig:
    """A routing policy.

    Parameters
    ----------
    policy : str
        One of :data:`POLICIES`.
    balance : int [request]
        ``cache_aware``: the load slack within which cache locality decides.
    """

    policy: str = "least_outstanding"
    balance: int = DEFAULT_BALANCE

    def __post_init__(self) -> None:
        object.__setattr__(self, "balance", integer("router.balance", self.balance, minimum=0))
        if not isinstance(self.policy, str) or self.policy not in POLICIES:
            close = difflib.get_close_matches(str(self.policy), POLICIES, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise SpecError(f"router policy {self.policy!r} is unknown{hint} (allowed: {', '.join(POLICIES)})")
        if self.balance < 0:
            raise SpecError(f"router balance must be >= 0 requests, got {self.balance}")


class Router:
    """A policy with its state (the round-robin turn, the random stream)."""

    def __init__(self, config: RouterConfig, seed: int = 0) -> None:
        self.config = config
        self._turn = 0
        self._rng = np.random.default_rng([seed, 0x207E])
        self._choose = self.choose = getattr(self, "_" + config.policy)  # the policy itself: one call less

    def choose(self, engines: list[Any], loads: list[int], stream: int, prefix: float) -> int:
        """Index into ``engines`` (non-empty; ``loads``: each one's outstanding requests) for a
        request on ``stream`` with ``prefix`` tokens on it."""
        return self._choose(engines, loads, stream, prefix)

    def _round_robin(self, engines: list[Any], loads: list[int], stream: int, prefix: float) -> int:
        self._turn = (self._turn + 1) % len(engines)
        return self._turn

    def _random(self, engines: list[Any], loads: list[int], stream: int, prefix: float) -> int:
        return int(self._rng.integers(len(engines)))

    def _least(self, values: list) -> int:
        """The index of the smallest of ``values``; among equal ones, the first from the turn
        after the last pick, cyclically (round-robin over ties)."""
        start = self._turn % len(values)
        turned = values[start:] + values[:start]
        j = (start + turned.index(min(turned))) % len(values)
        self._turn = j + 1
        return j

    def _least_outstanding(self, engines: list[Any], loads: list[int], stream: int, prefix: float) -> int:
        return self._least(loads)

    def _least_kv(self, engines: list[Any], loads: list[int], stream: int, prefix: float) -> int:
        return self._least([e.kv_claimed + 1e-9 * n for e, n in zip(engines, loads)])

    def _cache_aware(self, engines: list[Any], loads: list[int], stream: int, prefix: float) -> int:
        if stream < 0 or prefix <= 0:
            return self._least(loads)
        limit = min(loads) + self.config.balance
        # most of the prefix cached, then the least loaded; ties in turn (as _least)
        keys = [(e.reuse.cache.cached_tokens(stream, prefix), -n) if n <= limit else (-1.0, -math.inf)
                for e, n in zip(engines, loads)]
        best = max(keys)
        return self._least([0 if k == best else 1 for k in keys])
