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

import numpy as np

from ..errors import InfeasibleError
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


class _State:
    """Running requests as arrays (one slot per admitted request)."""

    def __init__(self) -> None:
        self.idx = np.zeros(0, np.int64)       # request ids
        self.done = np.zeros(0)                # tokens prefilled since admission
        self.gen = np.zeros(0)                 # output tokens produced (before and since admission)
        self.base = np.zeros(0)                # output tokens produced before this admission

    def add(self, i: int, generated: float = 0.0) -> None:
        self.idx = np.append(self.idx, i)
        self.done = np.append(self.done, 0.0)
        self.gen = np.append(self.gen, generated)
        self.base = np.append(self.base, generated)

    def keep(self, mask: np.ndarray) -> None:
        self.idx, self.done, self.gen, self.base = self.idx[mask], self.done[mask], self.gen[mask], self.base[mask]

    @property
    def cached(self) -> np.ndarray:
        """KV tokens each running request holds."""
        return self.done + self.gen - self.base


def simulate(model: StepModel, sched: SchedulerConfig, arrivals: np.ndarray, isl: np.ndarray, osl: np.ndarray,
             *, kv_capacity_tokens: float, concurrency: int | None = None,
             turnaround: np.ndarray | None = None) -> Trace:
    """Serve every request; return their timelines.

    Parameters
    ----------
    arrivals : array [s]
        Arrival times; NaN for closed-loop requests not yet sent (a client sends its next
        request when its previous one finishes).
    kv_capacity_tokens : float
        KV-cache pool of the replica, in tokens (after weights, workspace, reserve).
    concurrency : int, optional
        Closed-loop clients.
    turnaround : array [s], optional
        Closed loop: request ``i`` is sent ``turnaround[i]`` after its client's previous
        request finished.

    A request reaches the scheduler ``model.request_overhead_s`` after it is sent (the
    server's HTTP, tokenization and hand-off); its times count from when it was sent.
    """
    n = len(isl)
    block = sched.kv_block_size
    capacity_blocks = math.floor(kv_capacity_tokens / block)
    need_blocks = np.ceil((isl + osl) / block)
    if capacity_blocks < need_blocks.min():
        raise InfeasibleError(f"the KV pool holds {capacity_blocks * block:.0f} tokens, less than one request "
                              f"({int((isl + osl).min())} tokens) needs")
    arrivals = np.asarray(arrivals, float).copy()
    first_sched = np.full(n, np.nan)
    first_tok = np.full(n, np.nan)
    finish = np.full(n, np.nan)
    sent = int(np.sum(~np.isnan(arrivals)))  # closed loop: next request id to hand a client
    order = list(np.argsort(np.where(np.isnan(arrivals), np.inf, arrivals), kind="stable")[:sent])
    waiting: list[int] = []
    run = _State()
    now, preemptions = 0.0, 0
    q_times, q_depth, itl_v, itl_w = [0.0], [0], [], []
    pos = 0  # next entry of ``order`` to arrive
    delay = float(getattr(model, "request_overhead_s", 0.0))
    # a preempted request is recomputed: its prompt becomes the prompt plus what it generated
    prompt = np.asarray(isl, float).copy()
    generated = np.zeros(n)
    hold = False  # after a preemption, admit nothing until a request finishes and frees memory

    def blocks_used() -> float:
        tokens = isl[run.idx] + osl[run.idx] if sched.reserve_output else np.maximum(run.cached, 1.0)
        return float(np.sum(np.ceil(tokens / block)))

    while pos < len(order) or waiting or len(run.idx):
        while pos < len(order) and arrivals[order[pos]] + delay <= now + 1e-12:
            waiting.append(order[pos])
            pos += 1
        # admission: FIFO while a slot and the prompt's KV blocks are free
        used = blocks_used() if waiting and not hold else 0.0
        while waiting and len(run.idx) < sched.max_num_seqs and not hold:
            i = waiting[0]
            need = math.ceil((isl[i] + osl[i] if sched.reserve_output else prompt[i]) / block)
            if used + need > capacity_blocks:
                break
            waiting.pop(0)
            run.add(i, generated[i])
            used += need
            if np.isnan(first_sched[i]):
                first_sched[i] = now
        if not len(run.idx):
            if pos < len(order):
                now = max(now, arrivals[order[pos]] + delay)
                continue
            break
        prefilling = run.done < prompt[run.idx]
        decoding = ~prefilling
        # prefill chunks, first come first served, within the token budget
        budget = sched.max_num_batched_tokens - (int(decoding.sum()) if sched.chunked_prefill else 0)
        chunk = np.zeros(len(run.idx))
        left = prompt[run.idx] - run.done
        for j in np.flatnonzero(prefilling):
            if budget <= 0:
                break
            if sched.chunked_prefill:
                take = min(left[j], budget)
            elif left[j] > budget and chunk.any():
                break
            else:
                take = left[j]  # without chunking a prompt is prefilled whole
            chunk[j] = take
            budget -= take
        runs_prefill = chunk > 0
        if not sched.chunked_prefill and runs_prefill.any():
            decoding = np.zeros_like(decoding)  # a whole-prompt prefill iteration runs no decodes
        finishing_prefill = runs_prefill & (run.done + chunk >= prompt[run.idx])
        ctx = run.cached
        dctx = ctx[decoding]
        t0 = model.time(decode_context=dctx, prefill_context=run.done[runs_prefill],
                        prefill_tokens=chunk[runs_prefill], logits=float(decoding.sum() + finishing_prefill.sum()))
        k = 1
        if not runs_prefill.any() and decoding.any():
            k = _decode_stretch(sched, run, decoding, t0, osl, now - delay, waiting, order, pos, arrivals,
                                capacity_blocks, block)
        if k > 1:
            t1 = model.time(decode_context=dctx + 1.0, prefill_context=np.zeros(0), prefill_tokens=np.zeros(0),
                            logits=float(decoding.sum()))
            slope = t1 - t0
            elapsed = k * t0 + slope * k * (k - 1) / 2.0
            itl_v.append(t0 + slope * (k - 1) / 2.0)
        else:
            elapsed = t0
            itl_v.append(t0)
        itl_w.append(float(decoding.sum()) * k)
        now += elapsed
        run.gen[decoding] += k
        run.done[runs_prefill] += chunk[runs_prefill]
        newly = finishing_prefill
        run.gen[newly] += 1.0  # the prefill samples the next token (the first, or the next after a recompute)
        fresh = run.idx[newly][np.isnan(first_tok[run.idx[newly]])]
        first_tok[fresh] = now
        finished = run.gen >= osl[run.idx]
        for i in run.idx[finished]:
            finish[i] = now
            if concurrency is not None and sent < n:  # the client sends its next request
                arrivals[sent] = now + (turnaround[sent] if turnaround is not None else 0.0)
                bisect.insort(order, sent, lo=pos, key=arrivals.__getitem__)
                sent += 1
        if finished.any():
            hold = False
        run.keep(~finished)
        # memory pressure: preempt the newest requests (recomputed later) until the KV fits
        while not sched.reserve_output and len(run.idx) > 1 and blocks_used() > capacity_blocks:
            i = int(run.idx[-1])
            generated[i] = run.gen[-1]
            prompt[i] = isl[i] + generated[i]
            run.keep(np.arange(len(run.idx)) < len(run.idx) - 1)
            waiting.insert(0, i)
            preemptions += 1
            hold = True
        q_times.append(now)
        q_depth.append(len(waiting))
    return Trace(arrivals, isl, osl, first_sched, first_tok, finish, preemptions, np.asarray(q_times),
                 np.asarray(q_depth), np.asarray(itl_v), np.asarray(itl_w))


def _decode_stretch(sched: SchedulerConfig, run: _State, decoding: np.ndarray, t0: float, osl: np.ndarray,
                    now: float, waiting: list[int], order: list[int], pos: int, arrivals: np.ndarray,
                    capacity_blocks: int, block: int) -> int:
    """How many decode-only iterations can run before anything changes (``t0`` [s]: the first one's time)."""
    remaining = osl[run.idx[decoding]] - run.gen[decoding]
    k = int(max(1, remaining.min()))
    # KV growth: each running request adds a token per step (nothing to check when reserved)
    if not sched.reserve_output:
        tokens = run.cached
        free_tokens = (capacity_blocks - np.sum(np.ceil(np.maximum(tokens, 1.0) / block))) * block
        k = min(k, max(1, int(free_tokens // max(len(run.idx), 1)) + 1))
    # an arrival that could be admitted (a slot and its prompt blocks are free)
    if pos < len(order) and len(run.idx) < sched.max_num_seqs and not waiting:
        gap = arrivals[order[pos]] - now
        k = min(k, max(1, int(math.ceil(gap / t0))))
    return k
