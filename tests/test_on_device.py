"""On-device batch-1 decode: GGUF bits per weight, Apple M-series specs, fit as a precondition."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from inferlab.errors import SpecError, UnknownNameError
from inferlab.modalities.on_device import on_device
from inferlab.precision import number_format
from inferlab.specs.catalog import load_hardware, load_model


def test_gguf_bits_per_weight():
    # ggml-common.h: block_q8_0 = 32 int8 + one fp16 scale = 34 B per 32 weights = 8.5 bpw;
    # block_q4_0 = 16 B of nibbles + fp16 scale = 18 B per 32 weights = 4.5 bpw.
    assert number_format("q8_0").bits_per_element == 8.5
    assert number_format("q4_0").bits_per_element == 4.5
    assert number_format("Q4_K_M").bits_per_element == 4.85
    assert number_format("q5_k_m").bits_per_element == 5.69


def test_llama2_7b_q4_0_file_size_matches_llama_bench():
    # llama-bench reports "llama 7B Q4_0 | 3.56 GiB | 6.74 B" (llama.cpp issue #10435).
    r = on_device("llama-2-7b", "m2-ultra", precision="q4_0")
    assert r.weight_bytes / 2**30 == pytest.approx(3.56, rel=0.01)


def test_decode_token_time_by_hand():
    # Llama-2-7B Q4_0 on an M2 Ultra (800 GB/s), empty cache:
    # weights read per token = (6,738,415,616 - 131,072,000 embedding) x 4.5 / 8 = 3,716,630,784 B
    # at 72% of 800 GB/s = 576 GB/s: 6.4525 ms; plus 32 layers x 14 kernels x 5 us = 2.24 ms.
    r = on_device("llama-2-7b", "m2-ultra", precision="q4_0", context=0)
    assert r.token_bytes == pytest.approx(3_716_630_784, rel=1e-6)
    assert r.decode_s == pytest.approx(3_716_630_784 / 576e9 + 2.24e-3, rel=1e-9)


def test_apple_specs_from_apple():
    # Apple Newsroom (June 2023): M2 Ultra "800GB/s of system memory bandwidth", "192GB".
    m2u = load_hardware("m2-ultra")
    assert m2u.vendor == "Apple" and m2u.memory_bandwidth.si == 800e9 and m2u.memory_capacity.stated == "192 GB"
    assert load_hardware("m4-max").memory_bandwidth.si == 546e9


def test_quantization_is_the_precondition_to_fit():
    # Llama-3.1-70B: 70.6B weights x 2 B = 141 GB in BF16 > 96 GB a 128 GB M3 Max lends its
    # GPU; Q4_K_M (4.85 bpw) is 42.8 GB and fits.
    assert not on_device("llama-3.1-70b", "m3-max", precision="bf16").fits
    assert on_device("llama-3.1-70b", "m3-max", precision="q4_k_m").fits


@settings(max_examples=30, deadline=None)
@given(fmt=st.sampled_from(["q4_0", "q4_k_m", "q5_k_m", "q8_0", "bf16"]), ctx=st.integers(0, 32768))
def test_fewer_bits_and_more_bandwidth_never_slower(fmt, ctx):
    slow = on_device("llama-3.1-8b", "m3-max", precision=fmt, context=ctx)
    fast = on_device("llama-3.1-8b", "m4-max", precision=fmt, context=ctx)  # 546 vs 400 GB/s
    assert fast.decode_s < slow.decode_s
    q8 = on_device("llama-3.1-8b", "m3-max", precision="q8_0", context=ctx)
    q4 = on_device("llama-3.1-8b", "m3-max", precision="q4_k_m", context=ctx)
    assert q4.decode_s < q8.decode_s


def test_bad_input():
    with pytest.raises(UnknownNameError, match="did you mean 'q4_k_m'"):
        on_device("llama-2-7b", "m2-ultra", precision="q4_km")
    with pytest.raises(UnknownNameError, match="did you mean 'm2-ultra'"):
        on_device("llama-2-7b", "m2-ultr")
    with pytest.raises(SpecError, match="context"):
        on_device("llama-2-7b", "m2-ultra", context=-1)
    assert load_model("llama-2-7b").num_hidden_layers == 32


def test_estimate_on_apple_decodes_at_the_memory_rate():
    # Apple GPUs have no tensor-core tiles: a batch-1 GEMM costs its own rows, not a padded
    # tile's, so decode is set by unified-memory bandwidth. Llama-3.1-8B in BF16 reads 16.06 GB
    # per token: 20.1 ms at the M2 Ultra's 800 GB/s; llama.cpp's published M2 Ultra (76-core)
    # F16 run of the 6.74B Llama-2 reaches 41 tok/s (13.5 GB at 553 GB/s, 69% of 800), so the
    # step lies between the full rate and 60% of it (33.5 ms), far from the 90 ms the padded
    # tensor-core curve gave.
    import inferlab

    est = inferlab.estimate("llama-3.1-8b", "m2-ultra", isl=512, osl=128, batch_size=1)
    assert 0.0201 < float(est.tpot_s) < 0.0335


def test_the_kv_cache_of_the_context_counts_toward_fitting():
    from inferlab.errors import SpecError
    from inferlab.modalities.on_device import on_device

    # Llama-3.1-8B: 32 layers x 8 KV heads x 128 x 2 (K, V) x 2 B (fp16 KV) = 131,072 B per
    # token; 131,072 tokens hold 17.2 GB, beside 16.1 GB of BF16 weights: 33.3 GB, more than a
    # 24 GB RTX 4090 gives; the weights alone would fit
    r = on_device("llama-3.1-8b", "rtx-4090", precision="bf16", context=131072)
    assert r.kv_bytes == 131072 * 131072 and r.weight_bytes < r.usable_bytes and not r.fits
    with pytest.raises(SpecError, match="longer than llama-3.1-8b reads .131,072 positions"):
        on_device("llama-3.1-8b", "m1-max", context=10**9)


# --- CPU sockets and phone SoCs (issue 17, item 6) ---

CPU_LIKE = ["epyc-9554", "epyc-9654", "ryzen-9-7950x", "snapdragon-8-gen-3"]


def test_cpu_and_phone_specs_load_with_sources():
    # AMD: 12 channels x 4,800 MT/s x 8 B = 460.8 GB/s per socket; Snapdragon 8 Gen 3:
    # LPDDR5X at 4,800 MHz (9,600 MT/s) over 64 bits = 76.8 GB/s.
    epyc = load_hardware("epyc-9554")
    assert epyc.kind == "cpu" and epyc.memory_bandwidth.si == pytest.approx(12 * 4800e6 * 8)
    assert load_hardware("epyc-9654").memory_bandwidth.si == epyc.memory_bandwidth.si
    # Ryzen 9 7950X: two channels at AMD's rated DDR5-5200: 2 x 5,200 MT/s x 8 B = 83.2 GB/s.
    assert load_hardware("ryzen-9-7950x").memory_bandwidth.si == pytest.approx(2 * 5200e6 * 8)
    sd = load_hardware("snapdragon-8-gen-3")
    assert sd.kind == "phone-soc" and sd.vendor == "Qualcomm"
    assert sd.memory_bandwidth.si == pytest.approx(9600e6 * 8)
    for hw in (epyc, sd, load_hardware("epyc-9654"), load_hardware("ryzen-9-7950x")):
        assert not hw.tiled_matrix_units
        for path, fig in hw.figures():
            assert fig.source in hw.sources, path


def test_cpu_decode_by_hand():
    # Phi-4 Q4_K_M on one EPYC 9554, empty cache: (14.66B - 0.514B embedding) x 4.85 / 8 B
    # read per token at 460.8 GB/s x 0.66 (STREAM read of peak) x 0.88 (llama.cpp of STREAM)
    # = 267.6 GB/s, plus 40 layers x 14 kernels x 5 us.
    r = on_device("phi-4", "epyc-9554", precision="q4_k_m", context=0)
    bw = 460.8e9 * 0.66 * 0.88
    assert r.decode_s == pytest.approx(r.token_bytes / bw + 40 * 14 * 5e-6, rel=1e-9)
    assert r.token_bytes == pytest.approx((14_659_507_200 - 513_802_240) * 4.85 / 8, rel=1e-3)


@settings(max_examples=25, deadline=None)
@given(hw=st.sampled_from(CPU_LIKE), model=st.sampled_from(["llama-2-7b", "llama-3.1-8b", "phi-4", "qwen3-8b"]),
       fmt=st.sampled_from(["q4_0", "q4_k_m", "q5_k_m", "q8_0", "int4", "bf16"]), ctx=st.integers(0, 4096))
def test_cpu_and_phone_never_beat_their_bandwidth(hw, model, fmt, ctx):
    # A token reads its weights (less the embedding row lookups) and KV: never faster than
    # those bytes over the datasheet bandwidth.
    r = on_device(model, hw, precision=fmt, context=ctx)
    assert r.decode_s >= r.token_bytes / load_hardware(hw).memory_bandwidth.si


@settings(max_examples=25, deadline=None)
@given(hw=st.sampled_from(CPU_LIKE), ctx=st.integers(0, 4096),
       pair=st.sampled_from([("q4_0", "q5_k_m"), ("q4_k_m", "q5_k_m"), ("q5_k_m", "q8_0"), ("q8_0", "bf16"),
                             ("int4", "q4_0")]))
def test_a_narrower_gguf_format_never_decodes_slower(hw, ctx, pair):
    narrow, wide = pair
    a = on_device("llama-3.1-8b", hw, precision=narrow, context=ctx)
    b = on_device("llama-3.1-8b", hw, precision=wide, context=ctx)
    assert a.decode_s <= b.decode_s


def test_a_phone_needs_fewer_bits_to_hold_an_8b_model():
    # Llama-3.1-8B: 8.03B x 2 B = 16.06 GB in BF16, more than a 16 GB phone has; Q4_K_M
    # (4.85 bpw, 4.9 GB) plus a 4k context's FP16 KV cache (0.5 GB) fits.
    assert not on_device("llama-3.1-8b", "snapdragon-8-gen-3", precision="bf16", context=0).fits
    assert on_device("llama-3.1-8b", "snapdragon-8-gen-3", precision="q4_k_m", context=4096).fits


def test_the_gpu_path_is_unchanged_by_the_cpu_terms():
    from inferlab.modalities.on_device import LLAMA_CPP

    assert LLAMA_CPP.bandwidth_share(load_hardware("m2-ultra")) == 0.72
    assert LLAMA_CPP.bandwidth_share(load_hardware("epyc-9554")) == pytest.approx(0.66 * 0.88)


def test_sliding_window_layers_hold_only_their_window():
    """Gemma-3-27B: 52 of its 62 layers are sliding(1024), 425,984 B of BF16 KV per token over
    them and 81,920 B over the 10 global layers (16 KV heads x 128 x 2 x 2 B x layers): at
    131,072 tokens 425,984 x 1,024 + 81,920 x 131,072 = 11.17 GB, not 66.6 GB as if every layer
    held the whole context, so BF16 weights (54 GB) fit an M4 Max's 96 GB with it."""
    from inferlab.modalities.on_device import on_device

    r = on_device("gemma-3-27b", "m4-max", precision="bf16", context=131072)
    assert r.kv_bytes == pytest.approx(425_984 * 1024 + 81_920 * 131_072)
    assert r.fits


def test_tied_embeddings_are_read_for_the_logits():
    """A model that ties its output layer to the embedding table reads that table for every
    token's logits (PaliGemma-3B: all its 5.02 GB of BF16 weights); one with its own LM head
    reads the head and one row of the table (Llama-3.1-8B: 16.06 GB less the 1.05 GB table)."""
    from inferlab.modalities.on_device import on_device

    tied = on_device("paligemma-3b-224", "m2-ultra", precision="bf16", context=0)
    assert tied.token_bytes == pytest.approx(tied.weight_bytes, rel=1e-3)
    own = on_device("llama-3.1-8b", "m2-ultra", precision="bf16", context=0)
    assert own.token_bytes == pytest.approx(own.weight_bytes - 128_256 * 4096 * 2, rel=1e-6)


def test_nothing_fitting_is_an_error_that_says_why(capsys):
    from inferlab.cli.main import main

    assert main(["on-device", "llama-3.1-70b", "rtx-4090"]) != 0
    err = capsys.readouterr().err
    assert "fits rtx-4090 in none of the formats asked" in err and "q4_k_m: weights 42.8 GB" in err
    assert main(["on-device", "llama-3.1-8b", "rtx-4090", "--precision", "q4_k_m,bf16", "--context", "131072"]) == 0
    out = capsys.readouterr().out
    assert "KV GB" in out and "does not fit: bf16: weights 16.1 GB + KV cache 17.2 GB > 25.8 GB" in out


@pytest.mark.parametrize("hw, precision, message", [
    ("m2-ultra", "nvfp4", "on-device runtimes store weights as"), ("m2-ultra", "fp8", "not fp8"),
    ("tpu-v5e", "q4_k_m", "no TPU backend"),
])
def test_formats_and_devices_on_device_runtimes_do_not_run_are_refused(hw, precision, message):
    with pytest.raises(SpecError, match=message):
        on_device("llama-3.1-8b", hw, precision=precision)


def test_the_prompt_rate_pays_attention_over_the_context():
    """Llama-3.1-8B: 2 x 8.030e9 FLOP a token in its weights; a 512-token prompt after 131,072
    tokens attends on average to 131,328 keys in each of 32 layers of 32 x 128 query width, 4 FLOP
    each (q.k and p.v): 6.88e10 more, against 6.7e7 more after none (256 keys): 5.24x slower."""
    def rate(context: int) -> float:
        return on_device("llama-3.1-8b", "m4-max", context=context).prefill_tokens_per_s

    weights = 2.0 * 8.030e9
    per_key = 4.0 * 32 * 32 * 128
    assert rate(0) / rate(131_072) == pytest.approx((weights + per_key * 131_328) / (weights + per_key * 256), rel=1e-3)


def test_an_estimate_on_a_cpu_or_phone_says_per_cpu_or_soc_not_per_gpu():
    import inferlab

    for hardware, word in (("epyc-9654", "CPU"), ("snapdragon-8-gen-3", "SoC"), ("h100-sxm", "GPU")):
        est = inferlab.estimate("llama-3.1-8b", hardware, precision="q4_k_m" if word != "GPU" else "bf16",
                                isl=128, osl=16)
        header = str(est).splitlines()[1].split()
        assert f"tok/s/{word}" in header and f"GB/{word}" in header
        assert not any(h.endswith("/GPU") for h in header) or word == "GPU"
        assert f"<th>tok/s/{word}</th>" in est._repr_html_()


def test_serving_on_a_cpu_says_per_cpu_and_names_its_family_as_cpus():
    import inferlab

    r = inferlab.serve("llama-3.1-8b", "epyc-9654", precision="q4_k_m", rate=0.1, num_requests=6, isl=128, osl=8)
    text = str(r)
    assert " per CPU), " in text and " per GPU)" not in text
    assert "no calibration data for zen CPUs" in r.explain()
