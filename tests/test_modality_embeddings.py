"""Embedding models: hand-derived FLOPs, the compute-bound relation, padding vs bucketing."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from inferlab.errors import SpecError, UnknownNameError
from inferlab.modalities.catalog import load_modality, modality_ids
from inferlab.modalities.embeddings import Encoder, bucketed_tokens_per_s, embed, encoder_ops


def test_bge_large_pass_flops_by_hand():
    # BERT-large (bge-large-en-v1.5 config): h = 1024, 24 layers, 16 heads of 64, i = 4096.
    # batch 2 x 128 tokens = 256 tokens.
    # per layer GEMMs: 2 x 256 x (1024 x 3072 + 1024 x 1024 + 2 x 1024 x 4096)
    #   = 2 x 256 x 12,582,912 = 6,442,450,944 FLOP
    # per layer attention: 2 x batch 2 x 16 heads x 128 x 128 x (64 + 64) = 134,217,728 FLOP
    # 24 layers: 24 x 6,576,668,672 = 157,840,048,128 FLOP
    enc = Encoder.from_spec(load_modality("bge-large-en-v1.5"))
    flops = sum(float(op.flops) * op.count for op in encoder_ops(enc, 2, 128))
    assert flops == pytest.approx(157_840_048_128, rel=1e-9)


def test_bge_large_param_count_matches_model_card():
    # The BGE model card lists bge-large-en-v1.5 at 335M parameters; our count leaves out
    # biases, norms and the position/type embeddings (about 1.5M), so it sits just under.
    enc = Encoder.from_spec(load_modality("bge-large-en-v1.5"))
    assert enc.num_params == pytest.approx(335e6, rel=0.02)


def test_causal_decoder_embedder_counts_half_the_attention():
    enc = Encoder.from_spec(load_modality("qwen3-embedding-0.6b"))
    assert enc.causal and enc.gated_mlp
    (attn,) = [op for op in encoder_ops(enc, 1, 1000) if op.name == "attention"]
    # 2 x 16 heads x (1000 x 1001 / 2) x (128 + 128)
    assert float(attn.flops) == pytest.approx(2 * 16 * 500_500 * 256)


@settings(max_examples=40, deadline=None)
@given(model=st.sampled_from(modality_ids("embedding")),
       gpu=st.sampled_from(["h100-sxm", "b200", "a100-sxm-80gb", "l4", "rtx-4090", "h100-sxm:3g.40gb"]),
       batch=st.integers(64, 2048), seq=st.integers(32, 512))
def test_embedding_step_never_memory_bound_at_batch_64_and_up(model, gpu, batch, seq):
    # At >= 64 sequences of >= 32 tokens the GEMMs see >= 2048 rows: far past every
    # GPU's ridge point, so the pass is compute-bound (the relation).
    r = embed(model, gpu, batch=batch, seq_len=seq)
    assert r.pass_time.bound == "compute"


def test_single_short_query_is_memory_bound():
    # One 8-token query reads all 335M weights to do 8 rows of work.
    assert embed("bge-large-en-v1.5", "h100-sxm", batch=1, seq_len=8).pass_time.bound == "memory"


@settings(max_examples=25, deadline=None)
@given(batch=st.integers(1, 512), seq=st.integers(1, 512))
def test_more_bandwidth_or_flops_never_slower(batch, seq):
    a = embed("bge-base-en-v1.5", "h100-sxm", batch=batch, seq_len=seq)
    b = embed("bge-base-en-v1.5", "h200-sxm", batch=batch, seq_len=seq)  # same FLOPs, more bandwidth
    assert b.latency_s <= a.latency_s * (1 + 1e-12)
    assert np.isfinite(a.latency_s) and a.latency_s > 0


def test_bucketing_beats_padding_on_mixed_lengths():
    # 64 short (16 tokens) and 64 long (512) inputs interleaved: padded batches of 64 all
    # run at 512; bucketed, half the batches run at 16.
    lengths = np.array([16, 512] * 64)
    padded = bucketed_tokens_per_s("bge-large-en-v1.5", "h100-sxm", lengths, batch=64, bucket=False)
    bucketed = bucketed_tokens_per_s("bge-large-en-v1.5", "h100-sxm", lengths, batch=64, bucket=True)
    assert bucketed > 1.5 * padded


def test_tokenizer_bounds_a_fast_gpu():
    r = embed("bge-base-en-v1.5", "b200", batch=1024, seq_len=512)
    assert r.gpu_tokens_per_s > 0  # the GPU alone
    fast = embed("bge-base-en-v1.5", "b200", batch=1024, seq_len=512)
    slow_cpu = type(fast)(**{**fast.__dict__, "tokenizer_tokens_per_s": 1e5})
    assert slow_cpu.bottleneck == "tokenizer" and slow_cpu.tokens_per_s == 1e5


def test_bad_input_is_one_clear_line():
    with pytest.raises(UnknownNameError, match="did you mean 'bge-large-en-v1.5'"):
        embed("bge-large-en-v15", "h100-sxm")
    with pytest.raises(SpecError, match="seq_len must be a whole number from 1 to 512"):
        embed("bge-large-en-v1.5", "h100-sxm", seq_len=4096)
    # a catalog model of another kind names its kind and the command that runs it
    with pytest.raises(SpecError, match=r"sdxl is an image or video diffusion model \(inferlab diffuse\), not an "
                                        "embedding one; embedding models: bge-base-en-v1.5"):
        embed("sdxl", "h100-sxm")


@pytest.mark.parametrize("lengths, batch, message", [
    ([np.nan, 10], 64, "each a whole number of at least 1"),  # had been a ValueError from int(nan)
    ([10.5, 20], 64, "each a whole number of at least 1"),  # had been embedded as 10 tokens of 10.5
    ([[10, 20]], 64, "non-empty list of token counts"),
    ([10, 20], 0, "batch must be a whole number from 1"),  # had been a ValueError from range()
])
def test_bucketed_lengths_and_batch_are_checked(lengths, batch, message):
    with pytest.raises(SpecError, match=message):
        bucketed_tokens_per_s("bge-base-en-v1.5", "h100-sxm", lengths, batch=batch)


def test_a_pass_is_the_roofline_on_pint_quantities():
    # The same FullAttention op timed in SI floats by time_pass and on pint quantities by the
    # core's roofline: equal, and swapping the peak and the bandwidth is a dimension error.
    from inferlab.core.timing import roofline_seconds
    from inferlab.unit_registry import DimensionError
    from inferlab.modalities.passes import DATASHEET, FullAttention, time_pass
    from inferlab.specs.catalog import load_hardware
    from inferlab.units import Q

    hw = load_hardware("h100-sxm")
    op = FullAttention("attention", batch=8, seq=512, heads=16, head_dim=64)
    t = time_pass((op,), hw, DATASHEET)
    peak = Q(989 * DATASHEET.attention_fraction, "TFLOPS")
    bw = Q(3.35 * DATASHEET.bandwidth_fraction, "TB/s")
    expected = roofline_seconds(Q(float(op.flops), "FLOP"), Q(float(op.bytes), "B"), peak, bw)
    assert float(t.time_s) - t.floor_s == pytest.approx(expected.to("s").magnitude, rel=1e-9)
    with pytest.raises(DimensionError):
        roofline_seconds(Q(float(op.flops), "FLOP"), Q(float(op.bytes), "B"), bw, peak)


def test_a_gguf_format_is_refused_for_embeddings():
    from inferlab.errors import SpecError
    from inferlab.modalities.embeddings import embed

    with pytest.raises(SpecError, match="GGUF weight format"):
        embed("bge-large-en-v1.5", "h100-sxm", precision="q4_k_m")
