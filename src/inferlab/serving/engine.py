"""One replica of an in-flight-batching engine as a steppable state machine.

Event-driven: an iteration is timed by :class:`~.stepmodel.StepModel` from the mix it
runs (decode tokens, prefill chunks and their contexts). Stretches of decode-only
iterations between events (an arrival that can be admitted, a request finishing, the KV
pool filling up) are advanced in one go: the step time grows linearly with the contexts,
so ``k`` steps take ``k t0 + s k (k - 1) / 2``. There is no per-token Python work. A small
batch of whole-token requests is kept as plain lists (:class:`~.batch.SmallBatch`) and
planned from plain-float sums instead of arrays (:mod:`.iteration`), with the same numbers.

:func:`~.simulator.simulate` drives one :class:`Engine` over a known set of requests; a
fleet (:mod:`inferlab.fleet`) drives many on one clock, handing each its requests as a
router places them (:meth:`Engine.submit`), planning an iteration (:meth:`Engine.prepare`)
and applying it (:meth:`Engine.advance`) in time order.
"""

from __future__ import annotations

import bisect
import math
from math import isnan
from operator import add
from typing import Any

import numpy as np

from ..engines.scheduler import SchedulerConfig
from ..inputs.prefixes import PrefixPlan
from .admission import Admission
from .token_gaps import TokenGaps
from .batch import PlainDecoding, RunningBatch, SmallBatch, cut_stretch, request_columns, stretch_limits
from .iteration import SMALL_BATCH, plan_decode_sums, plan_prefill, plan_prefill_sums
from .prefix_cache import PrefixReuse
from .stepmodel import StepModel

__all__ = ["Engine", "PlainDecoding"]

class Engine(Admission, TokenGaps):
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
    state_tokens : float [token]
        Pool tokens a running request's linear-attention state takes (in whole pages; 0: none).
    record : bool
        Keep the token gaps (``itl_v``, ``itl_w``) and the queue depth after each iteration
        (``q_times``, ``q_depth``); a fleet, which reads neither, records none (they keep their
        initial entries only).

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
    whole : bool
        Plain decoding of whole-token lengths: every token count is a whole number, so a
        small batch can be planned from plain-float sums exactly (:mod:`.iteration`).
    """

    def __init__(self, model: Any, sched: SchedulerConfig, *, kv_capacity_tokens: float, capacity: int = 0,
                 prefilled: bool = False, decoding: Any = None, prefixes: PrefixPlan | None = None,
                 prefix_cache: bool = False, queue_timeout_s: float = math.inf, record: bool = True,
                 state_tokens: float = 0.0) -> None:
        self.model, self.sched = model, sched
        self.block = block = sched.kv_block_size
        self.state_blocks, self.capacity_blocks = math.ceil(state_tokens / block), math.floor(kv_capacity_tokens / block)
        self.decoding = decoding or PlainDecoding
        self.lookahead = self.decoding.lookahead
        self.prefilled = prefilled
        self.whole = self.decoding is PlainDecoding  # until a length with a fraction comes
        # a step model that times an iteration from sums alone (see .iteration)
        self.prompt_gpu_s, self.encoded = float(getattr(model, "prompt_gpu_s", 0.0)), set()  # (_plan_prefill)
        self.sums = type(model) is StepModel and model.full_attention and model.groups == 1 and not self.prompt_gpu_s
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
        self.claimed = 0.0  # KV tokens the requests on their way or waiting will hold (Admission.kv_claimed)
        self.run: Any = SmallBatch() if self.sums and self.whole else RunningBatch(min(max(capacity, 1), sched.max_num_seqs))
        self.reuse = PrefixReuse(prefixes, self.block, 0, active=prefix_cache)
        self.now, self.busy_s, self.preemptions, self.tokens = 0.0, 0.0, 0, 0.0
        self.hold = False  # after a preemption, admit nothing until a request finishes and frees memory
        self.q_times, self.q_depth, self.itl_v, self.itl_w = [0.0], [0], [], []
        self.record = record
        # prefill iterations the decoding requests sat out (an unmixed or whole-prompt prefill),
        # each (its time, how many waited): added to those requests' next token gap
        self.stalls: list[tuple[float, float]] = []
        # an overlap scheduler (SGLang, TensorRT-LLM 1.x) plans an iteration while the one before runs,
        # taking in what had arrived when that began: one arriving mid-iteration waits an iteration more
        self.overlap, self.cutoff = bool(sched.overlap_host), 0.0
        self.resumed: dict[int, float] = {}  # preempted after emitting -> its last token's time (+ a gap)
        self.timeout, self.timed_out, self.credit = float(queue_timeout_s), [], {}
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
        self.whole = self.whole and all(float(x).is_integer() for x in self.isl_l + self.osl_l)
        self.visible = (np.asarray(arrivals, float) + self.delay).tolist()
        sent = int(np.sum(~np.isnan(arrivals)))
        self.order = list(np.argsort(np.where(np.isnan(arrivals), np.inf, arrivals), kind="stable")[:sent])
        self.outstanding = len(self.order) - self.pos + len(self.waiting) + self.run.k
        self.claimed = sum(map(self._claim, self.order[self.pos:] + self.waiting))
        for _ in range(n):
            self.reuse.found.append(0.0)
            self.reuse._looked.append(False)
            self.reuse._pinned.append(0)
        self.reuse.plain.extend([True] * (len(self.reuse.found) - len(self.reuse.plain)))

    def submit(self, arrival: float, isl: float, osl: float, stream: int = -1, prefix: float = 0.0,
               extends: float = 0.0, waited: float = 0.0) -> int:
        """A request sent at ``arrival`` [s] (not before the last applied iteration's start); its index.
        ``waited`` [s]: time it already spent queued (a router's), which its timeout counts."""
        i = self.n
        if waited:  # (a router's queue: the timeout's origin moves back)
            self.credit[i] = waited
        if i >= len(self.isl):
            self._grow(i + 1)
        self.n = i + 1
        self.isl[i], self.osl[i], self.prompt[i] = isl, osl, isl
        isl_f, osl_f = float(isl), float(osl)
        self.isl_l.append(isl_f)
        self.osl_l.append(osl_f)
        if self.whole and not (isl_f.is_integer() and osl_f.is_integer()):
            self.whole = False
        self.visible.append(math.nan)
        if self.reuse.active:
            self.reuse.add(stream, prefix, extends)
        else:
            self.reuse.found.append(0.0)
            self.reuse.plain.append(True)
        self.send(i, arrival)
        return i

    def send(self, i: int, arrival: float) -> None:
        """Request ``i`` (loaded, not yet sent) is sent at ``arrival`` [s]."""
        self.arrivals[i] = arrival
        self.visible[i] = v = arrival + self.delay
        order = self.order
        if len(order) == self.pos or self.visible[order[-1]] <= v:  # where insort puts it: last
            order.append(i)
        else:
            bisect.insort(order, i, lo=self.pos, key=self.visible.__getitem__)
        self.outstanding += 1
        self.claimed += self._claim(i)
        plan = self._plan  # a decode stretch must stop for it (behind an earlier arrival: it does)
        if plan is not None and plan[0] == "decode" and v < self.plan_end and order[self.pos] == i:
            if self.ranks > 1 or self.decoding is not PlainDecoding:
                self._plan_decode(*plan[1:3])
            elif not self.waiting and self.run.k < self.sched.max_num_seqs:  # else no arrival limits it
                if (cut := cut_stretch(plan, v - self.now)) is not None:
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
        run = self.run  # a small whole-token batch as lists, else as arrays (see .iteration)
        if (self.sums and self.whole and run.k <= SMALL_BATCH) is not run.lists:
            self.run = run = run.arrays() if run.lists else SmallBatch(run)
        if run.prefilling:
            self._plan_prefill()
        elif run.lists:
            self._plan = plan = plan_decode_sums(self)
            self.plan_end = self.now + plan[5]
        else:
            t0, t1 = self.model.time_decode(cached := self.run.cached)
            self._plan_decode(t0, t1, cached)
        return True

    def _plan_prefill(self) -> None:
        run = self.run
        plan = plan_prefill_sums if run.lists else plan_prefill
        self._plan = ("prefill", *plan(run, self.sched, self.model))
        elapsed = self._plan[1]
        if self.prompt_gpu_s:  # a request's own GPU work (a VLM's encoder), once, as its prefill starts (cached prefix or not)
            new = set(run.idx[self._plan[2] > 0].tolist()) - self.encoded
            self.encoded |= new
            self._plan = ("prefill", elapsed := elapsed + self.prompt_gpu_s * len(new), *self._plan[2:])
        self.plan_end = self.now + elapsed

    def _plan_decode(self, t0: float, t1: float, cached: np.ndarray | None = None) -> None:
        """Plan a decode stretch (to an arrival, a timeout due, the KV pool's end); ``cached`` when the caller has it."""
        run = self.run
        max_steps, free_tokens = stretch_limits(self.sched, run, t0, self.now, self.waiting, self.order, self.pos,
                                                 self.visible, self.capacity_blocks - self.reuse.shared_adjustment - run.k * self.state_blocks,
                                                 self.block, self.lookahead, cached)
        max_steps = min(max_steps, self.until_timeout(t0))
        if self.ranks > 1 and self.waiting:  # held prompts: stop at the timeout or at the next arrival
            max_steps = min(max_steps, max(1, self.sched.balance_timeout_iters - self.held_iters))
            if self.pos < len(self.order):
                max_steps = min(max_steps, max(1, int(math.ceil((self.visible[self.order[self.pos]] - self.now) / t0))))
        least = total = math.nan  # fewest tokens a request has left to emit; the KV tokens held
        if not self.whole:
            k, tokens, elapsed, step = self.decoding.stretch(t0, t1, run.osl - run.gen, max_steps, free_tokens)
        else:
            least = float(np.minimum.reduce(run.osl - run.gen))
            total = float(np.add.reduce(run.cached if cached is None else cached))
            k, tokens, elapsed, step = PlainDecoding.stretch_least(t0, t1, least, run.k, max_steps, free_tokens)
        self._plan = ("decode", t0, t1, k, tokens, elapsed, step, least, total)
        self.plan_end = self.now + elapsed

    def advance(self) -> list[int]:
        """Run the planned iteration; returns the requests it finished."""
        plan, self._plan, self.plan_end = self._plan, None, math.inf
        run, reuse = self.run, self.reuse
        if plan[0] == "prefill":
            _, elapsed, chunk, decoding_mask, n_dec, finishing_prefill, n_fin, sums = plan
            if self.record:
                self._prefill_gaps(elapsed, float(n_dec), float(run.k - run.prefilling))
            self.cutoff = self.now  # the next iteration was planned as this one began
            self.now += elapsed
            self.held_iters += 1 if self.waiting else 0
            if sums is not None:
                return self._advance_sums(elapsed, chunk, n_dec, n_fin, *sums)
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
                if self.resumed:  # (filled only when recording)
                    self._resume_gaps(ids.tolist())
                if reuse.active:
                    plain = reuse.plain
                    for i in ids.tolist():
                        if not plain[i]:
                            reuse.prefilled(i, self.prompt[i])
        else:
            _, t0, _, k, tokens, elapsed, step, least, total = plan
            emitted = float(run.k) * k
            if self.record:
                if self.stalls:
                    self._gap(step, emitted)
                else:  # (the common case inline: this runs once an iteration)
                    self.itl_v.append(step)
                    self.itl_w.append(emitted)
            if self.prefilled:  # a transferred request's first token is its first decode step's
                if run.lists:
                    first_tok, t = self.first_tok, self.now + t0
                    for i in run.idx:
                        if first_tok[i] != first_tok[i]:  # NaN
                            first_tok[i] = t
                else:
                    ids = run.idx[np.isnan(self.first_tok[run.idx])]
                    self.first_tok[ids] = self.now + t0
            self.now = now = self.now + elapsed
            if self.overlap:  # as the stretch's last step began: it takes 2 step - t0 (the steps grow linearly; step is their mean)
                last = 2.0 * step - t0 if k > 1 else elapsed
                self.cutoff = now - (last if last < elapsed else elapsed)  # (min without the call)
            if run.lists:
                run.gen = [g + tokens for g in run.gen]
            else:
                run.gen += tokens
            self.tokens += emitted
            if self.waiting:
                self.held_iters += k
        self.busy_s += elapsed
        if plan[0] == "decode" and k < least:  # no request finishes; each holds k more tokens
            done = []
            self._preempt(total + run.k * k)
        else:  # (a small batch's stretch ends as its shortest request does)
            done, held = self._finish(plan[0] == "decode" and run.lists)
            self._preempt(held)
        if self.record:
            self.q_times.append(self.now)
            self.q_depth.append(len(self.waiting))
        return done

    def _advance_sums(self, elapsed: float, chunk: list[float], n_dec: int, n_fin: int, emits: list[float],
                      prompted: list[int], prefill_tokens: float, ends: bool, held: float) -> list[int]:
        """The rest of :meth:`advance` for a prefill iteration planned by :func:`.plan_prefill_sums`
        (a :class:`.SmallBatch`)."""
        run, reuse = self.run, self.reuse
        run.gen = list(map(add, run.gen, emits))
        run.done = list(map(add, run.done, chunk))
        self.tokens += prefill_tokens + n_dec
        if self.timeout != math.inf:
            for i, q in zip(run.idx, chunk):
                if q > 0:
                    self.started[i] = True
        if n_fin:
            run.prefilling -= n_fin
            first_tok, plain = self.first_tok, reuse.plain
            if self.resumed:
                self._resume_gaps(prompted)
            for i in prompted:
                if isnan(first_tok[i]):  # its first token
                    first_tok[i] = self.now
                if not plain[i]:
                    reuse.prefilled(i, self.prompt[i])
        self.busy_s += elapsed
        if ends:
            done, held = self._finish(True)
            self._preempt(held)
        else:
            done = []
            self._preempt(held)
        if self.record:
            self.q_times.append(self.now)
            self.q_depth.append(len(self.waiting))
        return done

    def abort(self) -> list[int]:
        """The replica fails: every request sent here and not finished is lost; returns them."""
        lost = self.order[self.pos:] + self.waiting + self.run.ids()
        self.order, self.pos, self.waiting, self.outstanding, self.run = [], 0, [], 0, RunningBatch(1)
        self.claimed = 0.0
        self._plan, self.plan_end = None, math.inf
        return lost
