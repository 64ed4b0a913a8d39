"""Requests entering and leaving one engine's running batch: admission (first come first
served while a slot and the prompt's KV blocks are free), queue timeouts, finishing, and
preemption under memory pressure; methods of :class:`~.engine.Engine`, apart so that each
module holds one concept."""

from __future__ import annotations

import math
from math import isnan
from operator import ge
from typing import Any

import numpy as np

from .batch import blocks_held
from .iteration import SMALL_BATCH


class Admission:
    """Admission, timeouts, finishing and preemption of :class:`~.engine.Engine`."""

    run: Any
    reuse: Any
    sched: Any
    state_blocks: int  # KV pages a running request's linear-attention state takes (a hybrid model)
    _kv_state: tuple | None = None  # the engine state kv_claimed last read, and its share
    _kv_share: float = 0.0

    def blocks_used(self) -> float:
        """KV blocks the running requests hold [block]."""
        run = self.run
        if run.lists or (self.whole and run.k <= SMALL_BATCH):  # plain floats, exact (see .iteration)
            done, gen, base, _, osl = run.rows()
            block = self.block
            if self.sched.reserve_output:
                held = sum([math.ceil((self.isl_l[i] + o) / block) for i, o in zip(run.ids(), osl)])
            else:
                held = blocks_held(done, gen, base, block)
            return float(held) + self.reuse.shared_adjustment + run.k * self.state_blocks
        tokens = self.isl[run.idx] + run.osl if self.sched.reserve_output else np.maximum(run.cached, 1.0)
        if self.lookahead:
            tokens = tokens + self.lookahead
        return float(np.add.reduce(np.ceil(tokens / self.block))) + self.reuse.shared_adjustment + \
            run.k * self.state_blocks

    def _claim(self, i: int) -> float:
        """KV tokens request ``i`` will hold once admitted: its prompt (with what it had generated,
        if preempted), its whole output too where the engine reserves it."""
        if self.sched.reserve_output:
            return self.isl_l[i] + self.osl_l[i] + self.lookahead
        return float(self.prompt[i]) + self.lookahead

    @property
    def kv_claimed(self) -> float:
        """Share of the KV pool held by the running requests, plus what the requests sent here and
        not yet admitted will hold [-]: what a router counting its own sends reads (a running sum,
        kept by sending, admission, timeouts and preemption). An admitted prompt still being
        prefilled counts whole (the engine allocated its blocks at admission; the cache holds
        only what is computed), so a replica busy prefilling does not read as empty."""
        run = self.run
        # it changes only when a request is sent, taken in or dropped, or an iteration applied: read once per state
        state = (self.now, len(self.order), self.pos, len(self.waiting), run.k, run.prefilling, self.claimed)
        if self._kv_state == state:
            return self._kv_share
        if self.pos >= len(self.order) and not self.waiting:
            self.claimed = 0.0  # nothing queued: the sum starts afresh, without rounding drift
        pending = 0.0
        if run.prefilling and not self.sched.reserve_output:  # (reserved outputs: counted whole already)
            pending = float(sum([max(p - d, 0.0) for p, d in zip(run.prompt, run.done)])) if run.lists else \
                float(np.maximum(run.prompt - run.done, 0.0).sum())
        share = (self.blocks_used() + (max(self.claimed, 0.0) + pending) / self.block) / max(self.capacity_blocks, 1)
        self._kv_state, self._kv_share = state, share
        return share

    def _blocks_bound(self) -> float:
        """An upper bound on :meth:`blocks_used` of a :class:`~.batch.SmallBatch` without
        reserved outputs, from three sums instead of a count per request: ``c`` tokens take at
        most ``(c + 1) / block + 1`` blocks, and one block more covers rounding [block]."""
        run = self.run
        k = run.k
        return (run.held_tokens() + k) / self.block + k * (1 + self.state_blocks) + 1 + self.reuse.shared_adjustment

    def _blocks_counted(self, k: int, shared: int) -> float:
        """:meth:`blocks_used` of a :class:`~.batch.SmallBatch` without reserved outputs, over
        its first ``k`` slots, with ``shared`` for the cache's adjustment [block]."""
        run = self.run
        return float(blocks_held(run.done[:k], run.gen[:k], run.base[:k], self.block)) + shared + k * self.state_blocks

    def _intake(self) -> None:
        order, waiting, now = self.order, self.waiting, self.now
        seen = self.cutoff if self.overlap and self.run.k else now  # what reached the scheduler in time
        if not waiting and (self.pos >= len(order) or self.visible[order[self.pos]] > seen + 1e-12):
            return  # nobody to admit
        visible, run, reuse = self.visible, self.run, self.reuse
        while self.pos < len(order) and visible[order[self.pos]] <= seen + 1e-12:
            waiting.append(order[self.pos])
            self.pos += 1
        if not waiting:  # nothing to admit
            return
        if self.timeout != math.inf:
            self._expire()
        max_seqs, prompt = self.sched.max_num_seqs, self.prompt
        # admission: FIFO while a slot and the prompt's KV blocks are free
        balanced = (self.ranks == 1 or not run.k or self.held_iters >= self.sched.balance_timeout_iters
                    or len(waiting) >= min(self.ranks, max_seqs - run.k))  # an idle engine spins its timeout away
        if waiting and not self.hold and run.k < max_seqs and balanced:
            self.held_iters = 0
            reserve, block, lookahead = self.sched.reserve_output, self.block, self.lookahead
            # a small batch's blocks are counted only once an upper bound would stop admission
            k0, shared = run.k, self.reuse.shared_adjustment
            bound = run.lists and not reserve
            used = self._blocks_bound() if bound else self.blocks_used()
            needs, taken = 0, 0.0  # blocks of the requests admitted here, and the KV tokens they had claimed
            w, first_sched, plain = 0, self.first_sched, reuse.plain  # admitted: waiting[:w] (the views follow once, after)
            while w < len(waiting) and run.k < max_seqs:
                i = waiting[w]
                p = float(prompt[i])  # (a plain float computes faster than numpy's scalar, the same values)
                # a request that never pins finds nothing (its prompt holds a token or more): no lookup
                found, pin, counted = (0.0, 0, 0) if (quiet := plain[i] and p >= 1.0) else reuse.lookup(i, p)
                claim = (self.isl_l[i] + self.osl_l[i] if reserve else p) + lookahead  # as _claim(i)
                need = math.ceil(claim / block) - counted + self.state_blocks
                if used + need > self.capacity_blocks:
                    if not bound:
                        break
                    bound, used = False, self._blocks_counted(k0, shared) + needs
                    if used + need > self.capacity_blocks:
                        break
                w += 1
                taken += claim
                run.add(i, self.generated[i], p, self.osl_l[i], p if self.prefilled and not self.recompute[i] else found,
                        views=False)
                if not quiet:
                    reuse.admitted(i, found, pin)
                used += need
                needs += need
                if isnan(first_sched[i]):  # first admission
                    first_sched[i] = now
            del waiting[:w]
            self.claimed -= taken
            run._views()
            if reuse.cache.evictable_blocks:
                reuse.fit(self.capacity_blocks - (self._blocks_counted(k0, shared) + needs if bound else used))

    def until_timeout(self, t0: float) -> int:
        """Decode steps of at least ``t0`` [s] before a request waiting here (or on its way)
        reaches its timeout: a decode stretch stops there, so that the drop comes when it is due
        (it had come at the stretch's end, up to the running requests' whole decode later)."""
        if self.timeout == math.inf:
            return 1 << 62
        credit, visible, started = self.credit, self.visible, self.started
        if credit:  # a router's queue held some: any may be due first (few wait at a replica then)
            first = min((visible[i] - credit.get(i, 0.0) for i in self.waiting if not started[i]), default=math.inf)
        else:  # in arrival order behind the preempted (who had begun): the first not begun is due first
            first = next((visible[i] for i in self.waiting if not started[i]), math.inf)
        if self.pos < len(self.order):  # on its way: the next to arrive
            first = min(first, visible[self.order[self.pos]] - credit.get(self.order[self.pos], 0.0))
        return max(1, math.ceil((first + self.timeout - self.now) / t0)) if first != math.inf else 1 << 62

    def _expire(self) -> None:
        """Drop the requests whose prefill has not begun within the timeout of reaching the
        scheduler (less what a router's queue held them: :meth:`~.engine.Engine.submit`'s
        ``waited``): waiting, or admitted behind other prompts' chunks."""
        limit, credit = self.now - self.timeout, self.credit  # (credit: what a router's queue already held it)
        keep = []
        for i in self.waiting:
            if self.visible[i] - credit.get(i, 0.0) <= limit and not self.started[i]:
                self.timed_out.append(i)
                self.claimed -= self._claim(i)
            else:
                keep.append(i)
        if len(keep) < len(self.waiting):
            self.outstanding, self.waiting[:] = self.outstanding - len(self.waiting) + len(keep), keep
        run = self.run
        if run.prefilling and run.lists:
            late = [not self.started[i] and self.arrivals[i] + self.delay - credit.get(i, 0.0) <= limit
                    for i in run.idx]
            if any(late):
                for i, gone in zip(run.idx, late):
                    if gone:
                        self.timed_out.append(i)
                        self.reuse.released(i, None)
                        self.outstanding -= 1
                run.keep([not gone for gone in late])
                run.prefilling -= late.count(True)
        elif run.prefilling:
            ids = run.idx
            held = np.array([credit.get(i, 0.0) for i in ids.tolist()]) if credit else 0.0
            late = ~self.started[ids] & (self.arrivals[ids] + self.delay - held <= limit)
            if late.any():
                for i in ids[late].tolist():
                    self.timed_out.append(i)
                    self.reuse.released(i, None)
                    self.outstanding -= 1
                run.keep(~late)
                run.prefilling -= int(np.count_nonzero(late))

    def _finish(self, sure: bool = False) -> tuple[list[int], float | None]:
        """Remove the requests that reached their output length; the removed ones, and the KV
        tokens the others hold when it is known (a small whole-token batch, plain floats);
        ``sure``: the caller knows that one does (a stretch run to its shortest request's end)."""
        run = self.run
        if run.lists or (self.whole and run.k <= SMALL_BATCH):
            done_, gen, base, _, osl = run.rows()
            if not sure and not any(map(ge, gen, osl)):  # (the common case, without a Python loop)
                return [], None
            idx, ends, done, held = run.ids(), [], [], 0.0  # the slots that finish, their requests; the others' KV
            for j, (d, g, b, o) in enumerate(zip(done_, gen, base, osl)):  # (one loop: faster than three over a few)
                if g >= o:
                    ends.append(j)
                    done.append(idx[j])
                else:
                    held += d + g - b
            self._finished(done)
            if len(ends) == 1:
                run.drop(ends[0])
            else:
                run.keep([g < o for g, o in zip(gen, osl)] if run.lists else np.asarray(gen) < np.asarray(osl))
            return done, held
        finished = run.gen >= run.osl
        if not np.logical_or.reduce(finished):
            return [], None
        done = run.idx[finished].tolist()
        self._finished(done)
        run.keep(~finished)
        return done, None

    def _finished(self, done: list[int]) -> None:
        self.outstanding -= len(done)
        reuse, plain, finish, now = self.reuse, self.reuse.plain, self.finish, self.now
        for i in done:
            finish[i] = now
            if not plain[i]:
                reuse.released(i, self.isl_l[i] + self.osl_l[i])
        self.hold = False

    def _preempt(self, total: float | None = None) -> None:
        """Memory pressure: preempt the newest requests (recomputed later) until the KV fits
        (checked exactly only when a quick upper bound on the blocks in use exceeds the pool);
        ``total``: the KV tokens the running requests hold, when the caller knows it."""
        run, reuse, cap, reserve = self.run, self.reuse, self.capacity_blocks, self.sched.reserve_output
        cache = reuse.cache
        spare = cache.held_blocks - cache.pinned_blocks  # evictable_blocks, read often here
        bound = 0.0
        if run.k and (spare or not reserve):
            held = float(np.add.reduce(run.cached)) if total is None else total
            bound = (held + run.k * self.lookahead) / self.block + run.k * (1 + self.state_blocks) + \
                (cache.pinned_blocks - reuse._shared)
        if not reserve and run.k > 1 and bound > cap:
            while run.k > 1 and self.blocks_used() > cap:
                i = int(run.idx[-1])
                self.generated[i] = run.gen[-1]
                if self.generated[i] >= 1.0 and self.record:  # its last token came as the iteration just run ended
                    self.resumed[i] = self.now
                self.prompt[i] = self.isl_l[i] + self.generated[i]
                run.drop_last()
                reuse.released(i, None)
                self.recompute[i] = True
                self.waiting.insert(0, i)
                self.claimed += self._claim(i)
                self.preemptions += 1
                self.hold = True
            spare, bound = reuse.cache.evictable_blocks, math.inf
        if spare and bound + spare > cap:  # cached blocks nobody reads give way
            reuse.fit(cap - self.blocks_used())
