"""``inferlab serve``: a workload under load, or the latency-throughput curve over several loads."""

from __future__ import annotations

import argparse
import math
import sys
from typing import TYPE_CHECKING, Any

from ..engines.scheduler import STATE_LIMITS, USER_LIMITS
from ..errors import SpecError
from .args import WINDOW_KV_HELP, WINDOW_RATIO_HELP, comma_list, output_file, suffix_hint, window_kv_value
from .engine_args import add_engine_args_flag
from .precision_flags import add_precision_flags, kind_overrides, precision_value

if TYPE_CHECKING:
    from ..inputs.workload import Lengths


def parse_lengths(text: str, name: str = "lengths") -> Lengths:
    """Token counts from the command line (:meth:`~inferlab.inputs.workload.Lengths.parse`),
    a malformed text named by its flag.

    >>> parse_lengths("uniform:128-2048")
    Lengths(kind='uniform', value=0, low=128, high=2048, mean=0.0, sigma=0.0, values=())
    """
    from ..inputs.workload import Lengths

    try:
        return Lengths.parse(text)
    except SpecError as exc:
        raise SpecError(f"--{name} {str(exc).removeprefix('lengths ')}{suffix_hint(text)}") from None


_floats = comma_list(float, "number")


def _rate(text: str) -> float:
    """``--rate``: one arrival rate [request/s]; a list of them is ``--rates``."""
    if "," in text:
        raise argparse.ArgumentTypeError(f"one rate, got {text!r}; a sweep of rates is --rates {text}")
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected requests per second (a number), got {text!r}"
                                         f"{suffix_hint(text)}") from None


def add_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    """Register ``serve`` on the subcommand parser."""
    p = sub.add_parser("serve", parents=[common], help="latency percentiles and throughput under load, request by request",
                       description="Simulate an in-flight-batching engine serving a workload. A list of rates or "
                                   "concurrencies prints the latency-throughput curve with its knee.")
    p.add_argument("model", metavar="MODEL", nargs="?", help="catalog id, alias or config.json path (not with "
                                                            "--engine-args)")
    p.add_argument("hardware", metavar="HARDWARE", nargs="?", help="catalog id, e.g. h100-sxm (not with --disagg)")
    load = p.add_mutually_exclusive_group(required=True)
    load.add_argument("--rate", type=_rate, help="Poisson arrivals, requests per second")
    load.add_argument("--rates", type=_floats, metavar="R1,R2,...", help="a sweep of arrival rates")
    load.add_argument("--concurrency", type=_floats, metavar="C[,C2,...]",
                      help="closed-loop clients; several values sweep them")
    load.add_argument("--offline", action="store_true", help="every request queued at once")
    p.add_argument("--max-concurrency", type=int, metavar="N",
                   help="with --rate/--rates: at most N requests in flight, the client holding the others until one "
                        "finishes (vllm bench serve --max-concurrency); TTFT counts from when a request is sent")
    p.add_argument("--lockstep", action="store_true",
                   help="with --concurrency: clients that finish together stay in step, each round's prompts "
                        "arriving together as fixed output lengths keep them (default: out of step after the "
                        "first round, as long benchmarks settle)")
    p.add_argument("--isl", default="1024", help="prompt tokens: 2048, 128,512,2048, uniform:128-2048 or "
                                                 "lognormal:mean=1024,sigma=0.5 (default 1024)")
    p.add_argument("--osl", default="128", help="output tokens, same forms (default 128)")
    p.add_argument("--num-requests", type=int, default=1000, help="requests to simulate (default 1000)")
    p.add_argument("--seed", type=int, default=0, help="random seed of arrivals and lengths (default 0)")
    for flag, kind, text in (("--tp", int, "tensor-parallel GPUs per pipeline stage (default 1)"),
                             ("--pp", int, "pipeline stages (default 1)"),
                             ("--ep", int, "expert-parallel groups; divides tp (default 1)"),
                             ("--dp", int, "data-parallel replicas (default 1)")):
        p.add_argument(flag, type=kind, default=None, help=text)
    p.add_argument("--attention-dp", action="store_true", default=None, help="attention data-parallel, experts over EP")
    p.add_argument("--attention-tp", type=int, default=None,
                   help="with --attention-dp: GPUs each attention rank splits its heads over (default 1)")
    add_engine_args_flag(p)
    p.add_argument("--disagg", metavar="POOLS", help="separate prefill and decode pools, both simulated, e.g. "
                                                     "prefill=h200x4,decode=h200x8:tp4 (instead of HARDWARE)")
    p.add_argument("--spec", metavar="SPEC", help="speculative decoding, simulated per request: eagle:k=4,accept=0.7, "
                                                  "draft:model=llama-3.1-8b,k=4,accept=0.6 or a preset name")
    p.flag_names["speculative"] = "--spec"  # messages name the keyword serve() takes
    p.add_argument("--prefix", metavar="PREFIX", help="prompts sharing a prefix, kept by the prefix cache: "
                                                      "shared:tokens=1000,groups=8[,zipf=1.1] or "
                                                      "sessions:turns=4,think=5 (multi-turn; cache=off to disable)")
    add_precision_flags(p)
    p.add_argument("--engine", default=None, help="generic, vllm, sglang, trtllm, trtllm-pytorch, lmdeploy (default generic)")
    p.add_argument("--profile", default="default", help="default, roofline or a profile YAML path")
    p.add_argument("--max-num-seqs", type=int, help="running requests at most (engine default)")
    p.add_argument("--max-num-batched-tokens", type=int, help="tokens per iteration at most (engine default)")
    p.add_argument("--max-prefill-tokens", type=int,
                   help="prompt tokens after which an iteration takes no further prompt, the one that passes it "
                        "whole (SGLang's --max-prefill-tokens; default none)")
    _switch(p, "chunked-prefill", "split prompts over iterations within the token budget (the default except "
                                  "TensorRT-LLM's: enable_chunked_prefill)",
            "prefill each prompt whole, in one iteration (TensorRT-LLM's default: it refuses a prompt longer than "
            "the token budget)")
    _switch(p, "mixed-prefill", "decode the running requests in the iterations that prefill (engine default; "
                                "SGLang: --enable-mixed-chunk)",
            "prefill iterations run prompts only, the decodes wait (SGLang's default)")
    _switch(p, "reserve-output", "admit a request only when the KV of its whole output is free (TensorRT-LLM's "
                                 "GUARANTEED_NO_EVICT, its default)",
            "admit on the prompt, preempt when the cache fills (TensorRT-LLM's MAX_UTILIZATION; vLLM's and SGLang's "
            "default)")
    _switch(p, "overlap-host", "plan each iteration on the host while the GPU runs the one before (the default of "
                               "SGLang, TensorRT-LLM's PyTorch runtime and vLLM from 0.14: --async-scheduling)",
            "plan each iteration after the one before ends (vLLM before 0.14; SGLang: --disable-overlap-schedule, "
            "vLLM: --no-async-scheduling)")
    p.add_argument("--balance-timeout-iters", type=int, metavar="N",
                   help="attention-DP context balancing: hold new prompts until every rank has one or N iterations "
                        "pass; 0 off (TensorRT-LLM's attention_dp_config; the trtllm-pytorch default 60, as NVIDIA's "
                        "DeepSeek recipes set it)")
    p.add_argument("--state-pool-ratio", type=float, metavar="R",
                   help="a hybrid model's linear-attention states in a pool of their own, R times the KV pool "
                        "(SGLang's --mamba-full-memory-ratio, its default 0.9; the other engines keep the states in "
                        "their KV pool and refuse it)")
    p.add_argument("--state-pool-slots", type=int, metavar="N",
                   help="a hybrid model's state pool pinned at N slots over the replica (SGLang's "
                        "--max-mamba-cache-size), the KV pool taking the rest")
    p.add_argument("--state-slots", type=int, metavar="N",
                   help="state-pool slots a running request takes (SGLang: 3 with no_buffer, 5 with extra_buffer)")
    _switch(p, "hybrid-overlap", "keep the overlap scheduler on for a hybrid model (SGLang's extra_buffer: 5 slots a "
                                 "request unless --state-slots says otherwise)",
            "turn it off for a hybrid model (SGLang's no_buffer, its 0.5 default)")
    p.add_argument("--window-kv", metavar="KINDS", help=WINDOW_KV_HELP)
    p.add_argument("--window-pool-ratio", type=float, metavar="R", help=WINDOW_RATIO_HELP)
    p.add_argument("--gpu-memory-utilization", type=float,
                   help="share of memory the engine takes, as the engine reads it (default the engine's: vLLM 0.92, "
                        "TensorRT-LLM 0.9 and LMDeploy 0.8 of what weights leave, SGLang sized by the GPU)")
    p.add_argument("--kv-block-size", type=int, help="tokens per KV-cache page (engine default)")
    p.add_argument("--max-model-len", type=int, metavar="TOKENS",
                   help="longest prompt plus output the engine accepts (vLLM --max-model-len, SGLang --context-length; "
                        "default the model's)")
    p.add_argument("--graph-max-batch", type=int, metavar="N",
                   help="largest decode batch run from a CUDA graph, larger ones eagerly (SGLang's --cuda-graph-max-bs, "
                        "0: --disable-cuda-graph; default: SGLang's by GPU memory and TP, every batch elsewhere)")
    p.add_argument("--prefill-graph-tokens", type=int, metavar="N",
                   help="prefill and mixed iterations of at most N tokens run in piecewise CUDA graphs, without the "
                        "eager host floor (SGLang's --piecewise-cuda-graph-max-tokens; default: eagerly where the "
                        "engine graphs decode only; SGLang and TensorRT-LLM's PyTorch runtime only)")
    slo = p.add_argument_group("service-level objectives")
    slo.add_argument("--ttft-slo", type=float, metavar="MS", help="TTFT objective [ms]")
    slo.add_argument("--tpot-slo", type=float, metavar="MS", help="TPOT objective [ms]")
    slo.add_argument("--percentile", type=float, default=99.0, help="percentile checked and shown (default 99)")
    out = p.add_argument_group("outside the GPU")
    out.add_argument("--network-rtt", type=float, default=0.0, metavar="MS", help="user-server round trip [ms]")
    out.add_argument("--client-overhead", type=float, default=0.0, metavar="MS", help="client and API work per request [ms]")
    out.add_argument("--tokenize-us", type=float, default=0.0, metavar="US", help="tokenizer per prompt token [us]")
    out.add_argument("--detokenize-us", type=float, default=0.0, metavar="US", help="detokenizer per output token [us]")
    out.add_argument("--preamble-tokens", type=int, default=0, metavar="N",
                     help="tokens generated before the first one the client counts (a reasoning model's thinking "
                          "that a benchmark timing the first content token skips)")
    out.add_argument("--no-streaming", dest="streaming", action="store_false",
                     help="the answer is sent whole: the user's TTFT is the end-to-end latency")
    p.add_argument("--allow-long-context", action="store_true",
                   help="accept isl + osl beyond the model's max_position_embeddings (RoPE scaling)")
    p.add_argument("--explain", action="store_true", help="add a plain-language diagnosis")
    p.add_argument("--plot", metavar="FILE", type=output_file, help="write a figure (PNG, SVG, PDF): latency CDFs, or the curve")
    p.set_defaults(func=run)


def _switch(p: argparse.ArgumentParser, name: str, on: str, off: str) -> None:
    """``--NAME`` and ``--no-NAME``, exclusive, setting ``NAME`` (dashes as underscores) to True or
    False; None (the engine's default) when neither is given."""
    group, dest = p.add_mutually_exclusive_group(), name.replace("-", "_")
    group.add_argument(f"--{name}", dest=dest, action="store_true", default=None, help=on)
    group.add_argument(f"--no-{name}", dest=dest, action="store_false", help=off)


#: The outside-the-GPU flags: (flag, unit, seconds in one unit), in ClientOverheads.LIMITS' order.
_OVERHEAD_FLAGS = (("--network-rtt", "ms", 1e-3), ("--client-overhead", "ms", 1e-3), ("--tokenize-us", "us", 1e-6),
                   ("--detokenize-us", "us", 1e-6))


def _overheads(args: argparse.Namespace) -> Any:
    from ..serving.overheads import LIMITS, ClientOverheads

    values = (args.network_rtt, args.client_overhead, args.tokenize_us, args.detokenize_us)
    seconds = {}
    for (flag, unit, scale), (name, largest, why), value in zip(_OVERHEAD_FLAGS, LIMITS, values):
        if not value >= 0:  # checked here, in the flag's own unit; NaN fails too
            raise SpecError(f"{flag} must be a time >= 0 in {unit}, got {value:g}")
        if value * scale > largest:  # ClientOverheads' own limit, said in the flag's unit
            raise SpecError(f"{flag} must be at most {largest / scale:,.0f} {unit} ({why}), got {value:g}")
        seconds[name] = value * scale
    if args.preamble_tokens < 0:
        raise SpecError(f"--preamble-tokens must be a whole number of tokens >= 0, got {args.preamble_tokens}")
    if not any(values) and args.streaming and not args.preamble_tokens:
        return None
    return ClientOverheads(**seconds, streaming=args.streaming, preamble_tokens=args.preamble_tokens)


def _serve_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    layout = {"tp": args.tp, "pp": args.pp, "ep": args.ep, "dp": args.dp, "attention_dp": args.attention_dp,
              "attention_tp": args.attention_tp, "engine": args.engine, "precision": precision_value(args.precision, kind_overrides(args))}
    kw: dict[str, Any] = {k: v for k, v in layout.items() if v is not None}
    kw.update({"profile": args.profile,
                          "isl": parse_lengths(args.isl, "isl"), "osl": parse_lengths(args.osl, "osl"),
                          "num_requests": args.num_requests, "seed": args.seed, "overheads": _overheads(args)})
    if args.allow_long_context:
        kw["allow_long_context"] = True
    if args.disagg:
        kw["disaggregation"] = args.disagg
    if args.spec:
        kw["speculative"] = args.spec
    if args.prefix is not None:  # '' is refused as a prefix, not read as none
        kw["prefix"] = args.prefix
    if args.max_concurrency is not None:
        kw["max_concurrency"] = args.max_concurrency
    if args.lockstep:
        if not args.concurrency:
            raise SpecError("--lockstep keeps closed-loop clients in step: it goes with --concurrency")
        kw["stagger"] = False
    args.window_kv = window_kv_value(args.window_kv)
    for name in USER_LIMITS + STATE_LIMITS:
        if getattr(args, name) is not None:
            kw[name] = getattr(args, name)
    if args.engine_args is not None:
        from ..engines import parse_engine_args
        from . import engine_args

        engine_args.positionals(args)
        if args.model is not None:
            kw["model"] = args.model
        launch = parse_engine_args(args.engine_args)
        kw = engine_args.apply(launch, kw, "serve", args.flag_names)
        args.engine_read = launch.read_lines()
        args.model = kw.pop("model")
    elif args.model is None:
        raise SpecError("serve needs MODEL (a catalog id) or --engine-args with a launch command")
    return kw


#: An SLO flag's value below this [ms] is warned of as seconds typed for milliseconds.
SECONDS_TYPED_BELOW_MS = 1.0


def _slo(args: argparse.Namespace) -> tuple[float, float] | None:
    for flag, value in (("--ttft-slo", args.ttft_slo), ("--tpot-slo", args.tpot_slo)):  # each given one's value first
        if value is not None and not (value > 0 and math.isfinite(value)):
            raise SpecError(f"{flag} must be a time > 0 in milliseconds, got {value:g}")
    if args.ttft_slo is None and args.tpot_slo is None:
        return None
    for flag, value in (("--ttft-slo", args.ttft_slo), ("--tpot-slo", args.tpot_slo)):
        if value is not None and value < SECONDS_TYPED_BELOW_MS:  # no TTFT or TPOT is under a millisecond
            print(f"inferlab: warning: {flag} {value:g} is {value:g} ms (the SLO flags take milliseconds); for "
                  f"{value:g} s write {flag} {value * 1e3:g}", file=sys.stderr)
    # one given: the other bounds nothing
    return tuple(math.inf if v is None else v / 1e3 for v in (args.ttft_slo, args.tpot_slo))


def _whole_clients(values: list[float]) -> list[float]:
    """``values`` when every one is a whole, finite number of clients."""
    if not all(math.isfinite(c) and c == int(c) for c in values):
        raise SpecError(f"--concurrency takes whole clients, got {','.join(f'{c:g}' for c in values)}")
    return values


def _inputs_written(model: Any, hardware: Any, load: dict[str, Any], kw: dict[str, Any]) -> dict[str, Any]:
    """``{"deployment": ..., "workload": ...}`` of one run's arguments for ``--json``; empty when
    they do not make a Deployment (serve then says what is wrong, in its own words)."""
    from ..errors import InferlabError
    from ..inputs.convert import from_kwargs

    try:
        deployment, workload = from_kwargs("serve", model=model, hardware=hardware, **load,
                                           **{k: v for k, v in kw.items() if k != "overheads"})
    except InferlabError:
        return {}
    return {"deployment": deployment.to_dict(), "workload": workload.to_dict()}


def run(args: argparse.Namespace) -> None:
    """Run ``inferlab serve``."""
    from ..serving.serve import serve
    from ..serving.curve import load_sweep
    from ..serving.goodput import check_percentile, goodput
    from ..serving.result import PERCENTILES
    from .output import emit as _emit

    check_percentile(args.percentile)  # shown with or without SLOs: refused before any simulation
    kw, slo = _serve_kwargs(args), _slo(args)
    sweep = args.rates if args.rates else (args.concurrency if args.concurrency and len(args.concurrency) > 1 else None)
    if sweep is not None:
        key = "rates" if args.rates else "concurrencies"
        if key == "concurrencies":
            _whole_clients(sweep)
        curve = load_sweep(args.model, args.hardware, **{key: sweep}, percentile=args.percentile,
                           ttft_slo_s=slo[0] if slo else None, tpot_slo_s=slo[1] if slo else None, **kw)
        text, data = str(curve), curve.to_dict()
        point = curve.knee if curve.knee is not None else -1
        explained, figure = curve.results[point], curve
        label = f"at {curve.loads[point]:g} {'req/s' if args.rates else 'clients'}:\n"
    else:
        load: dict[str, Any] = ({"rate": args.rate} if args.rate is not None else {"offline": True} if args.offline
                                else {"concurrency": int(_whole_clients(args.concurrency)[0])})
        result = serve(args.model, args.hardware, **load, **kw)
        text, data = str(result), {**result.to_dict(), **_inputs_written(args.model, args.hardware, load, kw)}
        if args.percentile not in PERCENTILES:  # the table shows P50, P90 and P99: the one asked for beside them
            at = result.at_percentile(args.percentile)
            text += f"\nP{args.percentile:g} ms: " + ", ".join(f"{k} {v * 1e3:.1f}" for k, v in at.items())
            for k, v in at.items():
                data["latency_s"][k][f"p{args.percentile:g}"] = v if math.isfinite(v) else None
        if not args.explain:  # explain() shows the interval itself
            from ..phases.interval import interval_lines

            text += "\n" + "\n".join(interval_lines(result))
        if slo:
            g = goodput(result, *slo, percentile=args.percentile)
            text += "\n" + str(g)
            data["goodput"] = {"requests_per_s": g.requests_per_s, "fraction": g.fraction, "meets": g.meets,
                               "ttft_s": g.ttft_s, "tpot_s": g.tpot_s, "ttft_slo_s": g.ttft_slo_s,
                               "tpot_slo_s": g.tpot_slo_s, "percentile": g.percentile,
                               "filling_fraction": g.filling}  # (the table's caveat past FILLING_NOTE)
        explained, figure, label = result, result, ""
    if args.explain:
        why = "\n".join([explained.explain(), *getattr(args, "engine_read", [])])
        text += "\n\n" + label + why
        data["explain"] = why
    if args.plot:
        figure.plot(args.plot)
        text += f"\nwrote {args.plot}"
    _emit(args, data, text)
