"""Whisper: windows, fan-out floor, real-time factor, diarization as the serial part."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from inferlab.errors import SpecError, UnknownNameError
from inferlab.modalities.catalog import load_modality
from inferlab.modalities.whisper import encoder_ops, transcribe


def test_encoder_flops_by_hand():
    # whisper-small: d = 768, 12 encoder layers, FFN 3072, 80 mel bins, 1500 positions.
    # conv1: 2 x 3000 x 768 x (3 x 80) = 1,105,920,000; conv2: 2 x 1500 x 768 x (3 x 768) = 5,308,416,000
    # per layer GEMMs: 2 x 1500 x (768 x 2304 + 768 x 768 + 2 x 768 x 3072) = 2 x 1500 x 7,077,888 = 21,233,664,000
    # per layer attention: 2 x 12 heads x 1500^2 x (64 + 64) = 6,912,000,000
    # decoder cross K/V: 12 x 2 x 1500 x 768 x 1536 = 42,467,328,000
    ops = encoder_ops(load_modality("whisper-small"), 1)
    total = sum(float(op.flops) * op.count for op in ops)
    expected = 1_105_920_000 + 5_308_416_000 + 12 * (21_233_664_000 + 6_912_000_000) + 42_467_328_000
    assert total == pytest.approx(expected, rel=1e-9)


def test_an_hour_is_120_windows_and_fans_out():
    one = transcribe("whisper-large-v3", "h100-sxm", audio_s=3600, gpus=1)
    many = transcribe("whisper-large-v3", "h100-sxm", audio_s=3600, gpus=120)
    assert one.windows == 120 and many.batch == 1
    # The floor: with a GPU per window, the latency is one window's encoder pass and decode loop.
    assert many.latency_s == pytest.approx(many.window_s)
    assert many.latency_s < one.latency_s
    assert one.real_time_factor == pytest.approx(one.latency_s / 3600)


@settings(max_examples=25, deadline=None)
@given(audio=st.floats(1.0, 20_000.0), gpus=st.integers(1, 64))
def test_more_gpus_never_slower_and_diarization_does_not_split(audio, gpus):
    a = transcribe("whisper-large-v3", "h100-sxm", audio_s=audio, gpus=gpus)
    b = transcribe("whisper-large-v3", "h100-sxm", audio_s=audio, gpus=gpus + 1)
    assert b.latency_s <= a.latency_s * (1 + 1e-9)
    d = transcribe("whisper-large-v3", "h100-sxm", audio_s=audio, gpus=gpus, diarize=True)
    assert d.latency_s - a.latency_s == pytest.approx(0.025 * audio)  # pyannote: 2.5% of the audio


@settings(max_examples=20, deadline=None)
@given(beams=st.integers(1, 8), audio=st.floats(10.0, 3600.0), hw=st.sampled_from(["h100-sxm", "rtx-2080-ti", "l4"]),
       engine=st.sampled_from(["generic", "ctranslate2"]))
def test_beam_search_is_never_faster_than_greedy(beams, audio, hw, engine):
    # k beams are k sequences decoded as a batch: each step reads at least what greedy reads.
    kw = dict(audio_s=audio, batch=1, engine=engine)
    greedy = transcribe("whisper-large-v3-turbo", hw, **kw)
    beam = transcribe("whisper-large-v3-turbo", hw, beams=beams, **kw)
    wider = transcribe("whisper-large-v3-turbo", hw, beams=beams + 1, **kw)
    assert greedy.latency_s <= beam.latency_s * (1 + 1e-9) <= wider.latency_s * (1 + 1e-9)


def test_ctranslate2_step_by_hand():
    # whisper-small, 5 beams of one window: CTranslate2 keeps one copy of the window's cross
    # keys and values: 12 layers x 2 x 1500 x 768 x 2 B = 55,296,000 B read per step instead
    # of 5 copies; and 21 more kernels per decoder layer beyond the graph's ten and the four
    # cache copies (35 in all), 12 x 21 = 252 launch floors of 5 us.
    from inferlab.modalities.whisper import ENGINES, decoder_step_ops

    small = load_modality("whisper-small")
    generic = {op.name: op for op in decoder_step_ops(small, 5, 50)}
    ct2 = {op.name: op for op in decoder_step_ops(small, 5, 50, beams=5, engine=ENGINES["ctranslate2"])}
    kv = lambda op: float(op.bytes) * op.count - 2 * 5 * 768 * 2 * 12  # less the 5 queries and outputs
    assert kv(ct2["cross_attention"]) == pytest.approx(55_296_000)
    assert kv(generic["cross_attention"]) == pytest.approx(5 * 55_296_000)
    assert ct2["small_kernels"].count == 252 and "small_kernels" not in generic
    # per layer: the graph's 10 as drawn (self QKV and output GEMMs, the cross query and output
    # GEMMs as one, two attentions, two FFN GEMMs, three norms) + 2 concatenations + 2 beam
    # reorders + 21 = 35 kernels, and once per step the embedding and the LM head: 12 x 35 + 2
    assert sum(op.count for op in ct2.values()) == 12 * 35 + 2
    assert float(ct2["cross_attention"].flops) == pytest.approx(float(generic["cross_attention"].flops))
    with pytest.raises(SpecError, match="engine"):
        transcribe("whisper-small", "h100-sxm", engine="whisper.cpp")


def test_cache_copies_by_hand():
    # whisper-small (d = 768, 12 layers), 5 sequences with 50 tokens cached. The keys' and the
    # values' caches of each layer grow by a copy: read 5 x 50 x 768 = 192,000 elements, write
    # 5 x 51 x 768 = 195,840, at 2 B: 775,680 B, 24 times = 18,616,320 B. With beams the step
    # then reorders each cache by beam: 195,840 read and written, 783,360 B, 24 times =
    # 18,800,640 B; greedy has no reorder.
    from inferlab.modalities.whisper import decoder_step_ops

    small = load_modality("whisper-small")
    beam = {op.name: op for op in decoder_step_ops(small, 5, 50, beams=5)}
    greedy = {op.name: op for op in decoder_step_ops(small, 5, 50)}
    total = lambda op: float(op.bytes) * op.count
    assert total(beam["cache_concat"]) == pytest.approx(18_616_320)
    assert total(greedy["cache_concat"]) == pytest.approx(18_616_320)
    assert total(beam["beam_reorder"]) == pytest.approx(18_800_640) and "beam_reorder" not in greedy


def test_prompt_by_hand():
    # Every window opens with <|startoftranscript|>, the language and the task: 3 tokens. With
    # the previous text (condition_on_previous_text), the second of two windows puts
    # <|startofprev|> and the first's 100 tokens first: 104, a mean of (3 + 104) / 2 = 53.5; a
    # 300-token window's text is cut to its last 223 (448 // 2 - 1): (3 + 227) / 2 = 115.
    r = transcribe("whisper-small", "h100-sxm", audio_s=60, batch=1)
    p = transcribe("whisper-small", "h100-sxm", audio_s=60, batch=1, previous_text=True)
    long = transcribe("whisper-small", "h100-sxm", audio_s=60, batch=1, previous_text=True, tokens_per_window=300)
    assert (r.prompt_tokens, p.prompt_tokens, long.prompt_tokens) == (3, 53.5, 115)
    assert p.window_s == pytest.approx(float(p.encoder.time_s) + p.prompt_s
                                       + 100 * (float(p.step.time_s) + p.step_overhead_s))
    assert p.prompt_s > r.prompt_s > 0 and p.latency_s > r.latency_s
    # The pass over the 103 tokens before the first step's input, one window of whisper-small
    # (d = 768, FFN 3072, 12 heads of 64, 12 layers, 1500 frames):
    # GEMMs 2 x 103 x (768 x 2304 + 768 x 768 + 768 x 1536 + 2 x 768 x 3072) = 2 x 103 x 8,257,536 a layer;
    # causal self-attention 2 x 12 x (103 x 104 / 2) x 128; cross attention 2 x 12 x 103 x 1500 x 128.
    from inferlab.modalities.whisper import prompt_ops

    ops = prompt_ops(load_modality("whisper-small"), 1, 103)
    flops = sum(float(op.flops) * op.count for op in ops)
    per_layer = 2 * 103 * 8_257_536 + 2 * 12 * (103 * 104 / 2) * 128 + 2 * 12 * 103 * 1500 * 128
    assert flops == pytest.approx(12 * per_layer)
    with pytest.raises(SpecError, match="previous_text"):
        transcribe("whisper-small", "h100-sxm", previous_text="yes")



def test_the_prompt_pass_runs_once_per_beam_unless_the_beams_share_the_window():
    # transformers and openai-whisper repeat the prompt by the beam count before the first pass;
    # CTranslate2's beams share the window's state, so its prompt pass is the same at any width
    kw = dict(audio_s=120, batch=1, previous_text=True)
    generic = [transcribe("whisper-small", "h100-sxm", beams=b, **kw).prompt_s for b in (1, 5)]
    ct2 = [transcribe("whisper-small", "h100-sxm", beams=b, engine="ctranslate2", **kw).prompt_s for b in (1, 5)]
    assert generic[1] > generic[0] and ct2[1] == ct2[0]


@settings(max_examples=20, deadline=None)
@given(audio=st.floats(10.0, 3600.0), tokens=st.integers(1, 400), engine=st.sampled_from(["generic", "ctranslate2"]))
def test_previous_text_is_never_faster(audio, tokens, engine):
    kw = dict(audio_s=audio, batch=1, tokens_per_window=tokens, engine=engine)
    a = transcribe("whisper-large-v3-turbo", "rtx-2080-ti", **kw)
    b = transcribe("whisper-large-v3-turbo", "rtx-2080-ti", previous_text=True, **kw)
    assert b.latency_s >= a.latency_s and b.prompt_tokens <= 3 + 1 + 223


def test_chunk_overlap_and_features_by_hand():
    # transformers' chunked pipeline: 30 s chunks overlapping 5 s a side advance 20 s:
    # 9,000 s is 1 + ceil(8,970 / 20) = 450 windows, not 300; NumPy features cost 1.5 s per
    # 8 windows (transformers #29901): 450 x 0.1875 = 84.375 s, serial with the GPU.
    plain = transcribe("whisper-large-v3", "a100-sxm-80gb", audio_s=9000, batch=24)
    piped = transcribe("whisper-large-v3", "a100-sxm-80gb", audio_s=9000, batch=24, stride_s=5, features="numpy")
    assert plain.windows == 300 and piped.windows == 450
    assert piped.features_s == pytest.approx(84.375) and plain.features_s == 0.0
    assert piped.latency_s == pytest.approx(84.375 + piped.rounds * piped.window_s)
    with pytest.raises(SpecError, match="features"):
        transcribe("whisper-small", "h100-sxm", features="librosa")
    with pytest.raises(SpecError, match="stride_s"):
        transcribe("whisper-small", "h100-sxm", stride_s=15)


@settings(max_examples=25, deadline=None)
@given(audio=st.floats(1.0, 20_000.0), stride=st.floats(0.0, 10.0))
def test_overlapping_windows_are_never_fewer(audio, stride):
    a = transcribe("whisper-small", "h100-sxm", audio_s=audio)
    b = transcribe("whisper-small", "h100-sxm", audio_s=audio, stride_s=stride)
    assert b.windows >= a.windows and b.latency_s >= a.latency_s * (1 - 1e-9)
    # a window covers 30 s, consecutive ones start 30 - 2 stride apart: the audio is covered
    assert 30 + (b.windows - 1) * (30 - 2 * stride) >= audio - 1e-6


def test_encoder_is_compute_bound_and_decode_memory_bound():
    r = transcribe("whisper-large-v3", "h100-sxm", audio_s=30, batch=1)
    assert r.encoder.bound == "compute"
    assert r.step.bound == "memory"


def test_bad_input():
    with pytest.raises(UnknownNameError, match="did you mean 'whisper-large-v3'"):
        transcribe("whisper-large-v4", "h100-sxm")
    with pytest.raises(SpecError, match="audio_s"):
        transcribe("whisper-small", "h100-sxm", audio_s=0)
    with pytest.raises(SpecError, match="gpus"):
        transcribe("whisper-small", "h100-sxm", gpus=0)


def test_previous_text_accumulates_from_the_second_window():
    # faster-whisper and openai-whisper prompt a window with the last 223 tokens of all the text
    # before it (all_tokens[prompt_reset_since:], cut in get_prompt), not only the previous
    # window's, and the first window has none (no <|startofprev|>). At 100 tokens a window the
    # windows open with 3, 3 + 1 + 100 = 104, 3 + 1 + 200 = 204, then 3 + 1 + 223 = 227 tokens.
    one = transcribe("whisper-small", "h100-sxm", audio_s=30, batch=1, previous_text=True)
    two = transcribe("whisper-small", "h100-sxm", audio_s=60, batch=1, previous_text=True)
    five = transcribe("whisper-small", "h100-sxm", audio_s=150, batch=1, previous_text=True)
    long = transcribe("whisper-small", "h100-sxm", audio_s=60, batch=1, previous_text=True, tokens_per_window=300)
    assert one.windows == 1 and one.prompt_tokens == 3                                  # nothing before it
    assert two.prompt_tokens == pytest.approx((3 + 104) / 2)                            # 53.5
    assert five.windows == 5 and five.prompt_tokens == pytest.approx((3 + 104 + 204 + 227 + 227) / 5)  # 153
    assert long.prompt_tokens == pytest.approx((3 + 227) / 2)                           # 115
    plain = transcribe("whisper-small", "h100-sxm", audio_s=30, batch=1)
    assert one.latency_s == pytest.approx(plain.latency_s)


def test_previous_text_runs_the_windows_one_after_another():
    # each window waits for the text of the ones before it: no batching, no fan-out over GPUs
    r = transcribe("whisper-small", "h100-sxm", audio_s=600, previous_text=True)
    assert (r.batch, r.rounds) == (1, 20)
    for kw in ({"batch": 4}, {"gpus": 2}):
        with pytest.raises(SpecError, match="previous_text"):
            transcribe("whisper-small", "h100-sxm", audio_s=600, previous_text=True, **kw)


def test_audio_and_stride_take_a_quantity_of_time():
    """A pint quantity of time had been refused as 'not a duration in seconds'; another
    dimension is a UnitError."""
    from inferlab import Q, UnitError

    r = transcribe("whisper-small", "h100-sxm", audio_s=Q(1, "h"), stride_s=Q(5000, "ms"))
    assert r.audio_s == 3600.0
    assert r.rounds == transcribe("whisper-small", "h100-sxm", audio_s=3600.0, stride_s=5.0).rounds
    with pytest.raises(UnitError, match=r"audio_s must be in \[time\]"):
        transcribe("whisper-small", "h100-sxm", audio_s=Q(1, "GB"))


def test_a_clip_shorter_than_a_window_decodes_its_share_of_the_text():
    """150 words a minute x 4/3 tokens a word: 100 tokens in 30 s, so a 1 s clip holds
    ceil(100 / 30) = 4; it had been charged a whole window's 100 steps (7-10x its latency)."""
    one, full = transcribe("whisper-large-v3", "h100-sxm", audio_s=1.0), transcribe("whisper-large-v3", "h100-sxm",
                                                                                      audio_s=30.0)
    assert (one.tokens, full.tokens) == (4, 100)
    assert one.encoder.time_s == full.encoder.time_s  # the encoder still reads a padded 30 s window
    assert one.latency_s < full.latency_s / 5
    assert transcribe("whisper-large-v3", "h100-sxm", audio_s=31.0).tokens == 100  # two windows
