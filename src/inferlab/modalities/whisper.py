"""Speech recognition with a Whisper-style encoder-decoder: 30-second windows fanned out.

Physics
-------
Whisper reads audio as 30-second windows of log-mel frames (100 per second, 3000 per
window); two convolutions (the second with stride 2) make 1500 encoder positions, and the
encoder runs full attention over them: a compute-bound pass per window [1]. The decoder
then writes the window's text one token at a time, cross-attending to the 1500 encoded
positions, whose keys and values it reads at every step: a memory-bound loop. English
speech runs about 150 words per minute [2], and Whisper's byte-pair vocabulary spends
about 4/3 tokens per English word [3]: about 100 tokens per 30-second window.

A recording of ``D`` seconds is ``ceil(D / 30)`` windows. Windows are independent when the
previous window's text is not fed as a prompt (batched pipelines: WhisperX,
faster-whisper's ``BatchedInferencePipeline``, transformers' chunked pipeline), so they fan
out over batches and GPUs: the latency floor is one window's encoder pass and decode
loop, whatever the fan-out. Sequential long-form decoding (openai-whisper, faster-whisper's
default) runs the windows one after another.

Beam search with ``k`` beams decodes ``k`` sequences of a window as one batch. How the
engine runs that step matters as much as the bytes it reads (:data:`ENGINES`):

- ``generic``: the step is the graph's ten kernels per decoder layer, and every beam reads
  its own copy of the window's cross-attention keys and values (transformers and
  openai-whisper expand the encoder output by the beam count).
- ``ctranslate2`` (faster-whisper): the projected cross-attention keys and values are kept
  once per window and shared by its beams ("No need to replicate projected memory keys and
  values as they are the same for each beam" [5]); a decoder layer is about 35 kernels per
  step, not ten: besides its six GEMMs and four attention products, three layer norms, six
  bias adds, a split, six head transposes, two cache concatenations, two softmaxes, three
  residual adds and the two gathers that reorder each layer's cache by beam, the ops its
  profiler lists for Whisper's generate [6], where GEMMs and attention products take only
  33-41% of the time. Each of those small kernels costs the efficiency's ``op_floor_s``.

In either engine the self-attention cache is not written in place: each step concatenates the
step's keys and values onto each layer's cache, reading the old cache and writing the grown
one (CTranslate2's attention concatenates ``cached_keys`` with the step's keys [5]; transformers'
tuple cache and openai-whisper's cache hooks do the same with ``torch.cat``), and with beams
each step reorders every layer's cache by the beams' origins (a gather: read and written once
more). Both move bytes in proportion to the tokens cached, which include the window's prompt.
The prompt opens every window with ``<|startoftranscript|>``, the language and the task [1];
sequential long form (openai-whisper's and faster-whisper's ``transcribe``, whose
``condition_on_previous_text`` is on by default) puts ``<|startofprev|>`` and the text of the
earlier windows before them: the last 223 tokens of all of it (half the decoder's 448 positions,
less one), none on the first window [8]; each window waits for that text, so the windows run
one after another. The decoder reads the prompt in one pass (causal self-attention over its tokens, cross
attention to the window's frames) before its first step.

Speaker diarization runs after, over the whole recording; its clustering does not
split over GPUs: pyannote's pipeline takes about 2.5% of the audio's duration [4].

Pipelines cut long audio differently. Transformers' chunked pipeline overlaps its windows by
``stride`` seconds on each side (by default a sixth of the 30 s chunk, 5 s), so a window
advances only ``30 - 2 stride`` seconds: 1.5 times the windows at the default. Before the GPU
sees a window, its log-mel features are computed, on the host or on the GPU: transformers'
NumPy extractor takes about 1.5 s for a batch of 8 windows on the CPU, its batched torch
version 0.25 s, and on the GPU 0.02 s [7] (:data:`FEATURES_S_PER_WINDOW`), serial with the
GPU's work when the pipeline prepares chunks in its own process.

The real-time factor is processing time over audio duration (below 1: faster than real time).

References
----------
.. [1] Radford et al., "Robust speech recognition via large-scale weak supervision"
   (Whisper), ICML 2023, Section 2.2.
.. [2] National Center for Voice and Speech: conversational English at about 150 words per
   minute.
.. [3] OpenAI, "What are tokens and how to count them": "1 token ~= 3/4 words".
.. [4] pyannote/speaker-diarization-3.1 model card: "Real-time factor is around 2.5% using
   one Nvidia Tesla V100 SXM2 GPU".
.. [5] OpenNMT/CTranslate2, ``src/layers/transformer.cc``,
   ``TransformerDecoder::replicate_state``.
.. [6] OpenNMT/CTranslate2 issue #1588 (Dec 2023), profiles of faster-whisper's generate:
   Gemm 28.7% and MatMul 11.9% of the time in one, 19.8% and 12.9% in the other, the rest in
   BiasAdd, Concat, SoftMax, Gather, TopK, LayerNorm, Transpose, Split and Add.
.. [7] huggingface/transformers issue #29901 (Mar 2024), WhisperFeatureExtractor: "cutting
   the average time for batches of 8 from 1.5 seconds to 0.25 seconds" on the CPU, and to
   "0.02 seconds" on the GPU.
.. [8] SYSTRAN/faster-whisper, ``faster_whisper/transcribe.py``: ``generate_segments`` passes
   ``all_tokens[prompt_reset_since:]`` (every window's tokens so far) and ``get_prompt`` cuts them
   to their last ``max_length // 2 - 1`` (448 // 2 - 1 = 223) after ``<|startofprev|>`` (none
   when there are none), then the SOT sequence; ``condition_on_previous_text=True`` by default.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..checks import boolean, in_unit, real
from ..core.ops import Attention, Elementwise, Gemm, Op
from ..errors import InfeasibleError, SpecError, option, option_name
from ..precision import number_format
from ..specs.hardware import HardwareSpec
from .catalog import ModalitySpec, load_modality
from .passes import DATASHEET, Efficiency, FullAttention, PassTime, check_fits, norm, time_pass

WINDOW_S = 30.0
#: Text tokens per 30-second window of English speech: 150 words/min x 0.5 min x 4/3 [2, 3].
TOKENS_PER_WINDOW = 100
#: Prompt tokens of every window: <|startoftranscript|>, the language and the task [1].
SOT_TOKENS = 3
#: Most previous-text tokens a window is prompted with (448 // 2 - 1), after <|startofprev|> [8].
PREVIOUS_TEXT_MAX = 223
#: Diarization time per second of audio [s/s] (pyannote 3.1 [4]).
DIARIZATION_RTF = 0.025
#: Log-mel feature extraction per 30-second window [s], by implementation [7]: none (not
#: timed, or done elsewhere), transformers' NumPy extractor on the CPU, its batched torch
#: version on the CPU, and on the GPU.
FEATURES_S_PER_WINDOW = {"none": 0.0, "numpy": 1.5 / 8, "torch-cpu": 0.25 / 8, "gpu": 0.02 / 8}
#: Host time of one decode step [s]: the generate loop's logits processing, token
#: selection and stopping checks between kernels (an assumption of 1.5 ms for a Python or
#: CTranslate2 loop, not fitted; tiny decoders such as large-v3-turbo's 4 layers are bound
#: by it).
STEP_OVERHEAD_S = 1.5e-3


def encoder_ops(spec: ModalitySpec, windows: float, precision: str = "fp16") -> tuple[Op, ...]:
    """One encoder pass over ``windows`` 30-second windows, plus the decoder's cross K/V."""
    c = spec.config
    d, n, f = int(c["d_model"]), int(c["encoder_layers"]), int(c["encoder_ffn_dim"])
    heads, pos, mel = int(c["encoder_attention_heads"]), int(c["max_source_positions"]), int(c["num_mel_bins"])
    rows = windows * pos
    g = dict(count=n, precision=precision)
    return (
        Gemm("conv1", m=2 * rows, n=d, k=3 * mel, precision=precision),
        Gemm("conv2_stride2", m=rows, n=d, k=3 * d, precision=precision),
        Gemm("qkv", m=rows, n=3 * d, k=d, **g),
        FullAttention("attention", batch=windows, seq=pos, heads=heads, head_dim=d / heads, count=n),
        Gemm("o_proj", m=rows, n=d, k=d, **g),
        Gemm("ffn_up", m=rows, n=f, k=d, **g),
        Gemm("ffn_down", m=rows, n=d, k=f, **g),
        norm("norms", rows, d, count=2 * n),
        Gemm("decoder_cross_kv", m=rows, n=2 * d, k=d, count=int(c["decoder_layers"]), precision=precision),
    )


@dataclass(frozen=True)
class DecodeEngine:
    """How an engine runs a Whisper decode step (see the module notes).

    Attributes
    ----------
    extra_kernels_per_layer : int
        Small kernels per decoder layer per step beyond the graph's ten and its cache copies
        (bias adds, transposes, splits), each a launch floor.
    shares_cross_kv : bool
        The beams of a window read one copy of its cross-attention keys and values.
    """

    extra_kernels_per_layer: int = 0
    shares_cross_kv: bool = False


#: Decode engines by name: the graph as drawn, and CTranslate2's (faster-whisper) [5, 6]: its 35
#: kernels a layer less the graph's ten and the two concatenations and two beam gathers that
#: :func:`decoder_step_ops` draws as cache copies.
ENGINES = {"generic": DecodeEngine(), "ctranslate2": DecodeEngine(extra_kernels_per_layer=21, shares_cross_kv=True)}


def _decoder(spec: ModalitySpec, rows: float, precision: str, engine: DecodeEngine, self_attention: Op,
             cross_attention: Op, *tail: Op) -> tuple[Op, ...]:
    """The decoder's layers over ``rows`` token rows with the attentions given, then ``tail``
    and the engine's small kernels."""
    c = spec.config
    d, n, f = int(c["d_model"]), int(c["decoder_layers"]), int(c["decoder_ffn_dim"])
    g = _gemm_args(spec, precision)
    return (
        Elementwise("embedding", elements_read=rows * d, elements_written=rows * d),
        Gemm("self_qkv", m=rows, n=3 * d, k=d, **g),
        self_attention,
        Gemm("self_o", m=rows, n=d, k=d, **g),
        Gemm("cross_q_o", m=rows, n=2 * d, k=d, **g),
        cross_attention,
        Gemm("ffn_up", m=rows, n=f, k=d, **g),
        Gemm("ffn_down", m=rows, n=d, k=f, **g),
        norm("norms", rows, d, count=3 * n),
        *tail,
    ) + ((norm("small_kernels", rows, d, count=n * engine.extra_kernels_per_layer, passes=1.0),)
         if engine.extra_kernels_per_layer else ())


def _gemm_args(spec: ModalitySpec, precision: str) -> dict:
    """A decoder layer's GEMM keywords: one per layer, at ``precision``."""
    return dict(count=int(spec.config["decoder_layers"]), precision=number_format(precision).compute,
                weight_bytes_per_element=number_format(precision).bytes_per_element)


def decoder_step_ops(spec: ModalitySpec, sequences: float, context: float, precision: str = "fp16", *,
                     beams: int = 1, engine: DecodeEngine = ENGINES["generic"]) -> tuple[Op, ...]:
    """One decode step of ``sequences`` windows (times ``beams``) with ``context`` tokens cached."""
    c = spec.config
    d, n = int(c["d_model"]), int(c["decoder_layers"])
    heads, pos = int(c["decoder_attention_heads"]), int(c["max_source_positions"])
    shared = beams if engine.shares_cross_kv else 1
    reorder = (Elementwise("beam_reorder", elements_read=sequences * (context + 1) * d,
                           elements_written=sequences * (context + 1) * d, count=2 * n),) if beams > 1 else ()
    return _decoder(
        spec, sequences, precision, engine,
        Attention("self_attention", batch=sequences, new_tokens=1, context=context, heads=heads, kv_heads=heads,
                  qk_dim=d / heads, v_dim=d / heads, kv_elements=2 * d, count=n),
        # a shared copy: each window's beams are the queries of one attention over its frames
        FullAttention("cross_attention", batch=sequences / shared, seq=shared, kv_seq=pos, heads=heads,
                      head_dim=d / heads, count=n),
        Gemm("lm_head", m=sequences, n=int(c["vocab_size"]), k=d, **{**_gemm_args(spec, precision), "count": 1}),
        # the keys' and the values' caches of each layer grow by a copy: the old read, the grown written
        Elementwise("cache_concat", elements_read=sequences * context * d,
                    elements_written=sequences * (context + 1) * d, count=2 * n),
        *reorder)


def prompt_ops(spec: ModalitySpec, windows: float, rows: float, precision: str = "fp16", *,
               engine: DecodeEngine = ENGINES["generic"]) -> tuple[Op, ...]:
    """The decoder's pass over the ``rows`` prompt tokens of ``windows`` windows before the first step."""
    c = spec.config
    d, n = int(c["d_model"]), int(c["decoder_layers"])
    heads, pos = int(c["decoder_attention_heads"]), int(c["max_source_positions"])
    return _decoder(
        spec, windows * rows, precision, engine,
        FullAttention("self_attention", batch=windows, seq=rows, heads=heads, head_dim=d / heads, causal=True, count=n),
        FullAttention("cross_attention", batch=windows, seq=rows, kv_seq=pos, heads=heads, head_dim=d / heads, count=n))


@dataclass(frozen=True)
class TranscribeResult:
    """Time to transcribe one recording.

    Attributes
    ----------
    audio_s : float
        Duration of the recording [s].
    windows, rounds : int
        30-second windows; batches one GPU runs one after another.
    batch : int
        Windows per batch.
    encoder, step : PassTime
        An encoder pass and a mid-window decode step at that batch.
    diarization_s : float
        Serial speaker diarization [s] (0 when not asked for).
    features_s : float
        Log-mel features of every window, serial with the GPU's work [s].
    prompt_tokens : float
        Tokens a window's decode opens with (the SOT sequence and any previous text), the
        mean over the windows.
    prompt_s : float
        The decoder's pass over a batch's prompts, before its first step [s].
    """

    model: str
    hardware: str
    gpus: int
    audio_s: float
    windows: int
    batch: int
    rounds: int
    tokens: int
    encoder: PassTime
    step: PassTime
    diarization_s: float
    step_overhead_s: float = STEP_OVERHEAD_S
    features_s: float = 0.0
    prompt_tokens: float = SOT_TOKENS
    prompt_s: float = 0.0

    @property
    def window_s(self) -> float:
        """One batch of windows: encoder pass, prompt pass and decode loop [s]."""
        return (float(self.encoder.time_s) + self.prompt_s
                + self.tokens * (float(self.step.time_s) + self.step_overhead_s))

    @property
    def latency_s(self) -> float:
        """Recording in, text out [s]."""
        return self.features_s + self.rounds * self.window_s + self.diarization_s

    @property
    def real_time_factor(self) -> float:
        """Processing time over audio duration [1]."""
        return self.latency_s / self.audio_s


def transcribe(model: str | ModalitySpec, hardware: str | HardwareSpec, *, audio_s: float = 3600.0, gpus: int = 1,
               batch: int | None = None, beams: int = 1, tokens_per_window: int = TOKENS_PER_WINDOW,
               precision: str = "fp16", diarize: bool = False, step_overhead_s: float = STEP_OVERHEAD_S,
               engine: str = "generic", stride_s: float = 0.0, features: str = "none",
               previous_text: bool = False, efficiency: Efficiency = DATASHEET) -> TranscribeResult:
    """Latency and real-time factor of transcribing ``audio_s`` seconds of speech.

    Parameters
    ----------
    audio_s : float
        Recording length [s].
    gpus : int
        GPUs the windows fan out over.
    batch : int, optional
        Windows per batch on a GPU; default all of that GPU's windows at once, or the most
        that fit its memory. ``1`` is sequential long-form decoding.
    beams : int
        Beam width (each beam a decoded sequence).
    diarize : bool
        Add serial speaker diarization.
    step_overhead_s : float
        Host time per decode step [s] (:data:`STEP_OVERHEAD_S`).
    engine : str
        How the decode step runs: ``generic`` or ``ctranslate2`` (:data:`ENGINES`).
    stride_s : float
        Overlap on each side of a window [s] (transformers' chunked pipeline: 5).
    features : str
        Where the log-mel features are computed (:data:`FEATURES_S_PER_WINDOW`).
    previous_text : bool
        Prompt each window with the text before it (``condition_on_previous_text``,
        the default of sequential long form): ``<|startofprev|>`` and the last tokens of the
        windows before, at most :data:`PREVIOUS_TEXT_MAX`, before the SOT sequence (none on the
        first window; the mean over the windows is timed). The windows then run one at a
        time: ``batch`` 1 (its default then) on one GPU.
    """
    from ..inputs.resolve import resolve_hardware

    spec = model if isinstance(model, ModalitySpec) else load_modality(model, "speech")
    hw = resolve_hardware(hardware)
    # at least one 10 ms mel frame (a 160-sample hop at 16 kHz): a real-time factor over less is no rate
    audio_s = real(option_name("audio_s"), audio_s, minimum=0.01, maximum=1e7, unit="s")
    stride_s = in_unit("stride_s", stride_s, "s")  # (a quantity: in s)
    step_overhead_s = real(option_name("step_overhead_s"), step_overhead_s, minimum=0.0, maximum=1.0, unit="s")
    diarize = boolean(option_name("diarize"), diarize)
    for name, v in (("gpus", gpus), ("beams", beams), ("tokens_per_window", tokens_per_window)):
        if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= 100_000:
            raise SpecError(f"{option_name(name)} must be a whole number from 1 to 100,000, got {v!r:.40}")
    if engine not in ENGINES:
        raise SpecError(f"engine must be one of {', '.join(ENGINES)}, got {engine!r:.40}")
    how = ENGINES[engine]
    if features not in FEATURES_S_PER_WINDOW:
        raise SpecError(f"features must be one of {', '.join(FEATURES_S_PER_WINDOW)}, got {features!r:.40}")
    if hw.kind != "gpu" and (features == "gpu" or gpus != 1):  # a CPU socket or a phone runs it alone
        raise SpecError(f"{hw.id} is a {hw.kind}, not a GPU: "
                        f"{option('features', 'gpu') if features == 'gpu' else option('gpus', gpus)} means nothing there")
    if isinstance(stride_s, bool) or not isinstance(stride_s, (int, float)) or not 0 <= stride_s < WINDOW_S / 2:
        raise SpecError(f"{option_name('stride_s')} must be an overlap in seconds in [0, 15), got {stride_s!r:.40}")
    if not isinstance(previous_text, bool):
        raise SpecError(f"{option_name('previous_text')} must be true or false, got {previous_text!r:.40}")
    if previous_text and (gpus != 1 or batch not in (None, 1)):
        got = [f"batch {batch!r:.20}"] * (batch not in (None, 1)) + [f"{gpus!r:.20} GPUs"] * (gpus != 1)
        raise SpecError("previous_text prompts each window with the text of the ones before it, so the windows run "
                        f"one at a time: batch 1 on 1 GPU, got {' on '.join(got)}")
    if previous_text and stride_s:
        raise SpecError("stride_s: sequential long-form transcription (previous_text) moves each window to where the "
                        "last one's text ended, without the chunked pipeline's overlapping stride; give one of them")
    hop = WINDOW_S - 2 * stride_s
    windows = 1 + max(math.ceil((audio_s - WINDOW_S) / hop - 1e-9), 0)
    # a clip shorter than a window holds its share of a window's text (the encoder still reads 30 s, padded)
    tokens = tokens_per_window if windows > 1 else max(1, math.ceil(tokens_per_window * min(audio_s / WINDOW_S, 1.0)))
    prompt = _mean_prompt(windows, tokens) if previous_text else float(SOT_TOKENS)
    context = prompt + tokens / 2  # cached tokens at a mid-window step
    per_gpu = math.ceil(windows / gpus)
    size = (1 if previous_text else per_gpu) if batch is None else batch
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        raise SpecError(f"{option_name('batch')} must be a whole number of windows >= 1, got {batch!r:.40}")
    size = min(size, per_gpu)
    while True:  # by default, the most windows per batch that fit (halving from all of them)
        enc_ops = encoder_ops(spec, size, number_format(precision).compute)
        step_ops = decoder_step_ops(spec, size * beams, context, precision, beams=beams, engine=how)
        copies = size if how.shares_cross_kv else size * beams
        try:
            check_fits(f"{spec.id} at {size} window(s) per batch" + (f" x {beams} beams" if beams > 1 else ""), hw,
                       enc_ops + step_ops, _cross_kv_bytes(spec, copies, precision), "cross-attention keys and values",
                       "use fewer beams, a smaller batch or a larger GPU" if beams > 1 and size == 1
                       else "use a smaller batch or a larger GPU")
            break
        except InfeasibleError:
            if batch is not None or size == 1:
                raise
            size = math.ceil(size / 2)
    encoder = time_pass(enc_ops, hw, efficiency)
    step = time_pass(step_ops, hw, efficiency)
    # the prompt's last token is the first step's input; the pass reads the ones before it, once per beam where
    # the beams are copies from the start (transformers and openai-whisper repeat the tokens by the beam count
    # before the first pass: repeat_interleave), once a window in CTranslate2, whose beams share its state
    rows = size if how.shares_cross_kv else size * beams
    prompt_s = float(time_pass(prompt_ops(spec, rows, prompt - 1, precision, engine=how), hw, efficiency).time_s)
    return TranscribeResult(spec.id, hw.id, gpus, float(audio_s), windows, size, math.ceil(per_gpu / size), tokens,
                            encoder, step, DIARIZATION_RTF * audio_s if diarize else 0.0, float(step_overhead_s),
                            windows * FEATURES_S_PER_WINDOW[features], prompt, prompt_s)


def _mean_prompt(windows: int, tokens: int) -> float:
    """Mean prompt tokens of ``windows`` sequential windows of ``tokens`` each with the previous
    text: the first the SOT sequence alone; the ``i``-th after it ``<|startofprev|>`` and the last
    ``min(i x tokens, 223)`` tokens before it too [8]."""
    after = windows - 1
    ramp = min(after, -(-PREVIOUS_TEXT_MAX // tokens) - 1)  # windows before the text reaches the cut
    text = tokens * ramp * (ramp + 1) / 2 + (after - ramp) * PREVIOUS_TEXT_MAX
    return SOT_TOKENS + (after + text) / windows


def _cross_kv_bytes(spec: ModalitySpec, sequences: float, precision: str) -> float:
    """Cross-attention keys and values the decoder keeps for ``sequences`` windows (every
    encoder frame, every decoder layer) while it writes their text [B]."""
    c = spec.config
    return (sequences * int(c["max_source_positions"]) * int(c["decoder_layers"]) * 2 * int(c["d_model"])
            * number_format(precision).bytes_per_element)
