"""Closed-loop clients over separate prefill and decode pools, on one clock.

With a rate or a trace the two pools of :mod:`.disaggregated` can be simulated one after
the other: the prefill pool's finishing times are the decode pool's arrivals. A closed loop
couples them the other way too: a client sends its next prompt to the prefill pool when the
decode pool finishes its last answer. So here every replica of both pools is a steppable
:class:`~.engine.Engine` and the loop always runs the event that comes first (an iteration
to apply, or an engine to plan once a request has reached it); a prompt done prefilling
crosses to the decode pool after its exposed KV transfer, and an answer done decoding sends
its client's next request. Replicas of a pool take requests in turn, as there.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..engines.scheduler import SchedulerConfig
from ..errors import InfeasibleError
from .batch import check_fits
from .engine import Engine
from .simulator import Trace


@dataclass(frozen=True)
class PoolSide:
    """One pool: its replicas' step model, scheduler limits, KV pool [token] and replica count."""

    model: Any
    sched: SchedulerConfig
    kv_capacity_tokens: float
    replicas: int
    state_tokens: float = 0.0  # pool tokens a running request's linear-attention state takes


@dataclass(frozen=True)
class PoolTimes:
    """Per-request times of a closed loop over two pools [s] (NaN where a request never ran)."""

    trace: Trace
    prefill_done: np.ndarray
    decode_arrival: np.ndarray


def closed_loop_pools(prefill: PoolSide, decode: PoolSide, prompts: np.ndarray, outputs: np.ndarray,
                      concurrency: int, turnaround: np.ndarray,
                      transfer: Callable[[float, float], float], forwarded: bool) -> PoolTimes:
    """Serve ``len(prompts)`` requests from ``concurrency`` clients over both pools.

    Parameters
    ----------
    prompts, outputs : array [token]
        Each request's prompt and output lengths, in the order the clients send them.
    turnaround : array [s]
        Request ``i`` is sent ``turnaround[i]`` after its client's previous request ended.
    transfer : callable
        ``(prompt_tokens, prefill_s) -> exposed KV transfer [s]`` from prefill to decode pool.
    forwarded : bool
        The first token is the prefill's (sent once the prompt is done): the decode pool
        emits the other ``output - 1``; otherwise the decode pool's first step gives it.
    """
    n = len(prompts)
    nan = np.full(n, np.nan)
    arrival, first_sched, prefill_done, at_decode, first_tok, finish = (nan.copy() for _ in range(6))
    to_decode = outputs - 1.0 if forwarded else outputs.astype(float)
    pre = [Engine(prefill.model, prefill.sched, kv_capacity_tokens=prefill.kv_capacity_tokens,
                  state_tokens=prefill.state_tokens)
           for _ in range(prefill.replicas)]
    dec = [Engine(decode.model, decode.sched, kv_capacity_tokens=decode.kv_capacity_tokens, prefilled=True,
                  state_tokens=decode.state_tokens)
           for _ in range(decode.replicas)]
    ones = np.ones(n)
    for e, osl in ((pre[0], ones), (dec[0], np.maximum(to_decode, 1.0))):
        check_fits(prompts, osl, e.capacity_blocks, e.block, e.lookahead, e.state_blocks)
    gid: dict[int, list[int]] = {id(e): [] for e in pre + dec}
    turn = {"prefill": 0, "decode": 0, "sent": 0}

    def send(g: int, t: float) -> None:
        e = pre[turn["prefill"] % len(pre)]
        turn["prefill"] += 1
        arrival[g] = t
        gid[id(e)].append(g)
        e.submit(t, float(prompts[g]), 1.0)

    def next_request(t: float) -> None:
        g = turn["sent"]
        if g < n:
            turn["sent"] += 1
            send(g, t + float(turnaround[g]))

    for _ in range(min(concurrency, n)):
        next_request(0.0)
    engines, prefilling = pre + dec, {id(e) for e in pre}
    while True:
        best, key = None, (math.inf, 2)
        for e in engines:
            k = (e.plan_end, 0) if e.planned else ((e.ready_s, 1) if e.busy else None)
            if k is not None and k < key:
                best, key = e, k
        if best is None:
            break
        if key[1] == 1:
            if not best.prepare():  # pragma: no cover - check_fits refuses what could never run
                raise InfeasibleError("closed loop over two pools: a replica holds requests it cannot run")
            continue
        ids = gid[id(best)]
        for i in best.advance():
            g = ids[i]
            if id(best) in prefilling:
                first_sched[g], prefill_done[g] = best.first_sched[i], best.now
                at_decode[g] = best.now + transfer(float(prompts[g]), max(best.now - best.first_sched[i], 1e-9))
                if to_decode[g] >= 1.0:
                    e = dec[turn["decode"] % len(dec)]
                    turn["decode"] += 1
                    gid[id(e)].append(g)
                    e.submit(float(at_decode[g]), float(prompts[g]), float(to_decode[g]))
                else:
                    finish[g] = first_tok[g] = best.now
                    next_request(best.now)
            else:
                first_tok[g], finish[g] = best.first_tok[i], best.now
                next_request(best.now)
    if forwarded:
        first_tok = prefill_done.copy()
    itl = [e for e in dec if e.itl_v]
    trace = Trace(arrival, prompts, outputs, first_sched, first_tok, finish,
                  sum(e.preemptions for e in engines), np.asarray(pre[0].q_times), np.asarray(pre[0].q_depth),
                  np.concatenate([np.asarray(e.itl_v) for e in itl] or [np.zeros(0)]),
                  np.concatenate([np.asarray(e.itl_w) for e in itl] or [np.zeros(0)]))
    return PoolTimes(trace, prefill_done, at_decode)
