"""Speculative decoding: acceptance arithmetic by hand, step costs, break-even, parsing."""

from __future__ import annotations

from functools import lru_cache

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from inferlab import load_model
from inferlab.techniques.step import decode, mean_decode_step_s
from inferlab.errors import SpecError
from inferlab.inputs.resolve import deployment
from inferlab.specs.model import ModelSpec
from inferlab.techniques.speculative import (
    PRESETS,
    SpeculativeConfig,
    acceptance_from_length,
    break_even_batch,
    mean_speculative_tpot_s,
    speculative_decode,
    tokens_per_step,
)

H100_BW = 3.35e12  # B/s, NVIDIA H100 SXM datasheet


@lru_cache(maxsize=None)
def _dep(model: str, hw: str, tp: int = 1, precision: str = "bf16", profile: str = "default", engine: str = "vllm"):
    return deployment(model, hw, tp=tp, precision=precision, profile=profile, engine=engine)


# --- acceptance arithmetic ---------------------------------------------------------------------------

def test_tokens_per_step_by_hand():
    """E[tokens] = 1 + a + a^2 + ... + a^k.

    a = 0: only the target's own token -> 1.
    a -> 1: every draft survives -> k + 1 (4 drafts: 5 tokens).
    a = 0.5, k = 3: 1 + 0.5 + 0.25 + 0.125 = 1.875 = (1 - 0.5^4) / (1 - 0.5) = 0.9375 / 0.5.
    a = 0.8, k = 4: (1 - 0.8^5) / 0.2 = (1 - 0.32768) / 0.2 = 3.3616.
    """
    assert tokens_per_step(0.0, 4) == 1.0
    assert tokens_per_step(1.0, 4) == 5.0
    assert tokens_per_step(1.0 - 1e-12, 4) == pytest.approx(5.0, rel=1e-9)
    assert tokens_per_step(0.5, 3) == pytest.approx(1.875, rel=1e-12)
    assert tokens_per_step(0.8, 4) == pytest.approx(3.3616, rel=1e-12)
    np.testing.assert_allclose(tokens_per_step(np.array([0.0, 0.5]), 1), [1.0, 1.5])


@pytest.mark.parametrize("k", [1, 2, 4, 7])
@pytest.mark.parametrize("a", [0.0, 0.1, 0.5, 0.85, 0.99])
def test_acceptance_length_round_trip(a, k):
    assert acceptance_from_length(float(tokens_per_step(a, k)), k) == pytest.approx(a, abs=1e-9)


def test_acceptance_from_length_closed_form_and_ends():
    """k = 1: L = 1 + a, so the DeepSeek-V3 figure L = 1.85 is a = 0.85; L = 1 is a = 0, L = k + 1 is a = 1."""
    assert acceptance_from_length(1.85, 1) == pytest.approx(0.85, abs=1e-12)
    assert acceptance_from_length(1.0, 4) == 0.0
    assert acceptance_from_length(5.0, 4) == 1.0
    spec = SpeculativeConfig("eagle", k=7, acceptance_length=2.77)
    assert spec.tokens_per_step == 2.77
    assert float(tokens_per_step(spec.acceptance_rate, 7)) == pytest.approx(2.77, rel=1e-10)


# --- step costs ----------------------------------------------------------------------------------------

def test_medusa_pass_by_hand():
    """Llama 3.1 8B, BF16, one H100, speed of light, batch 1, four heads.

    Each head: residual block 4096 x 4096 x 2 B = 33,554,432 B of weights, reads 4,096 x 2 B and
    writes 8,192 B; SiLU + residual reads 2 x 8,192 B and writes 8,192 B; its LM head
    128,256 x 4,096 x 2 B = 1,050,673,152 B, reads 8,192 B and writes 128,256 x 2 B = 256,512 B.
    Every op is memory-bound at one row: 4 x 1,084,533,248 B / 3.35e12 B/s = 1.2949 ms.
    """
    dep = _dep("llama-3.1-8b", "h100-sxm", profile="roofline")
    head = (33_554_432 + 8_192 + 8_192) + (2 * 8_192 + 8_192) + (1_050_673_152 + 8_192 + 256_512)
    assert head == 1_084_533_248
    step = speculative_decode(dep, 1.0, 1024.0, SpeculativeConfig("medusa", k=4, acceptance=0.6))
    (name, draft), (last, _) = step.passes
    assert (name, last) == ("draft_pass_1", "verify")
    assert float(draft.time_s) == pytest.approx(4 * head / H100_BW, rel=1e-9)


def test_verify_step_by_hand():
    """Verify of k = 3 drafts: one target step over 4 tokens (Llama 3.1 8B, BF16, roofline, batch 1).

    Still memory-bound at 4 rows, so every weight byte is read once, as in a decode step:
    layers 13,958,643,712 B + LM head on all 4 tokens 1,050,673,152 B + 4 embedding rows 32,768 B;
    KV read 32 layers x 1,028 tokens (1,024 cached + 4 new) x 4,096 B = 134,742,016 B, written
    32 x 4 x 4,096 B = 524,288 B -> / 3.35e12 B/s = 4.5208 ms. The activations the GEMMs,
    norms and attention read and write for 4 tokens add 43.6 MB (0.29%; tolerance 0.5%).
    """
    dep = _dep("llama-3.1-8b", "h100-sxm", profile="roofline")
    step = speculative_decode(dep, 1.0, 1024.0, SpeculativeConfig("ngram", k=3, acceptance=0.5))
    expected = (13_958_643_712 + 1_050_673_152 + 32_768 + 134_742_016 + 524_288) / H100_BW
    assert step.drafts == ()
    assert float(step.verify.time_s) == pytest.approx(expected, rel=5e-3)
    assert float(step.verify.time_s) > expected
    assert float(step.time_s) == float(step.verify.time_s)  # n-gram lookup: no GPU work, host_s = 0
    assert float(step.tpot_s) == pytest.approx(float(step.time_s) / 1.875)


CASES = {
    "mtp": (("deepseek-v3", "b200", 8, "fp8"), "mtp:k=1,length=1.85"),
    "eagle": (("llama-3.1-8b", "h100-sxm", 1, "bf16"), "eagle:k=4,accept=0.7"),
    "draft": (("llama-3.1-70b", "h100-sxm", 4, "fp8"), "draft:model=llama-3.1-8b,k=4,accept=0.7"),
    "medusa": (("llama-3.1-8b", "h100-sxm", 1, "bf16"), "medusa:k=3,accept=0.6"),
    "ngram": (("llama-3.1-8b", "h100-sxm", 1, "bf16"), "ngram:k=4,accept=0.5"),
}


@pytest.mark.parametrize("method", CASES)
def test_every_method_runs_on_a_catalog_model_and_pays_at_batch_one(method):
    (model, hw, tp, precision), text = CASES[method]
    dep, spec = _dep(model, hw, tp, precision), SpeculativeConfig.parse(text)
    batch, context = np.array([1.0, 64.0]), np.array([[1024.0], [4096.0]])
    step = speculative_decode(dep, batch, context, spec)
    plain = decode(dep, batch, context).time_s
    assert step.time_s.shape == (2, 2)
    passes = dict(step.passes)
    n_drafts = {"medusa": 1, "ngram": 0}.get(method, spec.k)
    assert list(passes) == [f"draft_pass_{i + 1}" for i in range(n_drafts)] + ["verify"]
    np.testing.assert_allclose(step.time_s, step.verify.time_s + step.draft_s)
    assert np.all(step.verify.time_s >= plain)  # k + 1 tokens per sequence cost at least one
    assert np.all(step.tpot_s[:, 0] < plain[:, 0])  # batch 1 is memory-bound: speculation pays


def test_draft_model_that_does_not_divide_tp_runs_at_tp_one():
    """A 12-head draft cannot split over tp = 8: it runs whole on one GPU, and says so."""
    base = load_model("llama-3.1-8b")
    small = ModelSpec.model_validate({**base.model_dump(), "id": "tiny-draft", "num_attention_heads": 12,
                                      "num_key_value_heads": 4, "hidden_size": 1536})
    dep = _dep("llama-3.1-70b", "h100-sxm", 8, "fp8")
    step = speculative_decode(dep, 1.0, 1024.0, SpeculativeConfig("draft", k=2, acceptance=0.6, draft_model=small))
    assert any("tp=1" in note for note in step.notes)
    assert not any(op.kind == "collective" for op in step.drafts[0].ops)


def test_config_rejects_what_is_not_a_number():
    with pytest.raises(SpecError, match="acceptance must be a number, got '0.7'"):
        SpeculativeConfig("eagle", k=4, acceptance="0.7")  # type: ignore[arg-type]
    with pytest.raises(SpecError, match="draft length k must be an integer >= 1, got 2.0"):
        SpeculativeConfig("eagle", k=2.0, acceptance=0.7)  # type: ignore[arg-type]


def test_mtp_needs_an_mtp_module():
    with pytest.raises(SpecError, match="num_mtp_layers=0"):
        speculative_decode(_dep("llama-3.1-8b", "h100-sxm"), 1.0, 1024.0, SpeculativeConfig.preset("mtp-deepseek-v3"))


@settings(max_examples=25, deadline=None)
@given(method=st.sampled_from(["eagle", "medusa", "ngram", "draft"]), k=st.integers(1, 8),
       batch=st.integers(1, 4096), context=st.integers(1, 32768))
def test_acceptance_zero_never_helps(method, k, batch, context):
    """a = 0: one token per step, and a step costs at least a plain decode step."""
    extra = {"draft_model": "llama-3.1-8b"} if method == "draft" else {}
    dep = _dep("llama-3.1-70b", "h100-sxm", 4, "fp8") if method == "draft" else _dep("llama-3.1-8b", "h100-sxm")
    spec = SpeculativeConfig(method, k=k, acceptance=0.0, **extra)
    step = speculative_decode(dep, float(batch), float(context), spec)
    assert step.tokens_per_step == 1.0
    assert float(step.tpot_s) >= float(decode(dep, np.array(float(batch)), np.array(float(context))).time_s)
    mean = mean_speculative_tpot_s(dep, batch, context, 64, spec)
    assert float(mean) >= float(mean_decode_step_s(dep, batch, context, 64))


def test_speculation_stops_paying_when_compute_bound():
    """Verify multiplies the GEMM rows by k + 1 = 5 for 2.77 tokens: once the batch makes the
    target compute-bound, a step costs more than the tokens it saves."""
    dep, spec = _dep("llama-3.1-8b", "h100-sxm"), SpeculativeConfig.parse("eagle:k=4,accept=0.7")
    isl, osl = 128, 128
    stop = break_even_batch(dep, isl, osl, spec)
    assert stop is not None and 8 < stop < 4096

    def ratio(b: int) -> float:
        return float(mean_speculative_tpot_s(dep, b, isl, osl, spec) / mean_decode_step_s(dep, b, isl, osl))

    assert ratio(1) < 0.6
    assert ratio(stop - 1) < 1.0 <= ratio(stop)
    assert ratio(4096) > 1.0
    assert break_even_batch(dep, isl, osl, spec, max_batch=stop - 1) is None
    never = SpeculativeConfig("eagle", k=4, acceptance=0.0)
    assert break_even_batch(dep, isl, osl, never, max_batch=8) == 1


# --- configuration and parsing ---------------------------------------------------------------------------

def test_parse_and_print_round_trip():
    spec = SpeculativeConfig.parse(" draft:model=llama-3.1-8b, k=4, accept=0.6 ")
    assert (spec.method, spec.k, spec.acceptance, spec.draft_model) == ("draft", 4, 0.6, "llama-3.1-8b")
    for text in ("eagle:k=4,accept=0.7", "mtp:k=1,length=1.85", "draft:model=llama-3.1-8b,k=4,accept=0.6",
                 "ngram:k=3,accept=0.4,host_us=20", "medusa:k=4,length=2.5,vocab=32000"):
        assert str(SpeculativeConfig.parse(text)) == text
    assert SpeculativeConfig.parse("ngram:k=3,accept=0.4,host_us=20").host_s == pytest.approx(20e-6)


def test_presets_carry_their_source():
    assert set(PRESETS) >= {"mtp-deepseek-v3", "eagle3-llama-3.1-8b"}
    mtp = SpeculativeConfig.parse("mtp-deepseek-v3")
    assert (mtp.method, mtp.k, mtp.acceptance) == ("mtp", 1, 0.85)
    assert "2412.19437" in mtp.source and "85-90%" in mtp.source
    for name in PRESETS:
        assert SpeculativeConfig.preset(name).source.startswith(f"preset {name}: ")
    with pytest.raises(SpecError, match="did you mean 'mtp-deepseek-v3'"):
        SpeculativeConfig.preset("mtp-deepseek")


@pytest.mark.parametrize("text, message", [
    ("eagel:k=4,accept=0.7", "unknown method 'eagel' (did you mean 'eagle'?)"),
    ("eagle:k=4", "exactly one of acceptance"),
    ("eagle:k=4,accept=0.7,length=2", "exactly one of acceptance"),
    ("eagle:accept=0.7", "draft length k is missing"),
    ("eagle:k=0,accept=0.7", "k must be an integer >= 1"),
    ("eagle:k=four,accept=0.7", "k='four' is not an integer"),
    ("eagle:k=4,accept=70", "acceptance must be in [0, 1)"),
    ("eagle:k=4,length=6", "acceptance_length must be in [1, k+1] = [1, 5]"),
    ("eagle:k=4,acept=0.7", "unknown key 'acept' (did you mean 'accept'"),
    ("eagle:k=4,accept", "'accept' is not key=value"),
    ("eagle:k=4,k=5,accept=0.7", "'k' given twice"),
    ("draft:k=4,accept=0.6", "method 'draft' needs draft_model"),
    ("eagle:model=llama-3.1-8b,k=4,accept=0.6", "draft_model is used only by method 'draft'"),
    ("ngram:k=4,accept=0.5,vocab=32000", "draft_vocab_size must be an integer >= 1"),
])
def test_parse_errors_say_what_where_and_what_is_allowed(text, message):
    with pytest.raises(SpecError) as err:
        SpeculativeConfig.parse(text)
    assert message in str(err.value)
    assert f"in speculative spec {text!r}" in str(err.value)


def test_a_mapping_of_fields_is_the_text_it_spells():
    # estimate() and serve() take the mapping a deployment file holds, as they take the text
    from inferlab import estimate

    mapping = {"method": "mtp", "k": 1, "acceptance_length": 1.85}
    assert SpeculativeConfig.of(mapping) == SpeculativeConfig.parse("mtp:k=1,length=1.85")
    by_text = estimate("deepseek-v3", "h200-sxm", tp=8, precision="fp8", speculative="mtp:k=1,length=1.85")
    by_mapping = estimate("deepseek-v3", "h200-sxm", tp=8, precision="fp8", speculative=mapping)
    assert by_mapping.tpot.to("ms").magnitude == pytest.approx(by_text.tpot.to("ms").magnitude)
    # 1.85 tokens a step: TPOT is one verify step (2 tokens) and one draft pass over 1.85, below plain decoding
    assert by_mapping.tpot < estimate("deepseek-v3", "h200-sxm", tp=8, precision="fp8").tpot


@pytest.mark.parametrize("value, message", [
    ({"method": "eagle", "kk": 3, "acceptance": 0.6}, "unknown field 'kk' (did you mean 'k'?)"),
    ({"method": "eagle", "acceptance": 0.6}, "a mapping needs 'method' and 'k'; 'k' is missing"),
    ({"method": "eagle", "k": 3}, "exactly one of acceptance"),
    (3, "a mapping of its fields or a SpeculativeConfig, got 3"),
])
def test_a_bad_mapping_says_what_is_allowed(value, message):
    with pytest.raises(SpecError) as err:
        SpeculativeConfig.of(value)
    assert message in str(err.value)


def test_estimate_sizes_the_kv_cache_next_to_the_draft_model_and_refuses_what_serve_refuses():
    from inferlab import estimate

    plain = estimate("llama-3.1-70b", "h100-sxm", tp=4, precision="fp8", batch_size=8)
    spec = estimate("llama-3.1-70b", "h100-sxm", tp=4, precision="fp8", batch_size=8,
                    speculative="draft:model=llama-3.1-8b,k=4,accept=0.7")
    # by hand: Llama-3.1-8B's 8.03 B parameters over 4 GPUs, its embedding and LM head (128,256 x 4,096
    # each) in BF16 (2 B) and the rest at FP8 (1 B)
    table = 2 * 128256 * 4096
    assert spec.memory.weights - plain.memory.weights == pytest.approx(((8.03e9 - table) + 2 * table) / 4, rel=0.01)
    # its KV per token: 32 layers x 8 KV heads x 128 x (K and V) x 1 B (precision fp8 stores the KV cache
    # in FP8), a quarter on each GPU
    assert spec.memory.kv_per_token - plain.memory.kv_per_token == pytest.approx(32 * 8 * 128 * 2 * 1 / 4)
    assert float(spec.memory.max_sequences) < float(plain.memory.max_sequences)
    with pytest.raises(SpecError, match="is not smaller than the target"):
        estimate("llama-3.1-8b", "h100-sxm", speculative="draft:model=llama-3.1-70b,k=4,accept=0.7")
    with pytest.raises(SpecError, match="must share the target's tokenizer"):
        estimate("llama-3.1-70b", "h100-sxm", tp=4, precision="fp8", speculative="draft:model=qwen3-8b,k=4,accept=0.6")


def test_a_preset_measured_on_another_model_is_refused():
    from inferlab import estimate, serve

    with pytest.raises(SpecError, match="measured with llama-3.1-8b, not llama-3.1-70b"):
        estimate("llama-3.1-70b", "h100-sxm", tp=4, speculative="eagle3-llama-3.1-8b")
    with pytest.raises(SpecError, match="measured with llama-3.3-70b, not llama-3.1-70b"):
        serve("llama-3.1-70b", "h100-sxm", tp=4, rate=1.0, num_requests=5, speculative="eagle3-llama-3.3-70b")
    assert estimate("deepseek-r1", "h200-sxm", tp=8, speculative="mtp-deepseek-v3").tpot > 0  # R1 is V3's architecture
    assert SpeculativeConfig.parse("eagle:k=7,length=2.77").target is None  # a stated acceptance is the user's


def test_the_drafters_pass_over_the_prompt_is_part_of_ttft():
    """A draft model prefills each prompt into its own KV cache before it can draft the second
    token: TTFT with Llama-3.1-8B drafting for Llama-3.1-70B (FP8, four H100s) grows by the 8B's
    own prefill of that prompt on the same GPUs (estimated alone, within the step overheads an
    estimate of its own adds). An EAGLE head is one layer of the target's 80 (under 1/20 of its
    prefill); n-gram lookup holds no per-token state (nothing)."""
    from inferlab import estimate, serve

    kw = dict(tp=4, precision="fp8", isl=[2048, 16384], osl=64)
    plain = np.asarray(estimate("llama-3.1-70b", "h100-sxm", **kw).ttft_s)
    drafted = np.asarray(estimate("llama-3.1-70b", "h100-sxm", speculative="draft:model=llama-3.1-8b,k=4,accept=0.7",
                                  **kw).ttft_s)
    alone = np.asarray(estimate("llama-3.1-8b", "h100-sxm", **kw).ttft_s)
    assert np.allclose(drafted - plain, alone, rtol=0.25)
    eagle = np.asarray(estimate("llama-3.1-70b", "h100-sxm", speculative="eagle:k=3,accept=0.7", **kw).ttft_s)
    assert np.all(eagle > plain) and np.all(eagle - plain < plain / 20)
    ngram = np.asarray(estimate("llama-3.1-70b", "h100-sxm", speculative="ngram:k=3,accept=0.5", **kw).ttft_s)
    assert np.allclose(ngram, plain)
    # serving at a trickle: a 16k-token prompt found alone (the median request) takes the
    # drafter's prefill longer to its first token
    run = dict(tp=4, precision="fp8", isl=16384, osl=16, rate=0.05, num_requests=8)
    t_plain = np.median(serve("llama-3.1-70b", "h100-sxm", **run).ttft_s)
    t_draft = np.median(serve("llama-3.1-70b", "h100-sxm", speculative="draft:model=llama-3.1-8b,k=4,accept=0.7",
                              **run).ttft_s)
    assert t_draft - t_plain == pytest.approx(alone[1], rel=0.3)


def test_a_short_output_pays_whole_speculative_steps():
    """EAGLE k=7 at acceptance 0.9 emits T = (1 - 0.9^8) / 0.1 = 5.7 tokens a step. An output of
    two tokens has one left after the prefill's: one whole step (its drafts past the end are
    verified and dropped), so TPOT is a step's time, above plain decoding's; of three tokens,
    two left: one step for both, half a step each. It had divided every step by 5.7 (2.1 ms a
    token at osl 2 against 7.8 ms without speculation)."""
    import inferlab
    from inferlab.techniques.speculative import SpeculativeConfig, mean_speculative_tpot_s, speculative_decode

    dep = deployment("llama-3.1-8b", "h100-sxm")
    spec = SpeculativeConfig(method="eagle", k=7, acceptance=0.9)
    step = speculative_decode(dep, 1, 1024, spec)
    assert float(step.tokens_per_step) == pytest.approx((1 - 0.9 ** 8) / 0.1)
    step = step.time_s  # one speculative step's time at a 1,024-token context
    assert float(mean_speculative_tpot_s(dep, 1, 1024, 2, spec)) == pytest.approx(float(step), rel=0.01)
    assert float(mean_speculative_tpot_s(dep, 1, 1024, 3, spec)) == pytest.approx(float(step) / 2, rel=0.01)
    plain = inferlab.estimate("llama-3.1-8b", "h100-sxm", isl=1024, osl=2, batch_size=1).tpot_s
    assert float(mean_speculative_tpot_s(dep, 1, 1024, 2, spec)) > float(plain)
