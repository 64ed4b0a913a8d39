"""Request-level simulation of one replica of an in-flight-batching engine.

Event-driven: an iteration is timed by :class:`~.stepmodel.StepModel` from the mix it
runs (decode tokens, prefill chunks and their contexts). Stretches of decode-only
iterations between events (an arrival that can be admitted, a request finishing, the KV
pool filling up) are advanced in one go: the step time grows linearly with the contexts,
so ``k`` steps take ``k t0 + s k (k - 1) / 2``. There is no per-token Python work.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import InfeasibleError, SpecError
from .prefix_cache import PrefixReuse
from .prefixes import PrefixPlan
from .scheduler import SchedulerConfig
from .stepmodel import StepModel


@dataclass
class Trace:
    """Per-request times [s] and the queue over time, filled by :func:`simulate`."""

    arrival: np.ndarray
    isl: np.ndarray
    osl: np.ndarray
    first_scheduled: np.ndarray
    first_token: np.ndarray
    finish: np.ndarray
    preemptions: int
    queue_times: np.ndarray
    queue_depth: np.ndarray
    itl_values: np.ndarray
    itl_weights: np.ndarray
    cached: np.ndarray | None = None
    evicted_blocks: int = 0


class PlainDecoding:
    """One token per decoding request per iteration (no speculation)."""

    lookahead = 0

    @staticmethod
    def tokens(remaining: np.ndarray) -> float:
        """Tokens each decoding request emits in one iteration."""
        return 1.0

    @staticmethod
    def stretch(t0: float, t1: float, remaining: np.ndarray, max_steps: int,
                free_tokens: float) -> tuple[int, float, float, float]:
        """Decode-only steps until a request finishes, the KV pool fills or ``max_steps``:
        the steps, the tokens each request emitted, their time [s] and mean step [s]."""
        k = min(int(max(1.0, float(remaining.min()))), max_steps)
        if free_tokens != math.inf:
            k = min(k, max(1, int(free_tokens // max(len(remaining), 1)) + 1))
        if k > 1:
            slope = t1 - t0
            return k, k, k * t0 + slope * k * (k - 1) / 2.0, t0 + slope * (k - 1) / 2.0
        return k, k, t0, t0


class _State:
    """Running requests as arrays (one slot per admitted request), in preallocated buffers;
    the public attributes are views of the first ``k`` slots."""

    FIELDS = ("idx", "done", "gen", "base", "prompt", "osl")

    def __init__(self, capacity: int) -> None:
        self.k = 0
        self.prefilling = 0  # slots whose prompt is not prefilled yet
        self._buf = {f: np.zeros(max(capacity, 1), np.int64 if f == "idx" else float) for f in self.FIELDS}
        self._views()

    def _views(self) -> None:
        k, b = self.k, self._buf
        self.idx, self.done, self.gen = b["idx"][:k], b["done"][:k], b["gen"][:k]
        self.base, self.prompt, self.osl = b["base"][:k], b["prompt"][:k], b["osl"][:k]

    def add(self, i: int, generated: float, prompt: float, osl: float, done: float = 0.0) -> None:
        """Admit request ``i`` (``generated`` tokens already produced, ``prompt`` to prefill,
        ``done`` of them already in the cache)."""
        b, k = self._buf, self.k
        if k == len(b["idx"]):
            self._buf = b = {f: np.concatenate([v, np.zeros_like(v)]) for f, v in b.items()}
        b["idx"][k], b["done"][k], b["gen"][k], b["base"][k] = i, done, generated, generated
        b["prompt"][k], b["osl"][k] = prompt, osl
        self.k = k + 1
        self.prefilling += 0 if done >= prompt else 1
        self._views()

    def keep(self, mask: np.ndarray) -> None:
        """Keep the slots where ``mask`` is true, in order."""
        m = int(np.count_nonzero(mask))
        for f in self.FIELDS:
            v = self._buf[f]
            v[:m] = v[:self.k][mask]
        self.k = m
        self._views()

    def drop_last(self) -> None:
        if self.done[-1] < self.prompt[-1]:
            self.prefilling -= 1
        self.k -= 1
        self._views()

    @property
    def cached(self) -> np.ndarray:
        """KV tokens each running request holds."""
        return self.done + self.gen - self.base


def simulate(model: StepModel, sched: SchedulerConfig, arrivals: np.ndarray, isl: np.ndarray, osl: np.ndarray,
             *, kv_capacity_tokens: float, concurrency: int | None = None,
             turnaround: np.ndarray | None = None, prefilled: bool = False,
             decoding: Any = None, prefixes: PrefixPlan | None = None) -> Trace:
    """Serve every request; return their timelines.

    Parameters
    ----------
    arrivals : array [s]
        Arrival times; NaN for closed-loop requests not yet sent (a client sends its next
        request when its previous one finishes) and for a conversation's later turns.
    kv_capacity_tokens : float
        KV-cache pool of the replica, in tokens (after weights, workspace, reserve).
    concurrency : int, optional
        Closed-loop clients.
    turnaround : array [s], optional
        Closed loop: request ``i`` is sent ``turnaround[i]`` after its client's previous
        request finished.
    prefilled : bool
        Every request arrives with its prompt's KV cache (the decode pool of disaggregated
        serving): no prefill, its first token comes from its first decode iteration.
    decoding : PlainDecoding or SpeculativeDecoding, optional
        Tokens each decoding request emits per iteration (one, or drawn per request when
        speculating; then ``model`` times the draft and verify passes) and the KV slots
        each running request holds beyond its tokens.
    prefixes : PrefixPlan, optional
        Streams and prefixes of the requests, for the prefix cache; its later turns are
        sent ``think_s`` after the turn before them finishes.

    A request reaches the scheduler ``model.request_overhead_s`` after it is sent (the
    server's HTTP, tokenization and hand-off); its times count from when it was sent.
    """
    n = len(isl)
    block = sched.kv_block_size
    capacity_blocks = math.floor(kv_capacity_tokens / block)
    decoding = decoding or PlainDecoding
    lookahead = decoding.lookahead
    _check_fits(isl, osl, capacity_blocks, block, lookahead)
    arrivals = np.asarray(arrivals, float).copy()
    first_sched = np.full(n, np.nan)
    first_tok = np.full(n, np.nan)
    finish = np.full(n, np.nan)
    sent = int(np.sum(~np.isnan(arrivals)))  # closed loop: next request id to hand a client
    order = list(np.argsort(np.where(np.isnan(arrivals), np.inf, arrivals), kind="stable")[:sent])
    delay = float(getattr(model, "request_overhead_s", 0.0))
    visible = (arrivals + delay).tolist()  # when each request reaches the scheduler
    reuse = PrefixReuse(prefixes, block, n)
    next_turn = prefixes.next_turn.tolist() if prefixes is not None else None
    waiting: list[int] = []
    run = _State(min(n, sched.max_num_seqs))
    now, preemptions = 0.0, 0
    q_times, q_depth, itl_v, itl_w = [0.0], [0], [], []
    pos = 0  # next entry of ``order`` to arrive
    # a preempted request is recomputed: its prompt becomes the prompt plus what it generated
    prompt = np.asarray(isl, float).copy()
    generated = np.zeros(n)
    isl_l, osl_l = np.asarray(isl, float).tolist(), np.asarray(osl, float).tolist()
    hold = False  # after a preemption, admit nothing until a request finishes and frees memory
    recompute = np.zeros(n, bool)  # preempted: its cache is gone, even where requests arrive prefilled
    reserve, chunked = sched.reserve_output, sched.chunked_prefill
    budget_max, max_seqs = sched.max_num_batched_tokens, sched.max_num_seqs
    none = np.zeros(0)
    # attention-DP balancing: prompts wait until every rank has one, or for ``timeout`` iterations
    ranks = sched.ranks if sched.balance_timeout_iters and not prefilled else 1
    timeout, held_iters = sched.balance_timeout_iters, 0

    def blocks_used() -> float:
        tokens = isl[run.idx] + run.osl if reserve else np.maximum(run.cached, 1.0)
        if lookahead:
            tokens = tokens + lookahead
        return float(np.ceil(tokens / block).sum()) + reuse.shared_adjustment

    while pos < len(order) or waiting or run.k:
        while pos < len(order) and visible[order[pos]] <= now + 1e-12:
            waiting.append(order[pos])
            pos += 1
        # admission: FIFO while a slot and the prompt's KV blocks are free
        balanced = (ranks == 1 or not run.k or held_iters >= timeout  # an idle engine's loop spins its timeout away
                    or len(waiting) >= min(ranks, max_seqs - run.k))
        if waiting and not hold and run.k < max_seqs and balanced:
            held_iters = 0
            used = blocks_used()
            while waiting and run.k < max_seqs:
                i = waiting[0]
                found, pin, counted = reuse.lookup(i, prompt[i])
                need = math.ceil(((isl_l[i] + osl_l[i] if reserve else prompt[i]) + lookahead) / block) - counted
                if used + need > capacity_blocks:
                    break
                waiting.pop(0)
                run.add(i, generated[i], prompt[i], osl_l[i], prompt[i] if prefilled and not recompute[i] else found)
                reuse.admitted(i, found, pin)
                used += need
                if first_sched[i] != first_sched[i]:  # NaN: first admission
                    first_sched[i] = now
            if reuse.cache.evictable_blocks:
                reuse.fit(capacity_blocks - used)
        if not run.k:
            if pos < len(order):
                now = max(now, visible[order[pos]])
                continue
            break
        if run.prefilling:
            prefilling = run.done < run.prompt
            decoding_mask = ~prefilling
            n_dec = int(np.count_nonzero(decoding_mask))
            # prefill chunks, first come first served, within the token budget
            budget = budget_max - (n_dec if chunked else 0)
            chunk = np.zeros(run.k)
            left = run.prompt - run.done
            for j in np.flatnonzero(prefilling).tolist():
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
            dctx = run.cached[decoding_mask] if n_dec else none
            elapsed = model.time(decode_context=dctx, prefill_context=run.done[runs_prefill],
                                 prefill_tokens=chunk[runs_prefill], logits=float(n_dec + n_fin))
            itl_v.append(elapsed)
            itl_w.append(float(n_dec))
            now += elapsed
            held_iters += 1 if waiting else 0
            if n_dec:
                run.gen[decoding_mask] += decoding.tokens(run.osl[decoding_mask] - run.gen[decoding_mask])
            run.done += chunk
            if n_fin:
                run.prefilling -= n_fin
                run.gen[finishing_prefill] += 1.0  # the prefill samples the next token (first, or next after a recompute)
                ids = run.idx[finishing_prefill]
                fresh = ids[np.isnan(first_tok[ids])]
                first_tok[fresh] = now
                if reuse.active:
                    for i in ids.tolist():
                        reuse.prefilled(i, prompt[i])
        else:
            # decode only: run until something changes, in one go
            t0, t1 = model.time_decode(run.cached)
            max_steps, free_tokens = _stretch_limits(sched, run, t0, now, waiting, order, pos, visible,
                                                     capacity_blocks - reuse.shared_adjustment, block, lookahead)
            if ranks > 1 and waiting:  # held prompts: stop at the timeout or at the next arrival
                max_steps = min(max_steps, max(1, timeout - held_iters))
                if pos < len(order):
                    max_steps = min(max_steps, max(1, int(math.ceil((visible[order[pos]] - now) / t0))))
            k, tokens, elapsed, step = decoding.stretch(t0, t1, run.osl - run.gen, max_steps, free_tokens)
            held_iters += k if waiting else 0
            itl_v.append(step)
            itl_w.append(float(run.k) * k)
            if prefilled:  # a transferred request's first token is its first decode step's
                ids = run.idx[np.isnan(first_tok[run.idx])]
                first_tok[ids] = now + t0
            now += elapsed
            run.gen += tokens
        finished = run.gen >= run.osl
        if finished.any():
            for i in run.idx[finished].tolist():
                finish[i] = now
                reuse.released(i, isl_l[i] + osl_l[i])
                if concurrency is not None and sent < n:  # the client sends its next request
                    arrivals[sent] = now + (turnaround[sent] if turnaround is not None else 0.0)
                    visible[sent] = arrivals[sent] + delay
                    bisect.insort(order, sent, lo=pos, key=visible.__getitem__)
                    sent += 1
                if next_turn is not None and next_turn[i] >= 0:  # the conversation's next turn
                    j = next_turn[i]
                    arrivals[j] = now + float(prefixes.think_s[j])  # type: ignore[union-attr]
                    visible[j] = arrivals[j] + delay
                    bisect.insort(order, j, lo=pos, key=visible.__getitem__)
            hold = False
            run.keep(~finished)
        # memory pressure: preempt the newest requests (recomputed later) until the KV fits
        # (checked exactly only when a quick upper bound on the blocks in use exceeds the pool)
        spare = reuse.cache.evictable_blocks
        bound = (float(run.cached.sum()) + run.k * lookahead) / block + run.k + reuse.shared_adjustment \
            if run.k and (spare or not reserve) else 0.0
        if not reserve and run.k > 1 and bound > capacity_blocks:
            while run.k > 1 and blocks_used() > capacity_blocks:
                i = int(run.idx[-1])
                generated[i] = run.gen[-1]
                prompt[i] = isl_l[i] + generated[i]
                run.drop_last()
                reuse.released(i, None)
                recompute[i] = True
                waiting.insert(0, i)
                preemptions += 1
                hold = True
            spare, bound = reuse.cache.evictable_blocks, math.inf
        if spare and bound + spare > capacity_blocks:  # cached blocks nobody reads give way
            reuse.fit(capacity_blocks - blocks_used())
        q_times.append(now)
        q_depth.append(len(waiting))
    return Trace(arrivals, isl, osl, first_sched, first_tok, finish, preemptions, np.asarray(q_times),
                 np.asarray(q_depth), np.asarray(itl_v), np.asarray(itl_w),
                 reuse.found if prefixes is not None else None, reuse.cache.evicted_blocks)


def _check_fits(isl: np.ndarray, osl: np.ndarray, capacity_blocks: int, block: int, lookahead: int) -> None:
    """Refuse empty requests, and any request larger than the whole KV pool (engines reject those)."""
    n = len(isl)
    if n and (np.min(isl) < 1 or np.min(osl) < 1):
        raise SpecError("simulate: every request needs a prompt and an output of at least one token")
    need_blocks = np.ceil((isl + osl + lookahead) / block)
    if n and capacity_blocks < need_blocks.max():
        big = int(np.argmax(need_blocks))
        extra = f" + {lookahead} speculative slots" if lookahead else ""
        raise InfeasibleError(f"the KV pool holds {capacity_blocks * block:.0f} tokens, less than request {big} "
                              f"({int(isl[big])} + {int(osl[big])} tokens{extra}) needs; engines reject such a "
                              "request: shorten the lengths or give the pool more memory (fewer weights per GPU, "
                              "more TP)")


def _stretch_limits(sched: SchedulerConfig, run: _State, t0: float, now: float, waiting: list[int],
                    order: list[int], pos: int, visible: list[float], capacity_blocks: float, block: int,
                    lookahead: int) -> tuple[int, float]:
    """Decode-only iterations (every running request decoding) that can run before an
    arrival could be admitted (``t0`` [s]: the first one's time), and the KV tokens free
    for the requests to grow into (unbounded when their outputs are reserved)."""
    max_steps = 1 << 62
    free_tokens = math.inf
    # KV growth: each running request adds its tokens per step (nothing to check when reserved)
    if not sched.reserve_output:
        held = np.maximum(run.cached, 1.0) + lookahead if lookahead else np.maximum(run.cached, 1.0)
        free_tokens = (capacity_blocks - float(np.ceil(held / block).sum())) * block
    # an arrival that could be admitted (a slot and its prompt blocks are free)
    if pos < len(order) and run.k < sched.max_num_seqs and not waiting:
        gap = visible[order[pos]] - now
        max_steps = max(1, int(math.ceil(gap / t0)))
    return max_steps, free_tokens
