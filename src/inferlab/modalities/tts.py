"""Text to speech: time to the first audio chunk, and the real-time factor.

Physics
-------
A codec-language-model TTS (Orpheus, Llasa) is a decoder that writes audio-codec tokens at a
fixed rate per second of speech (SNAC 24 kHz: 7 tokens per 12 Hz frame, about 84 per
second [1]; X-codec2: 50 per second [2]); a codec decoder turns each small window of tokens
into waveform. So

- time to first audio = the TTS decoder's prefill of the text it speaks + ``first_chunk``
  tokens at its TPOT + the codec's decode of that first window;
- real-time factor = ``audio_tokens_per_s x (TPOT + window decode / hop)``: below 1 the
  voice outruns playback. A streaming decoder re-decodes a sliding window every ``hop``
  tokens (Orpheus: the last 28 tokens every 7, one frame [3]) on the GPU that runs the
  language model, so its decodes add to the token time.

The codec decoder is a stack of small convolutions and elementwise activations run at batch
one in eager PyTorch: its time is kernel launches, not FLOPs or bytes, so one published
figure holds across GPUs. For SNAC 24 kHz under Orpheus it is about 10 ms a window ("SNAC:
Decoded chunk (49 codes -> 14336 samples) in 0.010s", an RTX 3090 [4]); a codec without a
published figure adds nothing.

Concurrent voices share that decoder: the reference servers run SNAC on one GPU from one
Python process, a window at a time (a lock around the codec in the server of [5]), so with
``c`` voices decoded together each hop waits for ``c`` window decodes, and voices started
together wait on average for ``(c + 1) / 2`` first windows. Issue #106 of [3]'s repository
shows the consequence: 32 parallel requests on an A100 take 15.3 s for 2.7 s of audio.

In a voice agent a language model writes the reply first. A pipeline that waits for the
whole reply starts speaking after ``TTFT + reply_tokens x TPOT`` of the language model; a
streaming pipeline speaks the first clause while the language model writes the second, so
it waits only for ``clause_tokens`` of text, whatever the reply's length.

Both decoders are timed by :func:`inferlab.estimate` at batch ``concurrency`` (the core's
calibrated step model) on the serving ``engine``; a served request also waits for that
engine's server work before its prefill (the calibration profile's ``request_overhead_s``:
HTTP, tokenizing, the hand-off to the scheduler; vLLM's is about 21 ms), as every TTFT of
:func:`inferlab.serve` does.

References
----------
.. [1] Siuzdak, "SNAC: multi-scale neural audio codec", 2024.
.. [2] Ye et al., "Llasa: scaling train-time and inference-time compute for Llama-based
   speech synthesis", 2025, Section 3.1.
.. [3] canopyai/Orpheus-TTS, ``orpheus_tts/decoder.py``: a window of the last 28 tokens is
   converted to audio whenever the count of tokens is a multiple of 7 past 27.
.. [4] canopyai/Orpheus-TTS issue #221 (May 2025), a FastAPI Orpheus server's log on an
   RTX 3090.
.. [5] canopyai/Orpheus-TTS issue #84, an OpenAI-compatible Orpheus server on vLLM
   (``model_lock = threading.Lock()`` around the SNAC model on ``cuda``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..checks import boolean
from ..errors import InfeasibleError, SpecError, option_name
from ..specs.catalog import load_model
from ..specs.hardware import HardwareSpec
from .catalog import ModalitySpec, load_modality


@dataclass(frozen=True)
class SpeechResult:
    """Latency of a spoken reply.

    Attributes
    ----------
    llm_wait_s : float
        Waiting for the language model's text before speech can start [s] (0 without one).
    tts_prefill_s, tts_tpot_s : float
        The TTS decoder's prefill of the clause and its time per audio token [s].
    first_chunk_tokens : int
        Audio tokens of the first decodable window.
    audio_tokens_per_s : float
        Audio tokens per second of speech [token/s].
    codec_window_s : float
        The codec's decode of one window [s] (0 without a published figure).
    codec_hop_tokens : int
        Tokens between two window decodes while streaming.
    voices : int
        Voices decoded together, whose window decodes queue on one codec.
    request_overhead_s : float
        The serving engine's work on a request before its prefill [s].
    """

    model: str
    hardware: str
    llm_wait_s: float
    tts_prefill_s: float
    tts_tpot_s: float
    first_chunk_tokens: int
    audio_tokens_per_s: float
    codec_window_s: float = 0.0
    codec_hop_tokens: int = 1
    voices: int = 1
    request_overhead_s: float = 0.0

    @property
    def first_window_wait_s(self) -> float:
        """Mean wait for the codec's decode of the first window, queued behind the other
        voices' [s]."""
        return self.codec_window_s * (self.voices + 1) / 2.0

    @property
    def time_to_first_audio_s(self) -> float:
        """From the user's last word to the first audio out [s]."""
        return (self.request_overhead_s + self.llm_wait_s + self.tts_prefill_s
                + self.first_chunk_tokens * self.tts_tpot_s + self.first_window_wait_s)

    @property
    def real_time_factor(self) -> float:
        """Generation time per second of speech [1]: tokens and the window decodes between them."""
        return self.audio_tokens_per_s * (self.tts_tpot_s + self.voices * self.codec_window_s / self.codec_hop_tokens)


#: Text tokens of the first clause a streaming pipeline speaks (about a short sentence).
DEFAULT_CLAUSE_TOKENS = 12


def _what(exc: Exception) -> str:
    """What an estimate's error found, without its advice (which names options speak lacks)."""
    return str(exc).split("; ")[0].split(" (or pass")[0]


def _fit_together(llm: str, a: Any, decoder: str, b: Any, gpu: str, concurrency: int) -> None:
    """Refuse an LLM and a speech decoder whose weights, KV caches and workspaces do not fit one
    GPU together (each estimate checks itself alone), naming only what speak can change: the
    LLM, the voices decoded together (when the weights alone leave room) and the GPU."""
    need = sum(float(m.weights) + float(np.max(m.kv_batch)) + float(np.max(m.workspace)) for m in (a, b)) + a.reserve
    if need > a.budget:
        levers = [f"a smaller {option_name('llm')} (or none: the reply's text given)"]
        if concurrency > 1 and float(a.weights) + float(b.weights) + a.reserve < a.budget:
            levers.append(f"fewer voices at once ({option_name('concurrency')})")
        levers.append("a GPU with more memory")
        raise InfeasibleError(
            f"{llm} and {decoder} together need {need / 1e9:,.1f} GB on one {gpu} (weights {a.weights / 1e9:,.1f} + "
            f"{b.weights / 1e9:,.1f} GB with their KV caches and workspaces) of {a.budget / 1e9:,.1f} GB usable; "
            f"give {', '.join(levers[:-1])} or {levers[-1]}", needed_bytes=need, available_bytes=a.budget)


def speak(model: str | ModalitySpec, hardware: str | HardwareSpec, *, llm: str | None = None,
          prompt_tokens: int = 512, reply_tokens: int = 150, clause_tokens: int | None = None, stream: bool = True,
          concurrency: int = 1, engine: str = "generic") -> SpeechResult:
    """Time to first audio of a reply spoken by ``model``, optionally written first by ``llm``.

    Parameters
    ----------
    llm : str, optional
        Catalog LLM writing the reply on the same hardware (None: the text is given).
    prompt_tokens, reply_tokens : int
        The language model's prompt and reply [token].
    clause_tokens : int, optional
        Text tokens of the first clause, what a streaming pipeline speaks first [token] (default
        12; refused without streaming, where the whole reply is spoken at once).
    stream : bool
        Speak the first clause while the rest is written (False: wait for the whole reply).
    concurrency : int
        Requests decoded together on each model.
    engine : str
        Serving engine of both decoders (``generic``: the step model alone, no server).
    """
    from ..phases.estimate import estimate
    from ..inputs.resolve import resolve_hardware

    spec = model if isinstance(model, ModalitySpec) else load_modality(model, "tts")
    hw = resolve_hardware(hardware)
    stream = boolean(option_name("stream"), stream)  # 'no' had read as true
    if llm is None and prompt_tokens != 512:
        raise SpecError(f"{option_name('prompt_tokens')}: the prompt is the LLM's, and no llm writes the reply here "
                        "(the reply's text is given): give llm, or drop it")
    if not stream and clause_tokens is not None:
        raise SpecError("clause_tokens: the first clause is spoken ahead of the rest only when the reply streams; "
                        "without streaming the whole reply is spoken at once")
    clause_tokens = DEFAULT_CLAUSE_TOKENS if clause_tokens is None else clause_tokens
    for name, v in (("prompt_tokens", prompt_tokens), ("reply_tokens", reply_tokens),
                    ("clause_tokens", clause_tokens), ("concurrency", concurrency)):
        if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= 1_000_000:
            raise SpecError(f"{option_name(name)} must be a whole number from 1 to 1,000,000, got {v!r:.40}")
    decoder = str(spec.field("decoder"))
    if llm is not None and load_model(llm).id == load_model(decoder).id:
        raise SpecError(f"llm {llm} is {spec.id}'s own speech decoder; give the LLM that writes the reply")
    if llm is not None:  # the whole reply is written, whatever of it is spoken first
        limit = int(load_model(llm).max_position_embeddings or 0)
        if limit and prompt_tokens + reply_tokens > limit:
            raise SpecError(f"llm {llm}: its prompt ({prompt_tokens:,} tokens) and reply ({reply_tokens:,}, "
                            f"{option_name('reply_tokens')}) make {prompt_tokens + reply_tokens:,} tokens, more than "
                            f"the {limit:,} positions it was trained for: give a shorter reply")
    spoken = min(clause_tokens, reply_tokens) if stream else reply_tokens
    wait = 0.0
    chunk = int(spec.field("first_chunk_tokens"))
    try:  # the estimates' advice names options speak does not have (waves, allow_long_context, layouts)
        t = estimate(decoder, hw, isl=spoken, osl=chunk, batch_size=concurrency, engine=engine)
    except (InfeasibleError, SpecError) as exc:
        capacity = getattr(exc, "needed_bytes", None) is not None or "positions" in str(exc)
        if not capacity:  # not about size (an engine that does not run on the device): as it is
            raise type(exc)(f"{spec.id}'s decoder: {exc}") from None
        raise type(exc)(f"{spec.id}'s decoder: {_what(exc)}; lower the concurrency or the reply tokens, or a "
                        "larger GPU") from None
    if llm is not None:
        try:
            e = estimate(llm, hw, isl=prompt_tokens, osl=spoken, batch_size=concurrency, engine=engine)
        except InfeasibleError as exc:
            raise InfeasibleError(f"llm {llm}: {_what(exc)}; speak runs the LLM on one {hw.id}: give a smaller one "
                                  "or a larger GPU") from None
        _fit_together(llm, e.memory, decoder, t.memory, hw.id, concurrency)
        wait = float(e.ttft_s) + (spoken - 1) * float(e.tpot_s)
    codec = spec.config.get("codec_window_decode_s") or 0.0
    return SpeechResult(spec.id, hw.id, wait, float(t.ttft_s), float(t.tpot_s), chunk,
                        float(spec.field("audio_tokens_per_s")), float(codec),
                        int(spec.config.get("codec_hop_tokens") or 1), concurrency,
                        float(t.deployment.profile.request_overhead_s))
