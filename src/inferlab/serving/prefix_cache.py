"""The prefix cache of one replica's KV pool: computed prompt blocks kept for later requests.

Engines with automatic prefix caching (vLLM's block hashes, SGLang's radix tree) keep the
KV blocks of earlier sequences after they finish, find the longest run of a new prompt's
leading blocks already held, and skip their prefill. Here every cacheable token sequence
is a *stream* (a shared system prompt, a document, a conversation: see
:mod:`~inferlab.inputs.prefixes`); block ``j`` of a stream is the same content for every
request on it, so a stream's cached part is its first ``length`` blocks (the path of a
radix tree, or a chain of block hashes).

Blocks referenced by running requests are pinned. The others are free memory that still
holds content: admission counts them as free, and when the pool needs them they are
evicted, least recently used stream first and from its tail (the deepest blocks, as both
engines evict leaves first), so a popular prefix survives a stream of one-off prompts.

A router can ask :meth:`PrefixCache.cached_tokens` how much of a request's prefix this
replica holds.

References
----------
.. [1] Kwon et al., "Efficient Memory Management for Large Language Model Serving with
   PagedAttention", SOSP 2023, sec. 4.4 (shared prefix blocks).
.. [2] Zheng et al., "SGLang: Efficient Execution of Structured Language Model Programs",
   2024, sec. 3 (RadixAttention: LRU eviction of unreferenced leaves).
"""

from __future__ import annotations

from collections import OrderedDict

from ..inputs.prefixes import PrefixPlan


class _Stream:
    """Cached blocks of one stream and the pins of the running requests that read them."""

    __slots__ = ("length", "pins", "pinned")

    def __init__(self) -> None:
        self.length = 0  # leading blocks held
        self.pins: dict[int, int] = {}  # pinned prefix length [block] -> running requests
        self.pinned = 0  # longest pinned prefix [block]

    def pin(self, blocks: int) -> None:
        self.pins[blocks] = self.pins.get(blocks, 0) + 1
        self.pinned = max(self.pinned, blocks)

    def unpin(self, blocks: int) -> None:
        left = self.pins[blocks] - 1
        if left:
            self.pins[blocks] = left
        else:
            del self.pins[blocks]
            if blocks == self.pinned:
                self.pinned = max(self.pins, default=0)


class PrefixCache:
    """Prefix blocks held in one replica's KV pool.

    Parameters
    ----------
    block_size : int [token]
        Tokens per KV block; only whole blocks are cached and matched.

    Attributes
    ----------
    held_blocks : int [block]
        Blocks the cache holds, pinned or not.
    pinned_blocks : int [block]
        Blocks running requests read (never evicted).
    evicted_blocks : int [block]
        Blocks evicted so far.
    """

    def __init__(self, block_size: int):
        self.block_size = int(block_size)
        self._streams: OrderedDict[int, _Stream] = OrderedDict()  # least recently used first
        self.held_blocks = 0
        self.pinned_blocks = 0
        self.evicted_blocks = 0

    @property
    def evictable_blocks(self) -> int:
        """Held blocks no running request reads [block]: free memory with content."""
        return self.held_blocks - self.pinned_blocks

    def cached_tokens(self, stream: int, prefix_tokens: float) -> int:
        """Tokens of a ``prefix_tokens`` long prefix of ``stream`` held here (whole blocks) [token]."""
        s = self._streams.get(stream)
        if s is None:
            return 0
        return min(s.length, int(prefix_tokens // self.block_size)) * self.block_size

    def newly_pinned(self, stream: int, blocks: int) -> int:
        """Blocks that pinning ``blocks`` of ``stream`` would take from the free memory [block]."""
        s = self._streams.get(stream)
        return blocks - min(blocks, s.pinned) if s is not None else blocks

    def pin(self, stream: int, blocks: int) -> None:
        """A running request reads the first ``blocks`` of ``stream`` (held, or just computed
        by it: the cache holds them from now on)."""
        s = self._streams.get(stream)
        if s is None:
            s = self._streams[stream] = _Stream()
        else:
            self._streams.move_to_end(stream)
        if blocks > s.length:
            self.held_blocks += blocks - s.length
            s.length = blocks
        before = s.pinned
        s.pin(blocks)
        self.pinned_blocks += s.pinned - before

    def unpin(self, stream: int, blocks: int) -> None:
        """A running request no longer reads its ``blocks`` of ``stream`` (finished or preempted)."""
        s = self._streams[stream]
        self._streams.move_to_end(stream)
        before = s.pinned
        s.unpin(blocks)
        self.pinned_blocks += s.pinned - before

    def fit(self, free_blocks: float) -> None:
        """Evict unpinned blocks, least recently used stream first, until at most
        ``free_blocks`` of them are held."""
        excess = self.evictable_blocks - max(int(free_blocks), 0)
        if excess <= 0:
            return
        emptied = []
        for key, s in self._streams.items():
            drop = min(s.length - s.pinned, excess)
            if drop <= 0:
                continue
            s.length -= drop
            self.held_blocks -= drop
            self.evicted_blocks += drop
            excess -= drop
            if not s.length:
                emptied.append(key)
            if excess <= 0:
                break
        for key in emptied:
            del self._streams[key]


class PrefixReuse:
    """One simulated replica's use of its prefix cache: what each request finds, pins and leaves.

    Parameters
    ----------
    plan : PrefixPlan, optional
        The requests' streams and prefixes; None (or a plan without caching): no reuse.
    block_size : int [token]
    num_requests : int
        Requests known up front (``plan``'s); a fleet's replica adds its own with :meth:`add`.
    active : bool
        Without a plan: cache the prefixes of requests added later.

    Notes
    -----
    The simulator counts each running request's KV blocks whole; the blocks it shares
    through the cache are counted once, in :attr:`PrefixCache.pinned_blocks`, so the pool
    holds ``sum(request blocks) + shared_adjustment`` (:attr:`shared_adjustment`). A request
    finds at most ``prompt - 1`` tokens: the last one is computed to give the next token's
    logits (vLLM caps a full hit the same way).
    """

    def __init__(self, plan: PrefixPlan | None, block_size: int, num_requests: int, *, active: bool = False):
        self.active = (plan is not None and plan.cache) or (plan is None and active)
        self.block_size = int(block_size)
        self.cache = PrefixCache(block_size)
        self.found = [0.0] * num_requests  # tokens found at each request's first admission
        self._looked = [False] * num_requests
        self._pinned = [0] * num_requests
        self._shared = 0
        planned = self.active and plan is not None
        self._stream: list[int] = plan.stream.tolist() if planned else []
        self._prefix: list[float] = plan.prefix.tolist() if planned else []
        self._extends: list[float] = plan.extends.tolist() if planned else []
        # per request: whether it never pins a block (no cache, or no prefix and nothing it
        # leaves on its stream), so that :meth:`prefilled` and :meth:`released` do nothing
        self.plain: list[bool] = [not (p or e) for p, e in zip(self._prefix, self._extends)] if planned \
            else [True] * num_requests

    def add(self, stream: int, prefix: float, extends: float) -> None:
        """One more request (the next index) on ``stream``: ``prefix`` leading tokens a cache
        can hit, ``extends`` tokens of its sequence it leaves on the stream [token]."""
        prefix, extends = float(prefix), float(extends)
        self.found.append(0.0)
        self._looked.append(False)
        self._pinned.append(0)
        self._stream.append(int(stream))
        self._prefix.append(prefix)
        self._extends.append(extends)
        self.plain.append(not (self.active and (prefix or extends)))

    @property
    def shared_adjustment(self) -> int:
        """Blocks the pool holds beyond the running requests' own counts: the cache's
        pinned blocks once, less each request's count of them [block]."""
        return self.cache.pinned_blocks - self._shared

    def lookup(self, i: int, prompt: float) -> tuple[float, int, int]:
        """Tokens request ``i`` finds, blocks it would pin, and blocks of them already
        counted in the pool (pinned by another request)."""
        if not self.active:
            return 0.0, 0, 0
        if self._prefix[i] == 0.0:  # no prefix: what the lookup below finds without looking
            return min(0.0, prompt - 1.0), 0, 0
        stream = self._stream[i]
        blocks = self.cache.cached_tokens(stream, self._prefix[i]) // self.block_size
        found = min(float(blocks * self.block_size), prompt - 1.0)
        return found, blocks, blocks - self.cache.newly_pinned(stream, blocks)

    def admitted(self, i: int, found: float, blocks: int) -> None:
        """Request ``i`` runs, reading ``blocks`` of its stream."""
        if not self.active:
            return
        if not self._looked[i]:
            self._looked[i] = True
            self.found[i] = found
        self._repin(i, blocks)

    def prefilled(self, i: int, prompt: float) -> None:
        """Request ``i``'s prompt is computed: its blocks on the stream join the cache."""
        if self.active:
            self._repin(i, max(self._pinned[i], int(min(self._extends[i], prompt) // self.block_size)))

    def released(self, i: int, tokens: float | None) -> None:
        """Request ``i`` holds no KV any more: finished with ``tokens`` in its sequence
        (those on its stream stay cached) or preempted (``None``)."""
        if not self.active:
            return
        if tokens is not None:
            self._repin(i, max(self._pinned[i], int(min(self._extends[i], tokens) // self.block_size)))
        self._repin(i, 0)

    def fit(self, free_blocks: float) -> None:
        """Evict unpinned blocks beyond ``free_blocks`` (see :meth:`PrefixCache.fit`)."""
        if self.active:
            self.cache.fit(free_blocks)

    def _repin(self, i: int, blocks: int) -> None:
        old, stream = self._pinned[i], self._stream[i]
        if blocks == old:
            return
        if blocks:
            self.cache.pin(stream, blocks)
        if old:
            self.cache.unpin(stream, old)
        self._pinned[i] = blocks
        self._shared += blocks - old
