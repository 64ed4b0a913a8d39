"""Under attention DP each rank chunks its own prompts within its share of the iteration's token
budget (SGLang's ``--enable-dp-attention`` sets each rank's ``chunked_prefill_size // dp_size``;
TensorRT-LLM's and vLLM's budgets are a rank's already). Before, one long prompt took the
whole replica's budget on one rank while the others idled: SGLang's attention-DP DeepSeek
prefilled 8,000-token prompts at 1.6 requests/s where its TP8 replica ran 4.2."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

import inferlab
from inferlab.engines.scheduler import SchedulerConfig
from inferlab.serving.batch import RunningBatch
from inferlab.serving.iteration import plan_prefill


def _chunks(groups: float) -> list[float]:
    run = RunningBatch(4)
    for i in range(3):
        run.add(i, 0.0, 8000.0, 10.0)
    sched = SchedulerConfig(max_num_batched_tokens=16384, chunked_prefill=True, mixed_prefill=True)
    model = SimpleNamespace(groups=int(groups), time=lambda **kw: 0.0)
    return plan_prefill(run, sched, model)[1].tolist()


def test_a_ranks_chunk_is_its_share_of_the_budget():
    # one group: first come first served within 16,384 tokens (8,000 + 8,000 + 384)
    assert _chunks(1.0) == [8000.0, 8000.0, 384.0]
    # eight ranks: 16,384 / 8 = 2,048 tokens a rank, each prompt on its own
    assert _chunks(8.0) == [2048.0, 2048.0, 2048.0]
    # three ranks: a whole number of tokens, 16,384 // 3 = 5,461 (SGLang divides the chunk size so)
    assert _chunks(3.0) == [5461.0, 5461.0, 5461.0]


def test_sglang_attention_dp_prefills_long_prompts_no_slower_than_its_tp_replica():
    """The same eight H200s, DeepSeek-V3 FP8, 64 prompts of 8,000 tokens queued at once: with each
    rank prefilling its own prompts, the attention-DP replica is not slower than the TP8 one
    (its ranks' attention runs in parallel; the experts see the same tokens)."""
    rates = []
    for adp in (False, True):
        r = inferlab.serve("deepseek-v3", "h200-sxm", tp=8, ep=8, attention_dp=adp, precision="fp8", engine="sglang",
                           isl=8000, osl=2, offline=True, num_requests=64).trace
        rates.append(64 / (np.nanmax(r.finish) - np.nanmin(r.arrival)))
    assert rates[1] >= rates[0]


def _whole(groups: int, prompts: list[float], decoding: int = 0) -> list[float]:
    run = RunningBatch(len(prompts) + decoding)
    for i in range(decoding):
        run.add(i, 1.0, 100.0, 10.0, done=100.0)
    for i, p in enumerate(prompts):
        run.add(decoding + i, 0.0, p, 10.0)
    per_rank = 8192
    sched = SchedulerConfig(max_num_batched_tokens=per_rank * groups, chunked_prefill=False, mixed_prefill=True)
    model = SimpleNamespace(groups=groups, time=lambda **kw: 0.0)
    return plan_prefill(run, sched, model)[1].tolist()[decoding:]


def test_without_chunking_each_rank_takes_whole_prompts_within_its_own_budget():
    # eight ranks of 8,192 tokens (65,536 a replica): ten 6,000-token prompts fit the replica's
    # budget (60,000) but a rank holds one (two are 12,000 > 8,192): eight go, one a rank
    assert _whole(8, [6000.0] * 10) == [6000.0] * 8 + [0.0] * 2
    # 4,000-token prompts: two a rank (8,000 <= 8,192), sixteen of twenty
    assert _whole(8, [4000.0] * 20) == [4000.0] * 16 + [0.0] * 4
    # 64 decodes take 8 tokens of each rank's budget: 8,184 left, two 4,092-token prompts a rank fit,
    # two of 4,093 do not
    assert _whole(8, [4092.0] * 16, decoding=64) == [4092.0] * 16
    assert _whole(8, [4093.0] * 16, decoding=64) == [4093.0] * 8 + [0.0] * 8
    # a prompt longer than a rank's budget (an engine that does not refuse it) goes alone
    assert _whole(8, [9000.0, 9000.0]) == [9000.0, 0.0]
    # one group: the replica's budget, first come first served
    assert _whole(1, [6000.0, 2000.0, 500.0]) == [6000.0, 2000.0, 0.0]


def test_the_busiest_rank_is_timed_from_prompts_balanced_by_tokens():
    # 8 ranks, one 8,000-token prompt and fourteen of 4,000: dealt largest first to the least
    # loaded rank, every rank holds 8,000 tokens (the 8,000 alone, or two of 4,000); dealing every
    # eighth of the sorted prompts to one rank had put 8,000 + 4,000 = 12,000 on it, past its budget
    from inferlab.serving.iteration import busiest_rank

    tokens = np.array([4000.0] * 7 + [8000.0] + [4000.0] * 7)
    assert float(tokens[busiest_rank(tokens, 8)].sum()) == 8000.0
    # ten equal prompts on eight ranks: two share a rank
    assert len(busiest_rank(np.full(10, 6000.0), 8)) == 2
    # no more prompts than ranks: the largest alone
    assert busiest_rank(np.array([100.0, 900.0, 300.0]), 8).tolist() == [1]
