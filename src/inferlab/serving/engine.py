"""One replica of an in-flight-batching engine as a steppable state machine.

Event-driven: an iteration is timed by :class:`~.stepmodel.StepModel` from the mix it
runs (decode tokens, prefill chunks and their contexts). Stretches of decode-only
iterations between events (an arrival that can be admitted, a request finishing, the KV
pool filling up) are advanced in one go: the step time grows linearly with the contexts,
so ``k`` steps take ``k t0 + s k (k - 1) / 2``. There is no per-token Python work.

:func:`~.simulator.simulate` drives one :class:`Engine` over a known set of requests; a
fleet (:mod:`inferlab.fleet`) drives many on one clock, handing each its requests as a
router places them (:meth:`Engine.submit`), planning an iteration (:meth:`Engine.prepare`)
and applying it (:meth:`Engine.advance`) in time order.
"""

from __future__ import annotations

import bisect
import math
from typing import Any

import numpy as np

from ..engines.scheduler import SchedulerConfig
from ..inputs.prefixes import PrefixPlan
from .batch import PlainDecoding, RunningBatch, cut_stretch, request_columns, stretch_limits
from .prefix_cache import PrefixReuse

__all__ = ["Engine", "PlainDecoding"]

class Engine:
    """One replica: its waiting queue, running batch, KV pool and prefix cache, on its own clock.

    Parameters
    ----------
    model : StepModel or SpeculativeStepModel
        Times one iteration from its mix.
    sched : SchedulerConfig
    kv_capacity_tokens : float [token]
        KV-cache pool of the replica (after weights, workspace, reserve).
    capacity : int
        Requests to make room for up front (more grow the arrays).
    prefilled, decoding, prefixes :
        As :func:`~.simulator.simulate`.
    prefix_cache : bool
        Without ``prefixes``: keep and reuse the prefix blocks of submitted requests.
    queue_timeout_s : float [s]
        A request still waiting this long after it reached the scheduler is dropped
        (:attr:`timed_out`); ``inf``: never.

    Attributes
    ----------
    now : float [s]
        The engine's clock: the end of the last iteration applied.
    busy_s : float [s]
        Time spent running iterations.
    tokens : float [token]
        Tokens processed (prompt tokens prefilled and tokens decoded).
    outstanding : int
        Requests sent here and not finished (on their way, waiting or running).
    """

    def __init__(self, model: Any, sched: SchedulerConfig, *, kv_capacity_tokens: float, capacity: int = 0,
                 prefilled: bool = False, decoding: Any = None, prefixes: PrefixPlan | None = None,
                 prefix_cache: bool = False, queue_timeout_s: float = math.inf) -> None:
        self.model, self.sched = model, sched
        self.block = sched.kv_block_size
        self.capacity_blocks = math.floor(kv_capacity_tokens / self.block)
        self.decoding = decoding or PlainDecoding
        self.lookahead = self.decoding.lookahead
        self.prefilled = prefilled
        self.delay = float(getattr(model, "request_overhead_s", 0.0))
        self.n = 0
        self._cols = request_columns(max(capacity, 1))
        self._bind()
        self.visible: list[float] = []  # when each request reaches the scheduler
        self.isl_l, self.osl_l = [], []  # lengths as floats
        self.order: list[int] = []  # requests sent, by when they reach the scheduler
        self.pos = 0  # next entry of ``order`` to arrive
        self.outstanding = 0  # requests sent here and not finished (on their way, waiting or running)
        self.waiting: list[int] = []
        self.run = RunningBatch(min(max(capacity, 1), sched.max_num_seqs))
        self.reuse = PrefixReuse(prefixes, self.block, 0, active=prefix_cache)
        self.now, self.busy_s, self.preemptions, self.tokens = 0.0, 0.0, 0, 0.0
        self.hold = False  # after a preemption, admit nothing until a request finishes and frees memory
        self.q_times, self.q_depth, self.itl_v, self.itl_w = [0.0], [0], [], []
        self.timeout, self.timed_out = float(queue_timeout_s), []
        self._plan, self.plan_end = None, math.inf  # the planned iteration, and when it ends
        # attention-DP balancing: prompts wait until every rank has one, or for the timeout
        groups = int(getattr(model, "groups", 1))  # attention-DP ranks of the deployment the model times
        self.ranks = groups if sched.balance_timeout_iters and not prefilled else 1
        self.held_iters = 0

    # -- requests -------------------------------------------------------------------------
    def _bind(self) -> None:
        c = self._cols
        self.arrivals, self.isl, self.osl, self.prompt = c["arrivals"], c["isl"], c["osl"], c["prompt"]
        self.generated, self.first_sched, self.first_tok = c["generated"], c["first_sched"], c["first_tok"]
        self.finish, self.recompute, self.started = c["finish"], c["recompute"], c["started"]

    def _grow(self, n: int) -> None:
        if n > len(self.isl):
            self._cols = request_columns(max(n, 2 * len(self.isl)), self._cols)
            self._bind()

    def load(self, arrivals: np.ndarray, isl: np.ndarray, osl: np.ndarray) -> None:
        """Take a whole workload at once (``arrivals`` NaN: sent later by :meth:`send`)."""
        n = len(isl)
        self._grow(n)
        self.n = n
        self.arrivals[:n], self.isl[:n], self.osl[:n], self.prompt[:n] = arrivals, isl, osl, isl
        self.isl_l, self.osl_l = np.asarray(isl, float).tolist(), np.asarray(osl, float).tolist()
        self.visible = (np.asarray(arrivals, float) + self.delay).tolist()
        sent = int(np.sum(~np.isnan(arrivals)))
        self.order = list(np.argsort(np.where(np.isnan(arrivals), np.inf, arrivals), kind="stable")[:sent])
        self.outstanding = len(self.order) - self.pos + len(self.waiting) + self.run.k
        for _ in range(n):
            self.reuse.found.append(0.0)
            self.reuse._looked.append(False)
            self.reuse._pinned.append(0)

    def submit(self, arrival: float, isl: float, osl: float, *, stream: int = -1, prefix: float = 0.0,
               extends: float = 0.0) -> int:
        """A request sent at ``arrival`` [s] (not before the last applied iteration's start); its index."""
        i = self.n
        self._grow(i + 1)
        self.n = i + 1
        self.isl[i], self.osl[i], self.prompt[i] = isl, osl, isl
        self.isl_l.append(float(isl))
        self.osl_l.append(float(osl))
        self.visible.append(math.nan)
        if self.reuse.active:
            self.reuse.add(stream, prefix, extends)
        else:
            self.reuse.found.append(0.0)
        self.send(i, arrival)
        return i

    def send(self, i: int, arrival: float) -> None:
        """Request ``i`` (loaded, not yet sent) is sent at ``arrival`` [s]."""
        self.arrivals[i] = arrival
        self.visible[i] = arrival + self.delay
        bisect.insort(self.order, i, lo=self.pos, key=self.visible.__getitem__)
        self.outstanding += 1
        plan = self._plan  # a decode stretch must stop for it (behind an earlier arrival: it does)
        if plan is not None and plan[0] == "decode" and self.visible[i] < self.plan_end and self.order[self.pos] == i:
            if self.ranks > 1 or self.decoding is not PlainDecoding:
                self._plan_decode(*plan[1:3])
            elif not self.waiting and self.run.k < self.sched.max_num_seqs:  # else no arrival limits it
                if (cut := cut_stretch(plan, self.visible[i] - self.now)) is not None:
                    self._plan, self.plan_end = cut, self.now + cut[5]

    # -- state a router or autoscaler reads -----------------------------------------------
    @property
    def queued(self) -> int:
        """Requests sent here and not yet past their prompt (on their way, waiting, or admitted to prefill)."""
        return len(self.order) - self.pos + len(self.waiting) + self.run.prefilling

    @property
    def kv_used(self) -> float:
        """Share of the KV pool held by running requests [-]."""
        return self.blocks_used() / max(self.capacity_blocks, 1)

    @property
    def busy(self) -> bool:
        """Whether any request is on its way, waiting or running."""
        return self.outstanding > 0

    @property
    def ready_s(self) -> float:
        """When this engine next has something to do [s] (``inf``: idle)."""
        if self._plan is not None:
            return self.plan_end
        if self.run.k or self.waiting:
            return self.now
        return max(self.now, self.visible[self.order[self.pos]]) if self.pos < len(self.order) else math.inf

    @property
    def planned(self) -> bool:
        return self._plan is not None

    def blocks_used(self) -> float:
        run = self.run
        tokens = self.isl[run.idx] + run.osl if self.sched.reserve_output else np.maximum(run.cached, 1.0)
        if self.lookahead:
            tokens = tokens + self.lookahead
        return float(np.add.reduce(np.ceil(tokens / self.block))) + self.reuse.shared_adjustment

    # -- one iteration --------------------------------------------------------------------
    def prepare(self) -> bool:
        """Take in the requests that reached the scheduler, admit what fits, and plan the next
        iteration (jumping an idle clock to the next arrival); False when nothing is left."""
        while True:
            self._intake()
            if self.run.k:
                break
            if self.pos < len(self.order):
                self.now = max(self.now, self.visible[self.order[self.pos]])
                continue
            return False
        if self.run.prefilling:
            self._plan_prefill()
        else:
            t0, t1 = self.model.time_decode(cached := self.run.cached)
            self._plan_decode(t0, t1, cached)
        return True

    def _intake(self) -> None:
        order, visible, waiting, run, reuse, now = self.order, self.visible, self.waiting, self.run, self.reuse, self.now
        while self.pos < len(order) and visible[order[self.pos]] <= now + 1e-12:
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
            used = self.blocks_used()
            reserve, block, lookahead = self.sched.reserve_output, self.block, self.lookahead
            w, first_sched = 0, self.first_sched  # admitted: waiting[:w] (the views follow once, after)
            while w < len(waiting) and run.k < max_seqs:
                i = waiting[w]
                found, pin, counted = reuse.lookup(i, p := prompt[i])
                need = math.ceil(((self.isl_l[i] + self.osl_l[i] if reserve else p) + lookahead) / block) - counted
                if used + need > self.capacity_blocks:
                    break
                w += 1
                run.add(i, self.generated[i], p, self.osl_l[i], p if self.prefilled and not self.recompute[i] else found,
                        views=False)
                reuse.admitted(i, found, pin)
                used += need
                if first_sched[i] != first_sched[i]:  # NaN: first admission
                    first_sched[i] = now
            del waiting[:w]
            run._views()
            if reuse.cache.evictable_blocks:
                reuse.fit(self.capacity_blocks - used)

    def _expire(self) -> None:
        """Drop the requests whose prefill has not begun within the timeout of reaching the
        scheduler: waiting, or admitted behind other prompts' chunks."""
        limit = self.now - self.timeout
        keep = []
        for i in self.waiting:
            if self.visible[i] <= limit and not self.started[i]:
                self.timed_out.append(i)
            else:
                keep.append(i)
        if len(keep) < len(self.waiting):
            self.outstanding, self.waiting[:] = self.outstanding - len(self.waiting) + len(keep), keep
        run = self.run
        if run.prefilling:
            ids = run.idx
            late = ~self.started[ids] & (self.arrivals[ids] + self.delay <= limit)
            if late.any():
                for i in ids[late].tolist():
                    self.timed_out.append(i)
                    self.reuse.released(i, None)
                    self.outstanding -= 1
                run.keep(~late)
                run.prefilling -= int(np.count_nonzero(late))

    def _plan_prefill(self) -> None:
        run, sched = self.run, self.sched
        chunked = sched.chunked_prefill
        budget_max = sched.max_num_batched_tokens
        prefilling = run.done < run.prompt
        decoding_mask = ~prefilling
        n_dec = int(np.count_nonzero(decoding_mask))
        # prefill chunks, first come first served, within the token budget
        budget = budget_max - (n_dec if chunked else 0)
        chunk = np.zeros(run.k)
        left = run.prompt - run.done
        for j in prefilling.nonzero()[0].tolist():
            if budget <= 0:
                break
            lj = float(left[j])
            if chunked:
                take = min(lj, budget)
            elif lj > budget and budget < budget_max:
                break
            else:
                take = lj  # without chunking a prompt is prefilled whole
            chunk[j] = take
            budget -= take
        runs_prefill = chunk > 0
        if not chunked:
            decoding_mask[:] = False  # a whole-prompt prefill iteration runs no decodes
            n_dec = 0
        finishing_prefill = runs_prefill & (run.done + chunk >= run.prompt)
        n_fin = int(np.count_nonzero(finishing_prefill))
        dctx = run.cached[decoding_mask] if n_dec else np.zeros(0)
        elapsed = self.model.time(decode_context=dctx, prefill_context=run.done[runs_prefill],
                                  prefill_tokens=chunk[runs_prefill], logits=float(n_dec + n_fin))
        self._plan = ("prefill", elapsed, chunk, decoding_mask, n_dec, finishing_prefill, n_fin)
        self.plan_end = self.now + elapsed

    def _plan_decode(self, t0: float, t1: float, cached: np.ndarray | None = None) -> None:
        run = self.run
        max_steps, free_tokens = stretch_limits(self.sched, run, t0, self.now, self.waiting, self.order, self.pos,
                                                 self.visible, self.capacity_blocks - self.reuse.shared_adjustment,
                                                 self.block, self.lookahead, cached)
        if self.ranks > 1 and self.waiting:  # held prompts: stop at the timeout or at the next arrival
            max_steps = min(max_steps, max(1, self.sched.balance_timeout_iters - self.held_iters))
            if self.pos < len(self.order):
                max_steps = min(max_steps, max(1, int(math.ceil((self.visible[self.order[self.pos]] - self.now) / t0))))
        k, tokens, elapsed, step = self.decoding.stretch(t0, t1, run.osl - run.gen, max_steps, free_tokens)
        self._plan = ("decode", t0, t1, k, tokens, elapsed, step)
        self.plan_end = self.now + elapsed

    def advance(self) -> list[int]:
        """Run the planned iteration; returns the requests it finished."""
        plan, self._plan, self.plan_end = self._plan, None, math.inf
        run, reuse = self.run, self.reuse
        if plan[0] == "prefill":
            _, elapsed, chunk, decoding_mask, n_dec, finishing_prefill, n_fin = plan
            self.itl_v.append(elapsed)
            self.itl_w.append(float(n_dec))
            self.now += elapsed
            self.held_iters += 1 if self.waiting else 0
            if n_dec:
                run.gen[decoding_mask] += 1.0 if self.decoding is PlainDecoding else \
                    self.decoding.tokens(run.osl[decoding_mask] - run.gen[decoding_mask])
            run.done += chunk
            self.tokens += float(np.add.reduce(chunk)) + n_dec
            if self.timeout != math.inf:
                self.started[run.idx[chunk > 0]] = True
            if n_fin:
                run.prefilling -= n_fin
                run.gen[finishing_prefill] += 1.0  # the prefill samples the next token (first, or next after a recompute)
                ids = run.idx[finishing_prefill]
                fresh = ids[np.isnan(self.first_tok[ids])]
                self.first_tok[fresh] = self.now
                if reuse.active:
                    for i in ids.tolist():
                        reuse.prefilled(i, self.prompt[i])
        else:
            _, t0, _, k, tokens, elapsed, step = plan
            self.itl_v.append(step)
            self.itl_w.append(float(run.k) * k)
            if self.prefilled:  # a transferred request's first token is its first decode step's
                ids = run.idx[np.isnan(self.first_tok[run.idx])]
                self.first_tok[ids] = self.now + t0
            self.now += elapsed
            run.gen += tokens
            self.tokens += float(run.k) * k
            self.held_iters += k if self.waiting else 0
        self.busy_s += elapsed
        done = self._finish()
        self._preempt()
        self.q_times.append(self.now)
        self.q_depth.append(len(self.waiting))
        return done

    def _finish(self) -> list[int]:
        run = self.run
        finished = run.gen >= run.osl
        if not np.logical_or.reduce(finished):
            return []
        done = run.idx[finished].tolist()
        self.outstanding -= len(done)
        for i in done:
            self.finish[i] = self.now
            self.reuse.released(i, self.isl_l[i] + self.osl_l[i])
        self.hold = False
        run.keep(~finished)
        return done

    def _preempt(self) -> None:
        """Memory pressure: preempt the newest requests (recomputed later) until the KV fits
        (checked exactly only when a quick upper bound on the blocks in use exceeds the pool)."""
        run, reuse, cap, reserve = self.run, self.reuse, self.capacity_blocks, self.sched.reserve_output
        spare = reuse.cache.evictable_blocks
        bound = (float(np.add.reduce(run.cached)) + run.k * self.lookahead) / self.block + run.k + reuse.shared_adjustment \
            if run.k and (spare or not reserve) else 0.0
        if not reserve and run.k > 1 and bound > cap:
            while run.k > 1 and self.blocks_used() > cap:
                i = int(run.idx[-1])
                self.generated[i] = run.gen[-1]
                self.prompt[i] = self.isl_l[i] + self.generated[i]
                run.drop_last()
                reuse.released(i, None)
                self.recompute[i] = True
                self.waiting.insert(0, i)
                self.preemptions += 1
                self.hold = True
            spare, bound = reuse.cache.evictable_blocks, math.inf
        if spare and bound + spare > cap:  # cached blocks nobody reads give way
            reuse.fit(cap - self.blocks_used())

    def abort(self) -> list[int]:
        """The replica fails: every request sent here and not finished is lost; returns them."""
        lost = self.order[self.pos:] + self.waiting + self.run.idx.tolist()
        self.order, self.pos, self.waiting, self.outstanding, self.run = [], 0, [], 0, RunningBatch(1)
        self._plan, self.plan_end = None, math.inf
        return lost
