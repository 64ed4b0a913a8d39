"""Text to speech: first audio chunk, streaming from the language model's partial output, RTF."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from inferlab.errors import SpecError, UnknownNameError
from inferlab.modalities.tts import speak


def test_first_audio_and_rtf_by_definition():
    r = speak("orpheus-3b", "h100-sxm")
    # SNAC: 84 audio tokens per second of speech; the first window is 28 tokens (4 frames of 7),
    # decoded in 10 ms (issue #221's RTX 3090 log), and a window is re-decoded every 7 tokens.
    assert r.real_time_factor == pytest.approx(84 * (r.tts_tpot_s + 0.010 / 7))
    assert r.time_to_first_audio_s == pytest.approx(r.tts_prefill_s + 28 * r.tts_tpot_s + 0.010)
    assert r.llm_wait_s == 0.0
    # 32 voices queue on one codec: the mean first window waits for 16.5 decodes, and every
    # hop of 7 tokens waits for 32 of them.
    many = speak("orpheus-3b", "h100-sxm", concurrency=32)
    assert many.first_window_wait_s == pytest.approx(0.165)
    assert many.real_time_factor == pytest.approx(84 * (many.tts_tpot_s + 32 * 0.010 / 7))
    # Served by vLLM, the request first waits for the server's work (the shipped profile's
    # request_overhead_s of vllm, about 21 ms).
    from inferlab.calibration.profile import load_profile

    server = load_profile("default", "vllm", "h100-sxm", "hopper").request_overhead_s
    assert 0.015 < server < 0.03
    served = speak("orpheus-3b", "h100-sxm", engine="vllm")
    assert served.request_overhead_s == pytest.approx(server) and r.request_overhead_s == 0.0
    assert served.time_to_first_audio_s == pytest.approx(
        server + served.tts_prefill_s + 28 * served.tts_tpot_s + 0.010)
    # Llasa's X-codec2 has no published decode time: it adds nothing.
    llasa = speak("llasa-1b", "h100-sxm")
    assert llasa.real_time_factor == pytest.approx(50 * llasa.tts_tpot_s)


@settings(max_examples=10, deadline=None)
@given(c=st.integers(1, 64))
def test_more_voices_never_speak_sooner_or_faster(c):
    a = speak("orpheus-3b", "a100-sxm-80gb", concurrency=c)
    b = speak("orpheus-3b", "a100-sxm-80gb", concurrency=c + 1)
    assert b.time_to_first_audio_s >= a.time_to_first_audio_s * (1 - 1e-9)
    assert b.real_time_factor >= a.real_time_factor * (1 - 1e-9)


@settings(max_examples=10, deadline=None)
@given(reply=st.integers(20, 2000))
def test_streaming_speaks_before_the_reply_is_written(reply):
    stream = speak("llasa-1b", "h100-sxm", llm="llama-3.1-8b", reply_tokens=reply)
    short = speak("llasa-1b", "h100-sxm", llm="llama-3.1-8b", reply_tokens=20)
    wait = speak("llasa-1b", "h100-sxm", llm="llama-3.1-8b", reply_tokens=reply, stream=False)
    # The first clause (12 tokens) is spoken while the rest is written: the reply's length
    # does not matter; waiting for the whole reply costs its decode time.
    assert stream.time_to_first_audio_s == pytest.approx(short.time_to_first_audio_s)
    assert wait.time_to_first_audio_s > stream.time_to_first_audio_s


def test_concurrency_slows_each_voice():
    one = speak("orpheus-3b", "l4")
    many = speak("orpheus-3b", "l4", concurrency=32)
    assert many.real_time_factor > one.real_time_factor


def test_bad_input():
    with pytest.raises(UnknownNameError, match="did you mean 'orpheus-3b'"):
        speak("orpheus-3", "h100-sxm")
    with pytest.raises(SpecError, match="clause_tokens"):
        speak("orpheus-3b", "h100-sxm", clause_tokens=0)


def test_the_llm_and_the_speech_decoder_must_fit_one_gpu_together():
    """Llama-3.1-8B (16.1 GB of BF16 weights) and Orpheus 3B (6.6 GB) each fit an L4's 21.7 GB
    usable on their own, not together; an L40S holds both."""
    from inferlab.errors import InfeasibleError
    from inferlab.modalities.tts import speak

    with pytest.raises(InfeasibleError, match="llama-3.1-8b and orpheus-3b together need"):
        speak("orpheus-3b", "l4", llm="llama-3.1-8b")
    assert speak("orpheus-3b", "l40s", llm="llama-3.1-8b").llm_wait_s > 0


@pytest.mark.parametrize("kwargs, message", [
    ({"llm": "orpheus-3b"}, "own speech decoder"),
    ({"stream": False, "clause_tokens": 5}, "only when the reply streams"),
    ({"concurrency": 100_000}, "lower the concurrency"),
])
def test_meaningless_speech_options_are_refused_in_speaks_own_terms(kwargs, message):
    from inferlab.errors import InferlabError
    from inferlab.modalities.tts import speak

    with pytest.raises(InferlabError, match=message) as err:
        speak("orpheus-3b", "h100-sxm", **kwargs)
    assert "waves=True" not in str(err.value) and "allow_long_context" not in str(err.value)
