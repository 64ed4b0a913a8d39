"""Planning one iteration of an engine's running batch from its arrays, or from plain floats.

:func:`plan_prefill` chooses the prompts that get a chunk within the token budget (first come
first served; with a prompt-token limit, :func:`prefill_allowance`, no further prompt once it
is spent; under attention DP within each rank's budget, whole prompts to the least loaded rank
where they are not chunked, :func:`busiest_rank` the rank that sets the iteration's time; where
the engine runs prompts before decodes, each rank its own, the ranks without prompts decoding
beside them) and times the iteration; :func:`plan_prefill_sums` and :func:`plan_decode_sums` do
the same work with Python floats for a small batch, where numpy's cost per call would be
most of the time.

Notes
-----
The plain-float forms are exact, not approximations: they apply only to whole-token batches
(plain decoding of integer lengths, :attr:`~.engine.Engine.whole`), where every token count,
every sum of counts and every attention span (``q c + q (q + 1) / 2``) is a whole number far
below 2**53, so each sum is the same number in any order; and only with full attention,
one token per decoding sequence and no attention-DP ranks, where the step model reads
nothing but those sums (:meth:`~.stepmodel.StepModel.time_sums`).
"""

from __future__ import annotations

import math
from operator import ge, sub
from typing import Any

import numpy as np

from ..engines.scheduler import SchedulerConfig
from .batch import PlainDecoding, RunningBatch, SmallBatch, blocks_held

#: Running requests up to which the plain-float forms are used (beyond, numpy's arrays are faster).
SMALL_BATCH = 32


def prefill_allowance(sched: SchedulerConfig, mixed_decodes: int) -> float:
    """Prompt tokens an iteration may still start prompts within [token]: the scheduler's
    ``max_prefill_tokens`` less the decodes mixed in (SGLang's ``rem_input_tokens``), or no
    limit. A prompt is taken while it is positive, whole if the token budget allows."""
    limit = sched.max_prefill_tokens
    return math.inf if limit is None else float(limit - mixed_decodes)


def plan_prefill(run: RunningBatch, sched: SchedulerConfig, model: Any) -> tuple:
    """An iteration with prefill chunks: its time [s], the chunk of each slot [token], which
    slots decode and how many, which slots finish their prompt and how many, and None (what
    :func:`plan_prefill_sums` knows beyond that)."""
    chunked = sched.chunked_prefill
    mixed = sched.mixed_prefill  # the running requests decode in this iteration
    budget_max = sched.max_num_batched_tokens
    prefilling = run.done < run.prompt
    decoding_mask = ~prefilling
    n_dec = int(np.count_nonzero(decoding_mask))
    budget = budget_max - (n_dec if mixed else 0)
    soft = prefill_allowance(sched, n_dec if mixed else 0)
    chunk = np.zeros(run.k)
    left = run.prompt - run.done
    # under attention DP each rank chunks its own prompts within its share of the budget
    # (SGLang's --enable-dp-attention: chunked_prefill_size // dp_size a rank; the others' budgets
    # are a rank's already), so a long prompt fills one rank's share and the others take theirs
    ranks = int(getattr(model, "groups", 1))
    per_rank = budget_max // ranks
    if ranks > 1 and not mixed:  # each rank its own prefill-first scheduler
        return _plan_ranks_prefill(run, sched, model, ranks, per_rank)
    # without chunking, each rank takes whole prompts within its own budget (less its share of
    # the decodes): a prompt goes to the least loaded rank, and the iteration takes no more once
    # that rank has no room for it (TensorRT-LLM's attention-DP balancing by tokens)
    loads = [(n_dec / ranks if mixed else 0.0)] * ranks if ranks > 1 and not chunked else None
    opening = budget  # (below it once a prompt is taken)
    for j in prefilling.nonzero()[0].tolist():
        if budget <= 0 or soft <= 0:
            break
        lj = float(left[j])
        if chunked:
            take = min(lj, budget, per_rank)
        elif lj > budget and budget < budget_max:
            break
        elif loads is not None:
            k = loads.index(min(loads))
            if lj > per_rank - loads[k] and budget < opening:
                break  # (a prompt past a rank's budget goes alone)
            loads[k] += lj
            take = lj
        else:
            take = lj  # without chunking a prompt is prefilled whole
        chunk[j] = take
        budget -= take
        soft -= take
    runs_prefill = chunk > 0
    if not mixed:
        decoding_mask[:] = False  # an unmixed prefill iteration runs no decodes
        n_dec = 0
    finishing_prefill = runs_prefill & (run.done + chunk >= run.prompt)
    n_fin = int(np.count_nonzero(finishing_prefill))
    dctx = run.cached[decoding_mask] if n_dec else np.zeros(0)
    elapsed = model.time(decode_context=dctx, prefill_context=run.done[runs_prefill],
                         prefill_tokens=chunk[runs_prefill], logits=float(n_dec + n_fin))
    return elapsed, chunk, decoding_mask, n_dec, finishing_prefill, n_fin, None


def _plan_ranks_prefill(run: RunningBatch, sched: SchedulerConfig, model: Any, ranks: int, per_rank: int) -> tuple:
    """:func:`plan_prefill` under attention DP where each rank schedules its own iterations and
    runs its prompts before its decodes (SGLang's ``--enable-dp-attention``: every rank's scheduler
    builds a prefill batch of its own waiting prompts if it has any, else a decode batch; the ranks'
    batches then run as one forward, their token counts gathered for the experts' all-to-all,
    sglang ``managers/scheduler_dp_attn_mixin.py``). Requests are dealt to the ranks in arrival
    order, round robin (its data-parallel controller's default ``load_balance_method``): a
    request's rank is its index modulo ``ranks``. Each rank takes its prompts first come first
    served within its share of the token budget (and the whole ``max_prefill_tokens``, which its
    scheduler reads undivided); the decodes of a rank that prefills wait, those of every other
    rank advance a token in the same iteration (which lasts as long as its busiest rank)."""
    chunked = sched.chunked_prefill
    prefilling = run.done < run.prompt
    rank = run.idx % ranks
    room = [float(per_rank)] * ranks
    soft = [prefill_allowance(sched, 0)] * ranks
    chunk = np.zeros(run.k)
    left = run.prompt - run.done
    for j in prefilling.nonzero()[0].tolist():
        r = int(rank[j])
        if room[r] <= 0 or soft[r] <= 0:
            continue
        lj = float(left[j])
        if chunked:
            take = min(lj, room[r])
        elif lj > room[r] and room[r] < per_rank:
            continue  # (without chunking a prompt past its rank's room waits for the next iteration)
        else:
            take = lj  # whole, alone on its rank where it is longer than the rank's share
        chunk[j] = take
        room[r] -= take
        soft[r] -= take
    runs_prefill = chunk > 0
    decoding_mask = ~prefilling & ~np.isin(rank, np.unique(rank[runs_prefill]))
    n_dec = int(np.count_nonzero(decoding_mask))
    finishing_prefill = runs_prefill & (run.done + chunk >= run.prompt)
    n_fin = int(np.count_nonzero(finishing_prefill))
    elapsed = model.time(decode_context=run.cached[decoding_mask], prefill_context=run.done[runs_prefill],
                         prefill_tokens=chunk[runs_prefill], logits=float(n_dec + n_fin))
    return elapsed, chunk, decoding_mask, n_dec, finishing_prefill, n_fin, None


def plan_prefill_sums(run: SmallBatch, sched: SchedulerConfig, model: Any) -> tuple:
    """:func:`plan_prefill` of a whole-token batch with plain floats (see the module's notes);
    without the masks (None), and what it knows beyond that: the tokens each slot emits (one
    where it decodes or finishes its prompt), the requests that finish their prompt, the tokens
    prefilled, whether a request reaches its output length, and the KV tokens held after it."""
    chunked = sched.chunked_prefill
    mixed = sched.mixed_prefill
    budget_max = sched.max_num_batched_tokens
    done, gen, base, prompt, osl = run.rows()
    n_dec = sum(map(ge, done, prompt)) if mixed else 0  # (an unmixed prefill iteration runs no decodes)
    budget = budget_max - n_dec
    soft = prefill_allowance(sched, n_dec)
    # per slot, in one pass: its chunk (first come first served within the budget), its tokens
    # emitted (a decode, or the first token after its prompt), its sums
    idx = run.idx
    chunk, emits, prompted, ends, held = [], [], [], False, 0.0
    decode_total = p = pairs = reads = 0.0
    n_prefill = 0
    open_ = True  # the budget still takes prompts
    for d, g, b, pj, o, i in zip(done, gen, base, prompt, osl, idx):
        q = e = 0.0
        if d >= pj:
            if mixed:
                decode_total += d + g - b
                e = 1.0
        elif open_:
            if budget <= 0 or soft <= 0:
                open_ = False
            else:
                lj = pj - d
                if chunked:
                    q = float(min(lj, budget))
                elif lj > budget and budget < budget_max:
                    open_ = False
                else:
                    q = float(lj)  # without chunking a prompt is prefilled whole
                budget -= q
                soft -= q
                if q > 0:
                    p += q
                    pairs += q * d + q * (q + 1.0) / 2.0
                    reads += d + q
                    n_prefill += 1
                    if d + q >= pj:
                        prompted.append(i)
                        e = 1.0
        chunk.append(q)
        emits.append(e)
        ends = ends or g + e >= o
        held += d + q + g + e - b
    n_fin = len(prompted)
    elapsed = model.time_sums(n_dec, decode_total, p, pairs, reads, n_prefill, float(n_dec + n_fin))
    return elapsed, chunk, None, n_dec, None, n_fin, (emits, prompted, p, ends, held)


def plan_decode_sums(e: Any) -> tuple:
    """The decode stretch :meth:`~.engine.Engine._plan_decode` plans for engine ``e``'s small
    whole-token batch (full attention, no attention-DP ranks) from plain-float sums: the KV
    tokens held, the fewest tokens a request has left to emit, and the KV blocks held as
    :func:`~.batch.stretch_limits` counts them (at least one each), with its limits.

    The blocks are counted only when the pool could stop the stretch: each request holds at
    most ``c / block + 2`` blocks of its ``c`` tokens (at least one token), so free tokens
    of at least ``k n`` plus a block under that bound let ``k`` steps of ``n`` requests run
    as the exact count would."""
    run, block, sched = e.run, e.block, e.sched
    total, least, n = run.held_tokens(), min(map(sub, run.osl, run.gen)), run.k
    t0, t1 = e.model.time_decode_sum(n, total)
    k = int(least) if least > 1.0 else 1
    order, pos = e.order, e.pos
    if pos < len(order) and n < sched.max_num_seqs and not e.waiting:  # an arrival that could be admitted
        steps = math.ceil((e.visible[order[pos]] - e.now) / t0)
        if steps < k:
            k = steps if steps > 1 else 1
    k = min(k, e.until_timeout(t0))  # a waiting request's timeout due
    if not sched.reserve_output:  # KV growth: the tokens free for the requests to grow into
        room = e.capacity_blocks - e.reuse.shared_adjustment
        if (room - total / block - 2 * n) * block < k * n + block:
            held = float(blocks_held(run.done, run.gen, run.base, block))
            free_tokens = (room - held) * block
            k = min(k, max(1, int(free_tokens // max(n, 1)) + 1))
    return ("decode", t0, t1, *PlainDecoding.steps(k, t0, t1), least, total)


def busiest_rank(tokens: np.ndarray, ranks: int) -> np.ndarray:
    """Which of an iteration's prompts the busiest of ``ranks`` attention-DP ranks prefills: the
    prompts dealt largest first, each to the least loaded rank (the engines balance ranks by
    tokens); indices into ``tokens``."""
    order = np.argsort(-tokens, kind="stable")
    if len(order) <= ranks:
        return order[:1]
    loads, held = [0.0] * ranks, [[] for _ in range(ranks)]
    for j in order.tolist():
        k = loads.index(min(loads))
        loads[k] += float(tokens[j])
        held[k].append(j)
    return np.asarray(held[loads.index(max(loads))], int)

