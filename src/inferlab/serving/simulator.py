"""Request-level simulation of one replica of an in-flight-batching engine over a known
set of requests: :class:`~.engine.Engine` driven to the end, with closed-loop clients,
conversations and a capped client sending their next request when one finishes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..engines.scheduler import SchedulerConfig
from ..inputs.prefixes import PrefixPlan
from .batch import check_fits
from .engine import Engine, PlainDecoding
from .stepmodel import StepModel

__all__ = ["PlainDecoding", "Trace", "simulate"]


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


def simulate(model: StepModel, sched: SchedulerConfig, arrivals: np.ndarray, isl: np.ndarray, osl: np.ndarray,
             *, kv_capacity_tokens: float, concurrency: int | None = None,
             turnaround: np.ndarray | None = None, max_in_flight: int | None = None, prefilled: bool = False,
             decoding: Any = None, prefixes: PrefixPlan | None = None, state_tokens: float = 0.0) -> Trace:
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
    max_in_flight : int, optional
        A client that sends ``arrivals`` as they fall due but holds at most this many requests
        in flight (a benchmark's ``--max-concurrency`` with a rate): a request due while that
        many are in flight is sent when one finishes, in order, and is timed from then.
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
    state_tokens : float
        KV-pool tokens a running request's linear-attention state takes (a hybrid model in one
        pool); 0 otherwise.

    A request reaches the scheduler ``model.request_overhead_s`` after it is sent (the
    server's HTTP, tokenization and hand-off); its times count from when it was sent.
    """
    n = len(isl)
    due = None
    if max_in_flight is not None and max_in_flight < n:  # the first ones go when due, the rest as slots free
        due = np.asarray(arrivals, float).copy()
        arrivals = due.copy()
        arrivals[max_in_flight:] = np.nan
    engine = Engine(model, sched, kv_capacity_tokens=kv_capacity_tokens, capacity=n, prefilled=prefilled,
                    decoding=decoding, prefixes=prefixes, state_tokens=state_tokens)
    engine.load(np.asarray(arrivals, float).copy(), isl, osl)
    check_fits(engine.isl[:engine.n], engine.osl[:engine.n], engine.capacity_blocks, engine.block, engine.lookahead,
               engine.state_blocks)
    sent = len(engine.order)  # closed loop: next request id to hand a client
    next_turn = prefixes.next_turn.tolist() if prefixes is not None else None
    while engine.busy and engine.prepare():
        for i in engine.advance():
            if concurrency is not None and sent < n:  # the client sends its next request
                engine.send(sent, engine.now + (turnaround[sent] if turnaround is not None else 0.0))
                sent += 1
            elif due is not None and sent < n:  # a slot is free: the next request goes when it is due
                engine.send(sent, max(float(due[sent]), engine.now))
                sent += 1
            if next_turn is not None and next_turn[i] >= 0:  # the conversation's next turn
                j = next_turn[i]
                engine.send(j, engine.now + float(prefixes.think_s[j]))  # type: ignore[union-attr]
    e = engine
    return Trace(e.arrivals[:n], isl, osl, e.first_sched[:n], e.first_tok[:n], e.finish[:n], e.preemptions, np.asarray(e.q_times),
                 np.asarray(e.q_depth), np.asarray(e.itl_v), np.asarray(e.itl_w),
                 np.asarray(e.reuse.found) if prefixes is not None else None, e.reuse.cache.evicted_blocks)
