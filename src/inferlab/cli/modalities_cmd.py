"""``inferlab embed | diffuse | vlm | transcribe | speak | on-device | modalities``: the non-chat kinds.

Each command resolves its model in the modalities catalog (``on-device`` in the LLM
catalog) and its hardware anywhere a GPU name is accepted, MIG slices included
(``h100-sxm:3g.40gb``).
"""

from __future__ import annotations

import argparse
from typing import Any

from ..errors import InfeasibleError, SpecError
from ..results.table import text_table
from .args import comma_list

_ints = comma_list(int, "integer")


def _emit(args: argparse.Namespace, data: Any, text: str) -> None:
    from .output import emit

    emit(args, data, text)


def _embed(args: argparse.Namespace) -> None:
    from ..modalities.embeddings import embed

    # a grid keeps the points that run and marks the others with their reason
    results, refused = [], []
    for b in args.batch:
        for s in args.seq_len:
            try:
                results.append(embed(args.model, args.hardware, batch=b, seq_len=s, precision=args.precision))
            except InfeasibleError as exc:
                if len(args.batch) * len(args.seq_len) == 1:
                    raise
                refused.append((b, s, str(exc)))
    if not results:
        raise InfeasibleError(f"no point of the grid runs: {refused[0][2]}")
    rows = [[str(r.batch), str(r.seq), f"{r.latency_s * 1e3:,.2f}", f"{r.sequences_per_s:,.0f}",
             f"{r.tokens_per_s:,.0f}", r.bottleneck] for r in results]
    rows += [[str(b), str(s), "-", "-", "-", "does not fit"] for b, s, _ in refused]
    head = f"{results[0].model} on {results[0].hardware}, {args.precision}, one forward pass per batch (no KV cache)"
    text = head + "\n" + text_table(["batch", "seq", "pass ms", "seqs/s", "tokens/s", "bound"], rows, right={0, 1, 2, 3, 4})
    text += "".join(f"\nbatch {b} x {s}: {why}" for b, s, why in refused)
    text += "\nCPU tokenizer supplies ~12.5M tokens/s (tokenizers: 1 GB of text in 20 s at 4 B/token)."
    _emit(args, lambda: [{"batch": r.batch, "seq_len": r.seq, "latency_s": r.latency_s, "sequences_per_s":
                          r.sequences_per_s, "tokens_per_s": r.tokens_per_s, "bound": r.bottleneck} for r in results]
          + [{"batch": b, "seq_len": s, "latency_s": None, "sequences_per_s": None, "tokens_per_s": None,
              "bound": None, "reason": why} for b, s, why in refused], text)


def _eager_modelled(model: str) -> bool:
    """Whether ``diffuse`` counts the model's unfused kernels (the UNet's and FLUX's; not a video DiT's)."""
    from ..modalities.catalog import load_modality

    return load_modality(model, "diffusion").config.get("_class_name") in ("UNet2DConditionModel",
                                                                            "FluxTransformer2DModel")


def _diffuse(args: argparse.Namespace) -> None:
    from ..modalities.diffusion import diffuse

    r = diffuse(args.model, args.hardware, steps=args.steps, height=args.height, width=args.width, frames=args.frames,
                batch=args.batch, cfg_off_fraction=args.cfg_off_fraction, precision=args.precision, cp=args.cp,
                execution=args.execution)
    size = f"{args.width}x{args.height}" + (f"x{args.frames} frames" if args.frames > 1 else "")
    rows = [["denoise", f"{r.guided_steps} with CFG + {r.plain_steps} without", f"{r.passes:g}",
             f"{r.denoise_s:,.2f}"],
            ["VAE decode", "-", "-", f"{float(r.decode.time_s):,.3f}" if r.decode else "not modelled"],
            ["total", "", "", f"{r.latency_s:,.2f}"]]
    text = (f"{r.model} on {r.cp}x {r.hardware}, {args.precision}" + (", eager" if args.execution == "eager" else "")
            + f", {size}, {r.tokens:,.0f} tokens per sample, "
            f"{args.steps} steps\n" + text_table(["phase", "steps", "passes", "seconds"], rows, right={2, 3})
            + f"\nstep {r.step_s * 1e3:,.1f} ms, {r.plain_pass.bound}-bound; weights {r.weight_bytes / 1e9:.1f} GB per GPU")
    if args.execution == "eager" and r.tokens and not _eager_modelled(args.model):
        text += "\neager: this video DiT's unfused kernels are not modelled yet; it is priced as compiled"
    _emit(args, lambda: {"latency_s": r.latency_s, "denoise_s": r.denoise_s, "step_s": r.step_s, "passes": r.passes,
                         "guided_steps": r.guided_steps, "plain_steps": r.plain_steps, "gpus": r.cp,
                         "vae_decode_s": float(r.decode.time_s) if r.decode else None, "comm_s": r.comm_s,
                         "weight_bytes_per_gpu": r.weight_bytes, "tokens": r.tokens, "bound": r.plain_pass.bound},
          text)


def _transcribe(args: argparse.Namespace) -> None:
    from ..modalities.whisper import transcribe

    r = transcribe(args.model, args.hardware, audio_s=args.audio_s, gpus=args.gpus, batch=args.batch, beams=args.beams,
                   diarize=args.diarize, engine=args.engine, stride_s=args.stride_s, features=args.features,
                   previous_text=args.previous_text)
    audio = f"{r.audio_s:,.4g}" if r.audio_s < 100 else f"{r.audio_s:,.0f}"  # a half-second clip is not "0"
    rows = [[audio, str(r.windows), f"{r.features_s:,.2f}", str(r.batch), str(r.rounds),
             f"{r.window_s:,.3f}", f"{r.diarization_s:,.1f}", f"{r.latency_s:,.2f}", f"{r.real_time_factor:.4f}"]]
    text = (f"{r.model} on {r.gpus}x {r.hardware}, {args.beams} beam(s), 30 s windows"
            + (f" every {30 - 2 * args.stride_s:g} s" if args.stride_s else "")
            + (f", {args.engine} decode" if args.engine != "generic" else "")
            + (f", a {r.prompt_tokens:,.0f}-token prompt on average" if args.previous_text else "") + "\n"
            + text_table(["audio s", "windows", "features s", "batch", "rounds", "batch s", "diarize s", "latency s",
                          "RTF"], rows, right=set(range(9))))
    idle = max(r.gpus - r.windows, 0)  # GPUs left without a window: the same latency on fewer
    if idle:
        text += (f"\nidle capacity: {r.windows:,} windows over {r.gpus:,} GPUs leave {idle:,} without one; "
                 f"{r.windows:,} GPUs give the same latency")
    _emit(args, lambda: {"latency_s": r.latency_s, "real_time_factor": r.real_time_factor, "audio_s": r.audio_s,
                         "gpus": r.gpus, "idle_gpus": idle, "windows": r.windows, "batch": r.batch, "rounds": r.rounds,
                         "window_s": r.window_s, "diarization_s": r.diarization_s, "features_s": r.features_s}, text)


def _vlm(args: argparse.Namespace) -> None:
    from ..modalities.vision import serve_images, vlm_ttft

    if args.rate is not None or args.concurrency is not None:
        res = serve_images(args.model, args.hardware, images=args.images, height=args.height, width=args.width,
                           text_tokens=args.text_tokens, osl=256 if args.osl is None else args.osl, rate=args.rate,
                           concurrency=args.concurrency,
                           num_requests=200 if args.num_requests is None else args.num_requests, tp=args.tp,
                           crops=args.crops,
                           implementation=args.implementation, attention_kernel=args.attention_kernel,
                           execution=args.execution, precision=args.precision,
                           allow_long_context=args.allow_long_context)
        _emit(args, res.to_dict, f"{args.images} image(s) of {args.width}x{args.height} per request; the vision "
              "encoder runs on the GPU in the iteration that starts each prompt's prefill (in every row), the user "
              f"rows add the host's image processing\n{res}")
        return
    given = [flag for flag, value in (("--osl", args.osl), ("--num-requests", args.num_requests)) if value is not None]
    if given:
        raise SpecError(f"{' and '.join(given)}: a single request's TTFT has no output or request count; give "
                        "--rate or --concurrency to serve requests")

    r = vlm_ttft(args.model, args.hardware, images=args.images, height=args.height, width=args.width,
                 text_tokens=args.text_tokens, crops=args.crops, tp=args.tp, implementation=args.implementation,
                 attention_kernel=args.attention_kernel, execution=args.execution, precision=args.precision,
                 allow_long_context=args.allow_long_context)
    size, per_image = (f"{args.width}x{args.height}", str(r.layout.tokens)) if r.images else ("-", "-")  # no image
    rows = [[str(r.images), size, per_image, str(r.image_tokens),
             f"{r.host_s * 1e3:,.1f}", f"{r.encoder_s * 1e3:,.1f}", f"{r.prefill_s * 1e3:,.1f}",
             f"{r.ttft_s * 1e3:,.1f}"]]
    formats = f", language model {args.precision}" if args.precision else ""
    text = (f"{r.model} on {r.hardware}{formats}, {r.text_tokens} text tokens\n"
            + text_table(["images", "size", "tokens/image", "image tokens", "host ms", "encoder ms", "prefill ms",
                          "TTFT ms"], rows, right={0, 2, 3, 4, 5, 6, 7}))
    _emit(args, lambda: {"image_tokens": r.image_tokens, "tokens_per_image": r.layout.tokens, "ttft_s": r.ttft_s,
                         "host_s": r.host_s, "encoder_s": r.encoder_s, "prefill_s": r.prefill_s,
                         "precision": args.precision}, text)


def _speak(args: argparse.Namespace) -> None:
    from ..modalities.tts import DEFAULT_CLAUSE_TOKENS, speak

    clause = DEFAULT_CLAUSE_TOKENS if args.clause_tokens is None else args.clause_tokens

    r = speak(args.model, args.hardware, llm=args.llm, reply_tokens=args.reply_tokens, clause_tokens=args.clause_tokens,
              stream=not args.no_stream, concurrency=args.concurrency, engine=args.engine)
    rows = [[f"{r.request_overhead_s * 1e3:,.1f}", f"{r.llm_wait_s * 1e3:,.1f}", f"{r.tts_prefill_s * 1e3:,.1f}",
             f"{r.first_chunk_tokens} x {r.tts_tpot_s * 1e3:,.2f}", f"{r.first_window_wait_s * 1e3:,.1f}",
             f"{r.time_to_first_audio_s * 1e3:,.1f}", f"{r.real_time_factor:.3f}"]]
    text = (f"{r.model} on {r.hardware}" + (f", reply written by {args.llm}" if args.llm else "")
            + (", streamed from the first clause" if not args.no_stream and clause < args.reply_tokens
               else ", after the whole reply") + "\n"
            + text_table(["server ms", "LLM wait ms", "TTS prefill ms", "first chunk tokens x ms", "codec ms",
                          "first audio ms", "RTF"], rows, right={0, 1, 2, 3, 4, 5, 6}))
    _emit(args, lambda: {"time_to_first_audio_s": r.time_to_first_audio_s, "real_time_factor": r.real_time_factor,
                         "request_overhead_s": r.request_overhead_s, "llm_wait_s": r.llm_wait_s,
                         "tts_prefill_s": r.tts_prefill_s, "first_chunk_tokens": r.first_chunk_tokens,
                         "tts_tpot_s": r.tts_tpot_s, "codec_s": r.first_window_wait_s}, text)


def _on_device(args: argparse.Namespace) -> None:
    from ..modalities.on_device import on_device

    results = [on_device(args.model, args.hardware, precision=p, context=args.context) for p in args.precision]
    first = results[0]
    if not any(r.fits for r in results):
        raise InfeasibleError(f"{first.model} fits {first.hardware} in none of the formats asked at "
                              f"{args.context:,} tokens of context: {'; '.join(r.reason for r in results)}; "
                              "a narrower format, a shorter --context or a device with more memory",
                              needed_bytes=min(r.weight_bytes + r.kv_bytes for r in results),
                              available_bytes=first.usable_bytes)
    rows = [[r.precision, f"{r.weight_bytes / 1e9:,.1f}", f"{r.kv_bytes / 1e9:,.1f}", f"{r.usable_bytes / 1e9:,.1f}",
             "yes" if r.fits else "NO", f"{r.decode_tokens_per_s:,.1f}" if r.fits else "-",
             f"{r.prefill_tokens_per_s:,.0f}" if r.fits else "-"] for r in results]
    text = (f"{first.model} on {first.hardware}, batch 1, llama.cpp-like, {args.context:,} tokens of context\n"
            + text_table(["format", "weights GB", "KV GB", "GPU may use GB" if first.device_kind == "gpu"
                          else "memory GB", "fits", "decode tok/s", "prompt tok/s"], rows, right={1, 2, 3, 5, 6})
            + "".join(f"\ndoes not fit: {r.reason}" for r in results if not r.fits))
    # what the table shows; a format that does not fit has no speed (null, as the table's '-')
    _emit(args, lambda: [{"precision": r.precision, "weight_bytes": r.weight_bytes, "kv_bytes": r.kv_bytes,
                          "usable_bytes": r.usable_bytes, "fits": r.fits,
                          "decode_tokens_per_s": r.decode_tokens_per_s if r.fits else None,
                          "prefill_tokens_per_s": r.prefill_tokens_per_s if r.fits else None} for r in results], text)


def _slices(args: argparse.Namespace) -> None:
    from ..planning.slices import pack

    p = pack(args.models, args.hardware, precision=args.precision)
    rows = [[x.model, str(x.gpu), x.profile, f"{x.need_bytes / 1e9:,.1f}"] for x in p.placements]
    n = len(p.placements)
    text = (f"{n} model{'s' * (n != 1)} on MIG slices of {p.hardware}: {p.gpus} GPU{'s' * (p.gpus != 1)} instead "
            f"of {n}\n" + text_table(["model", "GPU", "slice", "needs GB"], rows, right={1, 3}))
    _emit(args, lambda: {"gpus": p.gpus, "placements": [x.__dict__ for x in p.placements]}, text)


def _modalities_list(args: argparse.Namespace) -> None:
    from ..modalities.catalog import load_modality, modality_ids

    specs = [load_modality(i) for i in modality_ids()]
    rows = [[s.id, s.kind, s.hf_repo, s.sources[s.config_source]["url"]] for s in specs]
    _emit(args, lambda: [{"id": s.id, "kind": s.kind, "hf_repo": s.hf_repo} for s in specs],
          text_table(["id", "kind", "hf repo", "config source"], rows))


def _modalities_validate(args: argparse.Namespace) -> None:
    from ..validation.modalities import score

    s = score()
    _emit(args, lambda: {"cases": list(s.records), "kinds": {k: v.to_dict() for k, v in s.stats().items()}}, s.table())


def add_parsers(sub: Any, common: argparse.ArgumentParser) -> None:
    """Register the modality commands on the subcommand parser."""
    emb = sub.add_parser("embed", parents=[common], help="embedding model throughput: sequences/s and tokens/s")
    emb.add_argument("model", metavar="MODEL")
    emb.add_argument("hardware", metavar="HARDWARE", help="catalog GPU or MIG slice, e.g. h100-sxm:3g.40gb")
    emb.add_argument("--batch", type=_ints, default=[64], help="sequences per pass, comma-separated (default 64)")
    emb.add_argument("--seq-len", type=_ints, default=[512], help="tokens per sequence, comma-separated (default 512)")
    emb.add_argument("--precision", default="bf16", help="weight format (default bf16)")
    emb.set_defaults(func=_embed)

    dif = sub.add_parser("diffuse", parents=[common], help="image or video generation latency")
    dif.add_argument("model", metavar="MODEL")
    dif.add_argument("hardware", metavar="HARDWARE")
    dif.add_argument("--steps", type=int, default=50, help="sampler steps (default 50)")
    dif.add_argument("--height", type=int, default=1024)
    dif.add_argument("--width", type=int, default=1024)
    dif.add_argument("--frames", type=int, default=1, help="video frames (default 1: an image)")
    dif.add_argument("--batch", type=int, default=1, help="samples per request (default 1)")
    dif.add_argument("--cfg-off", dest="cfg_off_fraction", type=float, default=0.0, help="share of the last steps without CFG (default 0)")
    dif.add_argument("--precision", default="bf16", help="denoiser GEMM format, e.g. fp8 (default bf16)")
    dif.add_argument("--cp", type=int, default=1, help="GPUs splitting one request's tokens (default 1)")
    dif.add_argument("--execution", default="compiled", choices=["compiled", "eager"],
                     help="compiled (elementwise work fused; default) or eager (a UNet's unfused kernels)")
    dif.set_defaults(func=_diffuse)

    tr = sub.add_parser("transcribe", parents=[common], help="speech recognition latency and real-time factor")
    tr.add_argument("model", metavar="MODEL")
    tr.add_argument("hardware", metavar="HARDWARE")
    tr.add_argument("--audio", dest="audio_s", type=float, default=3600.0, help="recording length in seconds (default 3600)")
    tr.add_argument("--gpus", type=int, default=1, help="GPUs the 30 s windows fan out over (default 1)")
    tr.add_argument("--batch", type=int, default=None, help="windows per batch (default all; 1 = sequential)")
    tr.add_argument("--beams", type=int, default=1, help="beam width (default 1)")
    tr.add_argument("--engine", default="generic", choices=["generic", "ctranslate2"],
                    help="how the decode step runs: generic, or ctranslate2 (faster-whisper)")
    tr.add_argument("--stride", dest="stride_s", type=float, default=0.0,
                    help="overlap on each side of a window, s (transformers' chunked pipeline: 5; default 0)")
    tr.add_argument("--features", default="none", choices=["none", "numpy", "torch-cpu", "gpu"],
                    help="where the log-mel features are computed (default none: not timed)")
    tr.add_argument("--previous-text", action="store_true",
                    help="prompt each window with the text before it (condition_on_previous_text, the default "
                         "of sequential long form; the windows then run one at a time)")
    tr.add_argument("--diarize", action="store_true", help="add serial speaker diarization")
    tr.set_defaults(func=_transcribe)

    vl = sub.add_parser("vlm", parents=[common], help="image tokens and time to first token with images")
    vl.add_argument("model", metavar="MODEL")
    vl.add_argument("hardware", metavar="HARDWARE")
    vl.add_argument("--images", type=int, default=1, help="images in the request (default 1)")
    vl.add_argument("--height", type=int, default=1024)
    vl.add_argument("--width", type=int, default=1024)
    vl.add_argument("--text-tokens", type=int, default=256, help="text tokens of the prompt (default 256)")
    vl.add_argument("--crops", type=int, default=0, help="pan-and-scan crops per image (Gemma 3; default 0)")
    vl.add_argument("--tp", type=int, default=1, help="tensor-parallel GPUs of the language model (default 1)")
    vl.add_argument("--precision", default=None, help="the language model's formats, e.g. fp8 or int4 (default: its "
                                                      "checkpoint's); the vision encoder runs 16-bit")
    vl.add_argument("--implementation", choices=("fused", "sglang", "transformers"), default="fused",
                    help="the encoder's norms and activations: a serving engine's fused kernels (default, as "
                         "vLLM runs them), the same plus SGLang's three q/k/v copies to contiguous tensors a "
                         "layer, or transformers' reference modules")
    vl.add_argument("--attention-kernel", choices=("datasheet", "fa2", "fa3", "cudnn"), default=None,
                    help="the encoder's attention kernel (FlashAttention-2, -3, cuDNN); default: the datasheet share")
    vl.add_argument("--execution", choices=("eager", "graph"), default="eager",
                    help="the encoder in eager PyTorch, each op issued by the host (default, as vLLM, SGLang and "
                         "transformers run it) or captured in a CUDA graph (its GPU time alone)")
    load = vl.add_mutually_exclusive_group()
    load.add_argument("--rate", type=float, default=None, help="serve: Poisson requests per second")
    load.add_argument("--concurrency", type=int, default=None, help="serve: closed-loop clients")
    vl.add_argument("--osl", type=int, help="serve: output tokens per request (default 256)")
    vl.add_argument("--num-requests", type=int, help="serve: requests simulated (default 200)")
    vl.add_argument("--allow-long-context", action="store_true",
                    help="accept text and image tokens beyond the model's max_position_embeddings (RoPE scaling)")
    vl.set_defaults(func=_vlm)

    sp = sub.add_parser("speak", parents=[common], help="text to speech: time to first audio and real-time factor")
    sp.add_argument("model", metavar="MODEL")
    sp.add_argument("hardware", metavar="HARDWARE")
    sp.add_argument("--llm", default=None, help="catalog LLM writing the reply first (default: text given)")
    sp.add_argument("--reply-tokens", type=int, default=150, help="tokens of the reply (default 150)")
    sp.add_argument("--clause-tokens", type=int, help="tokens of the first clause (default 12; streaming only)")
    sp.add_argument("--no-stream", action="store_true", help="wait for the whole reply before speaking")
    sp.add_argument("--concurrency", type=int, default=1, help="voices decoded together (default 1)")
    sp.add_argument("--engine", default="generic", help="serving engine of the decoders: generic (no server), vllm, "
                    "sglang, ... (its calibrated step model and server work per request)")
    sp.set_defaults(func=_speak)

    od = sub.add_parser("on-device", parents=[common], help="batch-1 decode on a Mac or a single GPU (llama.cpp-like)")
    od.add_argument("model", metavar="MODEL", help="LLM catalog id or config.json path")
    od.add_argument("hardware", metavar="HARDWARE", help="e.g. m2-ultra, m4-max, rtx-4090")
    od.add_argument("--precision", type=comma_list(str, "format"), default=["q4_k_m", "q8_0", "bf16"],
                    help="weight formats, comma-separated (default q4_k_m,q8_0,bf16)")
    od.add_argument("--context", type=int, default=128,
                    help="tokens in the KV cache while decoding and before the 512-token prompt (default 128)")
    od.set_defaults(func=_on_device)

    sl = sub.add_parser("slices", parents=[common], help="pack small models onto MIG slices")
    sl.add_argument("hardware", metavar="HARDWARE", help="a GPU with MIG profiles, e.g. h100-sxm")
    sl.add_argument("models", metavar="MODEL", nargs="+")
    sl.add_argument("--precision", default="bf16", help="weight format (default bf16)")
    sl.set_defaults(func=_slices)

    mo = sub.add_parser("modalities", help="catalog and validation of the non-chat kinds").add_subparsers(
        dest="action", required=True)
    mo.add_parser("list", parents=[common], help="every modality model").set_defaults(func=_modalities_list)
    mo.add_parser("validate", parents=[common], help="predictions against published measurements").set_defaults(
        func=_modalities_validate)
