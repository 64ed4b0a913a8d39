"""A static batch on an engine that admits on the prompt (vLLM, SGLang, LMDeploy) vs one that
reserves the whole output (TensorRT-LLM's guaranteed-no-evict policy)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import example, given, settings, strategies as st

import inferlab


def _pair(engine: str, osl: int):
    # Llama-3.1-8B in BF16 on one H100 (80 GB, 16 GB of weights): 128 kB of KV per token
    # (32 layers x 2 x 8 KV heads x 128 x 2 B), so 64 prompts of 2048 tokens need 17 GB while
    # 64 x (2048 + 8192) tokens need 86 GB, more than the ~50 GB pool.
    return inferlab.estimate("llama-3.1-8b", "h100-sxm", precision="bf16", isl=2048, osl=osl, batch_size=64,
                             engine=engine, waves=True)


@pytest.mark.parametrize("engine", ["vllm", "lmdeploy", "sglang"])
def test_prompt_admission_prefills_the_whole_batch_at_once(engine):
    """64 prompts of 2048 tokens (17 GB of KV) fit; with their 8192-token outputs (86 GB) they do not.
    An engine that admits on the prompt prefills all 32 in the first iterations, so each
    request's TTFT is the same as when the outputs are short enough for one wave."""
    long, short = _pair(engine, 8192), _pair(engine, 16)
    assert float(np.ravel(long.waves)[0]) > 1 and float(np.ravel(short.waves)[0]) == 1
    assert float(np.ravel(long.ttft_s)[0]) == pytest.approx(float(np.ravel(short.ttft_s)[0]), rel=1e-9)


def test_output_reservation_makes_later_waves_wait():
    """TensorRT-LLM reserves KV for the whole output on admission: the pool holds W requests of
    2048 + 8192 tokens, so 64 run as a full wave of W, then the other 64 - W, which wait the whole
    first wave. Mean TTFT = (W x TTFT(W) + (64 - W) x (wave(W) + TTFT(64 - W))) / 64, with each wave
    timed as a batch of its own; TPOT the requests' mean; the total both waves."""
    long, short = _pair("trtllm", 8192), _pair("trtllm", 16)
    assert float(np.ravel(long.waves)[0]) == 2
    w = float(np.ravel(long.wave_batch)[0])
    assert 16 < w < 48  # ~50 GB of pool at 1.34 GB a request (10,240 tokens x 128 kB + a block)
    one = lambda b: inferlab.estimate("llama-3.1-8b", "h100-sxm", precision="bf16", isl=2048, osl=8192,
                                      batch_size=int(b), engine="trtllm")
    first, rest = one(w), one(64 - w)
    at = lambda x: float(np.ravel(x)[0])
    expected = (w * at(first.ttft_s) + (64 - w) * (at(first.total_s) + at(rest.ttft_s))) / 64
    assert at(long.ttft_s) == pytest.approx(expected, rel=1e-9)
    assert at(long.ttft_s) > 5 * at(short.ttft_s)
    assert at(long.tpot_s) == pytest.approx((w * at(first.tpot_s) + (64 - w) * at(rest.tpot_s)) / 64, rel=1e-9)
    assert at(long.total_s) == pytest.approx(at(first.total_s) + at(rest.total_s), rel=1e-9)


@pytest.mark.parametrize("engine", ["trtllm", "vllm"])
def test_one_more_request_never_makes_the_batch_faster(engine):
    """Past a wave limit the extra requests form a last wave of their own: the full waves keep
    their batch, so one more request adds time and keeps the memory in use and the others' TPOT
    (the batch had been split evenly: 351 requests in waves of 117 decoded faster than 350 in
    waves of 175)."""
    kw = dict(tp=4, isl=1024, osl=1024, waves=True, engine=engine, max_num_seqs=175)
    runs = [inferlab.estimate("llama-3.1-70b", "h100-sxm", batch_size=b, **kw) for b in (349, 350, 351, 352, 526)]
    at = lambda x: float(np.ravel(x)[0])
    assert [at(e.waves) for e in runs] == [2, 2, 3, 3, 4]
    assert all(at(e.wave_batch) == 175 for e in runs)
    for a, b in zip(runs, runs[1:]):
        assert at(b.total_s) > at(a.total_s)
        assert at(b.ttft_s) > at(a.ttft_s)
        # TPOT is the requests' mean: the new ones may decode faster in a short last wave, but the
        # others keep theirs, so it falls at most to their share (350 of 351)
        assert at(b.tpot_s) >= at(a.tpot_s) * at(a.batch_size) / at(b.batch_size)
        assert at(b.memory.used) >= at(a.memory.used)


@settings(max_examples=40, deadline=None, derandomize=True)
@given(engine=st.sampled_from(["vllm", "sglang", "trtllm", "lmdeploy"]), gpu=st.sampled_from(["l40s", "h100-sxm"]),
       batch=st.integers(1, 1500), isl=st.integers(64, 28000), osl=st.integers(2, 2048),
       more=st.integers(1, 64), seqs=st.one_of(st.none(), st.integers(1, 512)))
@example(engine="vllm", gpu="l40s", batch=1000, isl=27392, osl=256, more=16, seqs=None)
@example(engine="vllm", gpu="h100-sxm", batch=1000, isl=19888, osl=512, more=8, seqs=None)
@example(engine="vllm", gpu="l40s", batch=391, isl=64, osl=428, more=5, seqs=None)
@example(engine="vllm", gpu="l40s", batch=103, isl=2369, osl=200, more=8, seqs=None)
def test_a_longer_prompt_or_one_more_request_never_answers_sooner(engine, gpu, batch, isl, osl, more, seqs):
    """In waves, a longer prompt (or output) and one more request each add work ahead of the
    requests that wait: mean TTFT and the total never fall by more than the hair a whole wave
    moves when it loses a sequence (a prompt admission sized by the prompt alone, spaced by a
    wave that holds fewer, had made a longer prompt answer 12% sooner). The hair: 391 requests
    as 378 + 13 (three 128-row tiles) on an L40S finish 0.15% before 390 + 1 (four); 103 as
    74 + 29 answer 0.004% before 75 + 28, the first wave ending a sequence sooner."""
    kw = dict(engine=engine, waves=True, max_num_seqs=seqs)
    at = lambda e: (float(np.ravel(e.ttft_s)[0]), float(np.ravel(e.total_s)[0]))
    base = at(inferlab.estimate("llama-3.1-8b", gpu, isl=isl, osl=osl, batch_size=batch, **kw))
    for other in (dict(isl=isl + more, osl=osl, batch_size=batch), dict(isl=isl, osl=osl + more, batch_size=batch),
                  dict(isl=isl, osl=osl, batch_size=batch + 1)):
        grown = at(inferlab.estimate("llama-3.1-8b", gpu, **other, **kw))
        assert grown[0] >= base[0] * (1 - 0.01) and grown[1] >= base[1] * (1 - 0.01), (other, base, grown)


def test_the_waves_flag_changes_nothing_where_the_sequence_limit_splits_a_batch_that_fits():
    """100 requests under --max-num-seqs 64 whose KV fits run 64 then 36 with or without
    waves=True (the flag is for a batch whose KV does not fit): mean TTFT = (64 TTFT(64) +
    36 (wave(64) + TTFT(36))) / 100, each group prefilled as a batch of its own."""
    kw = dict(engine="vllm", isl=2048, osl=256)
    plain, flagged = (inferlab.estimate("llama-3.1-8b", "h100-sxm", batch_size=100, max_num_seqs=64, waves=w, **kw)
                      for w in (False, True))
    first, rest = (inferlab.estimate("llama-3.1-8b", "h100-sxm", batch_size=n, **kw) for n in (64, 36))
    expected = (64 * float(first.ttft_s) + 36 * (float(first.total_s) + float(rest.ttft_s))) / 100
    assert float(plain.ttft_s) == pytest.approx(expected, rel=1e-9)
    assert float(flagged.ttft_s) == pytest.approx(expected, rel=1e-9)


def test_explain_names_what_splits_the_batch():
    # the sequence limit (64 of the 194 sequences the KV cache holds) vs a KV cache that holds 9
    limited = inferlab.estimate("llama-3.1-8b", "h100-sxm", engine="vllm", isl=2048, osl=256, batch_size=100,
                                max_num_seqs=64).explain()
    assert "sequence limit (max_num_seqs) runs the batch in 2 waves of 64" in limited
    assert "KV cache does not fit" not in limited
    full = inferlab.estimate("llama-3.1-70b", "l40s", tp=4, batch_size=512, isl=4096, osl=4096, waves=True).explain()
    assert "the batch's KV cache does not fit" in full and "sequence limit" not in full


def test_a_batch_in_waves_says_its_ttft_and_tpot_are_means_over_the_waves():
    """Llama-3.1-70B FP8 on four H100s holds about 1,200 sequences of 1,152 tokens: 4,096 run in 4
    waves. Each wave decodes at most that many, so the TPOT mean is that of smaller batches than
    4,096; the note says to compare by throughput (a batch of 1 runs in one wave: no note)."""
    import inferlab

    est = inferlab.estimate("llama-3.1-70b", "h100-sxm", tp=4, precision="fp8", batch_size=[1, 4096], isl=1024,
                            osl=128, waves=True)
    assert [float(w) for w in np.ravel(est.waves)] == [1.0, 4.0]
    (line,) = [n for n in est.notes if n.startswith("waves:")]
    assert line.startswith("waves: a batch of 4,096 runs in 4 waves of up to 1,")
    assert "compare deployments by tok/s or total time" in line
    one = inferlab.estimate("llama-3.1-70b", "h100-sxm", tp=4, precision="fp8", batch_size=1, isl=1024, osl=128)
    assert not any(n.startswith("waves:") for n in one.notes)
