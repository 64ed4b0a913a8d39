"""Text to speech: first audio chunk, streaming from the language model's partial output, RTF."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from inferlab.errors import SpecError, UnknownNameError
from inferlab.modalities.tts import speak


def test_first_audio_and_rtf_by_definition():
    r = speak("orpheus-3b", "h100-sxm")
    # SNAC: 84 audio tokens per second of speech; the first window is 28 tokens (4 frames of 7).
    assert r.real_time_factor == pytest.approx(84 * r.tts_tpot_s)
    assert r.time_to_first_audio_s == pytest.approx(r.tts_prefill_s + 28 * r.tts_tpot_s)
    assert r.llm_wait_s == 0.0


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
