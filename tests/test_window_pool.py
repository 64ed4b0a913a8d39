"""A windowed-attention model's KV pool as each engine keeps it (``engines/window_pool.py``): the
serving simulation's pool agrees with the static estimate's, and a closed loop runs every
client whose sequences fit.

Hand figures (gpt-oss-120b, config.json): 36 layers alternating ``sliding_attention`` (window
128) and ``full_attention``, 8 KV heads of 64: 8 x 64 x 2 x 2 B = 2,048 B a token a layer in
BF16, 36,864 B a token over the 18 layers of each kind. A sequence of 9,216 tokens holds
18 x 2,048 x 9,216 + 18 x 2,048 x 128 = 344,457,216 B where one pool frees what leaves a window
(vLLM, TensorRT-LLM), and 9,216 x 36,864 x (1 + 0.8) = 611,529,523 B in SGLang's two pools at
``--swa-full-tokens-ratio`` 0.8 (the windowed layers' pool holding 0.8 of a token for each
token of the full layers' pool). Llama 4 Scout: 36 layers of ``chunked(8192)`` attention and 12
full ones.
"""

from __future__ import annotations

import numpy as np
import pytest

import inferlab
from inferlab import load_model
from inferlab.engines.scheduler import ENGINE_SCHEDULERS, SchedulerConfig
from inferlab.engines.window_pool import pool_token_share, window_tokens
from inferlab.errors import SpecError
from inferlab.inputs.resolve import deployment
from inferlab.serving.replica import kv_capacity_tokens, state_tokens


def test_shares_and_window_tokens_by_hand():
    oss, scout, llama = load_model("gpt-oss-120b"), load_model("llama-4-scout"), load_model("llama-3.1-8b")
    vllm, sglang, trt = ENGINE_SCHEDULERS["vllm"], ENGINE_SCHEDULERS["sglang"], ENGINE_SCHEDULERS["trtllm-pytorch"]
    assert oss.kv_share_held_whole() == 0.5 and scout.kv_share_held_whole() == 0.25
    assert scout.kv_share_held_whole(("sliding",)) == 1.0  # chunked layers kept whole
    assert llama.kv_share_held_whole() == 1.0
    assert oss.kv_cache_bytes(9216.0) == pytest.approx(344_457_216)
    # one pool: the windowed layers' tokens in tokens of the full layers (18 x 128 / 18)
    assert window_tokens(oss, vllm) == pytest.approx(128.0)
    assert window_tokens(oss, vllm, context=100.0) == pytest.approx(100.0)
    assert window_tokens(oss, trt) == pytest.approx(128.0)
    assert pool_token_share(oss, vllm) == 0.5
    # vLLM and TensorRT-LLM keep Llama 4's chunked layers whole: no saving, every layer a token
    for sched in (vllm, trt):
        assert window_tokens(scout, sched) == 0.0 and pool_token_share(scout, sched) == 1.0
    # an engine that frees chunks (generic): 36 x 8,192 / 12 at their most, 36 x 1,000 / 12 at 1,000 tokens
    generic = ENGINE_SCHEDULERS["generic"]
    assert window_tokens(scout, generic) == pytest.approx(36 * 8192 / 12)
    assert window_tokens(scout, generic, context=1000.0) == pytest.approx(3000.0)
    # SGLang's pool of their own: 0.8 of a windowed token for each full one; nothing per sequence
    assert window_tokens(oss, sglang) == 0.0
    assert pool_token_share(oss, sglang) == pytest.approx(0.5 + 0.8 * 0.5)
    assert pool_token_share(scout, sglang) == pytest.approx(0.25 + 0.8 * 0.75)
    assert window_tokens(llama, vllm) == 0.0 and pool_token_share(llama, vllm) == 1.0


def test_a_model_whose_every_layer_is_windowed_counts_a_token_at_the_requests_length():
    """Mistral-7B (v0.1): 32 layers of 4,096-token sliding windows. At 16,384 tokens a sequence
    holds 4,096 of them in every layer: a pool token is a quarter of every layer's, so the pool
    holds four times the tokens it would count with every layer at every token; unknown lengths
    count every layer."""
    mistral = load_model("mistral-7b")
    vllm = ENGINE_SCHEDULERS["vllm"]
    assert mistral.kv_share_held_whole() == 0.0
    assert pool_token_share(mistral, vllm, context=16384.0) == pytest.approx(0.25)
    assert pool_token_share(mistral, vllm, context=2048.0) == pytest.approx(1.0)
    assert pool_token_share(mistral, vllm) == 1.0 and window_tokens(mistral, vllm) == 0.0
    dep = deployment("mistral-7b", "h100-sxm", engine="vllm")
    assert kv_capacity_tokens(dep, vllm, context=16384.0) == pytest.approx(4.0 * kv_capacity_tokens(dep, vllm))


@pytest.mark.parametrize("model, engine, isl, osl, fits", [
    ("gpt-oss-120b", "trtllm-pytorch", 1024, 8192, 327), ("gpt-oss-120b", "vllm", 1024, 8192, 318),
    ("gpt-oss-120b", "sglang", 1024, 8192, 162), ("mistral-7b", "vllm", 4096, 12288, None),
    ("llama-4-scout", "vllm", 1024, 1024, None),
])
def test_the_simulations_pool_holds_what_the_estimate_says(model, engine, isl, osl, fits):
    """Sequences of ``isl + osl`` tokens on one GPU: the serving pool's tokens over a sequence's
    (its own and what its windowed layers hold beside them) is the static memory plan's count,
    to one sequence. For gpt-oss-120b on one B200 that count is the one by hand: 112.7 GB of
    pool under TensorRT-LLM (90% of what the weights leave) over 344.5 MB a sequence is 327;
    vLLM's 0.92 of all memory holds 318; SGLang's 611.5 MB a sequence, 162."""
    hw = "b200" if model == "gpt-oss-120b" else "h200-sxm" if model == "llama-4-scout" else "h100-sxm"
    tp = 4 if model == "llama-4-scout" else 1
    dep = deployment(model, hw, engine=engine, tp=tp)
    sched = ENGINE_SCHEDULERS[engine]
    length = float(isl + osl)
    served = kv_capacity_tokens(dep, sched, context=length) / (length + state_tokens(dep, sched, context=length))
    planned = float(inferlab.estimate(model, hw, engine=engine, tp=tp, isl=isl, osl=osl,
                                      batch_size=1).memory.max_sequences)
    assert served == pytest.approx(planned, abs=1.0)
    if fits is not None:
        assert int(served) == fits


def test_sglangs_window_pool_holds_fewer_long_sequences_than_one_pool():
    """At 9,216 tokens a sequence takes 611.6 MB in SGLang's two pools against 344.5 MB in one
    (by hand above): 1.776x, so SGLang's pool holds 1 / 1.776 of vLLM's sequences for the same
    memory; the same B200 budget in both (the vLLM share set to SGLang's)."""
    sglang = deployment("gpt-oss-120b", "b200", engine="sglang")
    one = ENGINE_SCHEDULERS["sglang"].__class__(**{**ENGINE_SCHEDULERS["sglang"].__dict__, "window_pool_ratio": None})
    two_pools = kv_capacity_tokens(sglang, ENGINE_SCHEDULERS["sglang"]) / 9216
    one_pool = kv_capacity_tokens(sglang, one) / (9216 + state_tokens(sglang, one, context=9216.0))
    assert one_pool / two_pools == pytest.approx(611_529_523.2 / 344_457_216, rel=1e-6)


def test_a_closed_loop_runs_every_client_the_pool_holds():
    """256 clients of 1,024 + 8,192 tokens on one B200 under TensorRT-LLM: 327 such sequences fit
    (above), so every client runs from the first round, none waiting for a whole request to end
    (with every layer counted at every token only 166 fit, and the first round's last prompts
    waited about 150 s: a request's 8,192 tokens at some 18 ms each)."""
    r = inferlab.serve(model="gpt-oss-120b", hardware="b200", engine="trtllm-pytorch", isl=1024, osl=8192,
                       concurrency=256, num_requests=256)
    assert float(np.max(r.ttft_s)) < 10.0


def test_a_window_pool_ratio_is_checked():
    with pytest.raises(SpecError, match="swa-full-tokens-ratio"):
        SchedulerConfig(window_pool_ratio=1.5)
    with pytest.raises(SpecError, match="window_pool_ratio"):
        SchedulerConfig(window_pool_ratio=0)


def test_explain_says_where_sglangs_windowed_layers_are_kept():
    sglang = inferlab.estimate("gpt-oss-120b", "b200", engine="sglang", isl=1024, osl=8192, batch_size=8).explain()
    vllm = inferlab.estimate("gpt-oss-120b", "b200", engine="vllm", isl=1024, osl=8192, batch_size=8).explain()
    assert "--swa-full-tokens-ratio" in sglang and "--swa-full-tokens-ratio" not in vllm
    # vLLM's sequences hold 37.4 kB a token at 9,216 tokens (344,457,216 B / 9,216), SGLang's 66.4 (73,728 B x 0.9)
    assert "37.4 kB/token at 9,216 tokens" in vllm and "66.4 kB/token at 9,216 tokens" in sglang


def test_sglang_keeps_gemmas_windowed_layers_whole():
    """SGLang turns its windowed pool off for Gemma 2 and 3 ("Disable hybrid SWA memory for
    Gemma3ForCausalLM as it is not yet supported", its server log): Gemma 3 27B's 52 sliding
    layers (window 1,024) keep every token beside its 10 full ones. A token of one layer in
    BF16 is 2 x 16 KV heads x 128 x 2 B = 8,192 B, so at 32,768 tokens a sequence holds
    62 x 8,192 x 32,768 = 16,642,998,272 B under SGLang and 10 x 8,192 x 32,768 +
    52 x 8,192 x 1,024 = 3,120,562,176 B where the sliding windows are freed (vLLM,
    TensorRT-LLM): 5.3 times fewer long sequences on SGLang."""
    from inferlab.engines.window_pool import held_windows

    gemma, sglang = load_model("gemma-3-27b"), ENGINE_SCHEDULERS["sglang"]
    assert held_windows(gemma, sglang) == ((), None)
    assert held_windows(load_model("gpt-oss-120b"), sglang) == (("sliding", "chunked"), 0.8)
    assert pool_token_share(gemma, sglang, context=32768.0) == 1.0 and window_tokens(gemma, sglang) == 0.0
    per_sequence = {}
    for engine in ("sglang", "vllm", "trtllm-pytorch"):
        est = inferlab.estimate("gemma-3-27b", "h200-sxm", engine=engine, isl=30720, osl=2048, batch_size=1)
        per_sequence[engine] = float(est.memory.kv_per_sequence)
        dep, sched = deployment("gemma-3-27b", "h200-sxm", engine=engine), ENGINE_SCHEDULERS[engine]
        served = kv_capacity_tokens(dep, sched, context=32768.0) / (32768.0 + state_tokens(dep, sched, context=32768.0))
        assert served == pytest.approx(float(est.memory.max_sequences), abs=1.0)
    assert per_sequence["sglang"] == pytest.approx(16_642_998_272)
    assert per_sequence["vllm"] == pytest.approx(3_120_562_176) == per_sequence["trtllm-pytorch"]
    explained = inferlab.estimate("gemma-3-27b", "h200-sxm", engine="sglang", isl=30720, osl=2048,
                                  batch_size=1).explain()
    assert "--swa-full-tokens-ratio" not in explained
    assert "every layer at every token: sglang keeps the windowed layers of gemma3_text models whole" in explained
    vllm = inferlab.estimate("gpt-oss-120b", "b200", engine="vllm", isl=1024, osl=8192, batch_size=1, window_kv=[])
    assert "every layer at every token: window_kv empty" in vllm.explain()


def test_a_disaggregated_prompt_sends_the_kv_its_decode_engine_keeps():
    """A 30,000-token Gemma 3 27B prompt crosses to the decode pool as the decode engine keeps it:
    62 layers x 8,192 B x 30,000 = 15,237,120,000 B under SGLang (windows kept whole), and
    10 x 8,192 x 30,000 + 52 x 8,192 x 1,024 = 2,893,807,616 B under vLLM (the sliding layers'
    last 1,024 tokens)."""
    sent = {engine: float(inferlab.estimate("gemma-3-27b", disaggregation="prefill=h200x1,decode=h200x1",
                                            engine=engine, isl=30000, osl=500, batch_size=1).transfer.bytes)
            for engine in ("sglang", "vllm")}
    assert sent == {"sglang": pytest.approx(15_237_120_000), "vllm": pytest.approx(2_893_807_616)}


def test_sglangs_windowed_pool_holds_its_own_sequences():
    """The windowed layers' pool of its own (SGLang) holds ratio x the full pool's tokens, a
    running sequence past its window 128 + 16 (a page) of them there (SGLang frees the rest a
    window and a page behind): a tiny ratio caps the sequences, it does not free memory for more.
    At 1e-4 of gpt-oss-20b's pool on an H100 about two 8,128-token sequences' windows fit, so one
    runs; at the default 0.8 each needs 144 of 0.8 x 8,128 tokens: not binding."""
    from inferlab.core.memory import window_pool_need

    assert window_pool_need(load_model("gpt-oss-20b"), ("sliding",), 16) == 128 + 16

    def largest(ratio):
        with pytest.raises(inferlab.InfeasibleError) as exc:
            inferlab.estimate("gpt-oss-20b", "h100-sxm", engine="sglang", window_pool_ratio=ratio, batch_size=4000,
                              isl=8000)
        return int(str(exc.value).split("the largest batch that fits is ")[1].split()[0])

    tiny, small, default, whole = largest(1e-4), largest(3e-3), largest(0.8), largest(1.0)
    assert tiny == 1 and small < default  # capped by the windowed pool, not freed by it
    # where the windowed pool does not bind, the full layers' pool sets it: bytes split 1 : ratio
    # (half the KV bytes in windowed layers), so 0.8 holds (1 + 1) / (1 + 0.8) of ratio 1's sequences
    assert default == pytest.approx(whole * 2.0 / 1.8, abs=1)
    # serving: one request runs at a time, so no two decode out of the same windows (their first
    # token to last token spans are disjoint), where the default ratio runs the four clients together
    def spans(**kw):
        t = inferlab.serve("gpt-oss-20b", "h100-sxm", engine="sglang", concurrency=4, isl=8000, osl=16,
                           num_requests=8, **kw).trace
        order = np.argsort(t.first_token)
        return t.first_token[order], t.finish[order]

    first, finish = spans(window_pool_ratio=1e-4)
    assert np.all(first[1:] >= finish[:-1] - 1e-9)
    first, finish = spans()
    assert np.any(first[1:] < finish[:-1])
