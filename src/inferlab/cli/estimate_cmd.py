"""``inferlab estimate``: one deployment, every technique, from flags or a deployment file."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ..errors import SpecError, cli_spelling
from ..results.table import text_table
from .args import WINDOW_KV_HELP, WINDOW_RATIO_HELP, comma_list, output_file, window_kv_value
from .engine_args import add_engine_args_flag
from .precision_flags import add_precision_flags, kind_overrides, precision_value


_int_list = comma_list(int, "integer")


#: flag -> (estimate keyword, type, help). Defaults are None so that a deployment file's
#: values stand unless a flag is given.
FLAGS: dict[str, tuple[str, Any, str]] = {
    "--tp": ("tp", int, "tensor-parallel GPUs per pipeline stage (default 1)"),
    "--pp": ("pp", int, "pipeline stages (default 1)"),
    "--ep": ("ep", int, "expert-parallel groups within a stage; divides tp (default 1)"),
    "--dp": ("dp", int, "data-parallel replicas (default 1)"),
    "--expert-imbalance": ("expert_imbalance", float, "busiest expert group's load over the mean (default 1)"),
    "--micro-batches": ("micro_batches", int, "pipeline micro-batches (default pp)"),
    "--isl": ("isl", _int_list, "prompt tokens, comma-separated (default 1024)"),
    "--osl": ("osl", _int_list, "output tokens, comma-separated (default 128)"),
    "--batch": ("batch_size", _int_list, "batch sizes, comma-separated (default 1)"),
    "--engine": ("engine", str, "generic, trtllm, trtllm-pytorch, vllm, sglang, lmdeploy (default generic)"),
    "--profile": ("profile", str, "default, roofline or a profile YAML path"),
    "--gpu-memory-utilization": ("gpu_memory_utilization", float, "share of memory the engine uses as the engine reads it (default the engine's: vLLM 0.92, TensorRT-LLM 0.9 and LMDeploy 0.8 of what weights leave, SGLang sized by the GPU)"),
    "--kv-block-size": ("kv_block_size", int, "tokens per KV-cache page (default 16)"),
    "--max-num-tokens": ("max_num_tokens", int, "tokens per prefill chunk (default: the engine's on the GPU: TensorRT-LLM 8192, vLLM 8192 on a GPU of "
                         ">= 70 GiB that is not an A100 else 2048, SGLang's by GPU memory)"),
    "--max-num-seqs": ("max_num_seqs", int, "sequences the engine runs at once; a larger batch runs in waves of it "
                                            "(default: the whole batch at once)"),
    "--max-model-len": ("max_model_len", int, "longest prompt plus output the engine accepts; longer points do not "
                                              "run (vLLM --max-model-len, SGLang --context-length; default the model's)"),
    "--graph-max-batch": ("graph_max_batch", int, "largest decode batch run from a CUDA graph (SGLang's "
                                                  "--cuda-graph-max-bs, 0: none; default the engine's)"),
    "--prefill-graph-tokens": ("prefill_graph_tokens", int, "prefill chunks of at most N tokens run in piecewise CUDA "
                               "graphs, without the eager host floor (SGLang's --piecewise-cuda-graph-max-tokens; "
                               "default: eagerly where the engine graphs decode only)"),
    "--window-kv": ("window_kv", str, WINDOW_KV_HELP),
    "--window-pool-ratio": ("window_pool_ratio", float, WINDOW_RATIO_HELP),
    "--price": ("price_per_gpu_hour", float, "USD per GPU-hour (default: the catalog's)"),
    "--spec": ("speculative", str, "speculative decoding, e.g. eagle:k=4,accept=0.7 or a preset name"),
    "--prefix-cache": ("prefix_cache", str, "cached prompt prefix: a hit rate (0.5) or tokens=1500"),
    "--disagg": ("disaggregation", str, "separate pools, e.g. prefill=h200x4,decode=h200x8"),
    "--prefill-batch": ("prefill_batch", int, "prefill batch of a disaggregated deployment (default 1)"),
}

#: Value names where the keyword reads badly as one.
METAVARS = {"--price": "USD_PER_GPU_HOUR"}


def add_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    """Register ``estimate`` on the subcommand parser."""
    est = sub.add_parser("estimate", parents=[common], help="latency, throughput, memory and cost of a deployment")
    est.add_argument("model", metavar="MODEL", nargs="?", help="catalog id, alias or config.json path")
    est.add_argument("hardware", metavar="HARDWARE", nargs="?", help="catalog id, e.g. h100-sxm")
    est.add_argument("--file", metavar="DEPLOYMENT.yaml", help="read the deployment from a YAML file; flags override it")
    add_engine_args_flag(est)
    for flag, (dest, kind, text) in FLAGS.items():
        est.add_argument(flag, dest=dest, type=kind, default=None, help=text, metavar=METAVARS.get(flag))
    add_precision_flags(est)
    est.add_argument("--attention-dp", action="store_true", default=None, help="attention data-parallel, experts over EP")
    est.add_argument("--attention-tp", type=int, default=None,
                     help="with --attention-dp: GPUs each attention rank splits its heads over (default 1)")
    est.add_argument("--attention", default=None, choices=["flash", "naive"],
                     help="attention kernel: flash keeps the score matrix on chip (default); naive writes each head's "
                          "new-tokens x context score matrix to GPU memory and reads it back (QK^T, softmax, PV: four "
                          "passes), which slows long prompts")
    est.add_argument("--no-cuda-graphs", dest="cuda_graphs", action="store_false", default=None,
                     help="charge a launch overhead per kernel")
    est.add_argument("--waves", action="store_true", default=None, help="run a batch whose KV cache does not fit in waves")
    est.add_argument("--allow-long-context", action="store_true", default=None,
                     help="accept isl + osl beyond the model's max_position_embeddings (RoPE scaling)")
    est.add_argument("--explain", action="store_true", help="add a plain-language diagnosis")
    est.add_argument("--ops", choices=["prefill", "decode"], help="add the per-op table of a step")
    est.add_argument("--plot", metavar="FILE", type=output_file, help="write the roofline chart of the first grid point (.png, .svg or .pdf)")
    est.set_defaults(func=run)


def _kwargs(args: argparse.Namespace) -> dict[str, Any]:
    import numpy as np

    from ..inputs.files import read_deployment_file
    from . import engine_args

    kw, launch = read_deployment_file(args.file) if args.file else ({}, None)
    args.from_file = set(kw)  # (a value the file gives is named as its key there, not as a flag)
    for note in _unused_limits(args, kw):
        print(f"inferlab: warning: {args.file}: {note}", file=sys.stderr)
    if args.engine_args is not None:
        if launch is not None:
            raise SpecError(f"--engine-args and engine_args in {args.file}: give the launch command once")
        from ..engines import parse_engine_args

        launch = parse_engine_args(args.engine_args)
    if launch is not None:
        engine_args.positionals(args)
    for name in ("model", "hardware"):
        if getattr(args, name) is not None:
            kw[name] = getattr(args, name)
    dests = [dest for dest, _, _ in FLAGS.values()] + ["attention_dp", "attention_tp", "attention", "cuda_graphs", "waves",
                                                       "allow_long_context"]
    kw.update({d: getattr(args, d) for d in dests if getattr(args, d) is not None})
    if args.window_kv is not None:
        kw["window_kv"] = window_kv_value(args.window_kv)
    precision = precision_value(args.precision if args.precision is not None else kw.get("precision"),
                                kind_overrides(args))
    if precision is not None:
        kw["precision"] = precision
    if launch is not None:
        with cli_spelling(_spelling(args)):
            kw = engine_args.apply(launch, kw, "estimate", args.flag_names)
        args.engine_read = launch.read_lines()
    for name in ("model", "hardware"):
        if name not in kw and not (name == "hardware" and kw.get("disaggregation") is not None):
            raise SpecError(f"estimate needs MODEL and HARDWARE (or --file with them); missing {name}")
    _file_model_len(args, kw)
    grid = {"batch_size": (slice(None), None, None), "isl": (None, slice(None), None), "osl": (None, None, slice(None))}
    if kw.get("disaggregation") is None:  # (a flat file gives the key, None without pools)
        for name, index in grid.items():
            if name in kw:
                kw[name] = np.atleast_1d(np.asarray(kw[name]))[index]
    else:
        kw = {k: (v[0] if isinstance(v, list) and len(v) == 1 else v) for k, v in kw.items()}
    return kw


def _spelling(args: argparse.Namespace) -> dict[str, str]:
    """The names messages give the options: a flag's, or ``FILE: key`` for a value only the
    deployment file gives."""
    given = {d for d in args.from_file if getattr(args, d, None) is not None}  # a flag given overrides the file's
    return {**args.flag_names, **{k: f"{args.file}: {k}" for k in args.from_file - given}}


def _file_model_len(args: argparse.Namespace, kw: dict[str, Any]) -> None:
    """A ``--file`` deployment's ``max_model_len`` (its engine limits) bounds the grid's requests,
    as the launch command's does (estimate marks the points past it, and refuses one beyond the
    model's positions unless --allow-long-context)."""
    from ..inputs.files import deployment_file_limits

    if kw.get("max_model_len") is None and args.file:
        limit = deployment_file_limits(args.file).get("max_model_len")
        if limit is not None:
            kw["max_model_len"] = limit


def _unused_limits(args: argparse.Namespace, file_kw: dict[str, Any]) -> list[str]:
    """What of a ``--file`` deployment's engine limits the estimate does not use, as lines."""
    from ..engines.scheduler import unused_limits_notes
    from ..inputs.files import deployment_file_limits

    if not args.file:
        return []
    return unused_limits_notes(deployment_file_limits(args.file), file_kw.get("disaggregation") is not None)


def inputs_of(args: argparse.Namespace) -> Any:
    """The :class:`~inferlab.inputs.deployment.Deployment` and
    :class:`~inferlab.inputs.workload.Workload` of parsed ``inferlab estimate`` arguments
    (flags over ``--file`` over ``--engine-args``, as :func:`run` reads them)."""
    from ..inputs.convert import from_kwargs

    return from_kwargs("estimate", **_kwargs(args))


def _inputs_written(kw: dict[str, Any]) -> dict[str, Any]:
    """``{"deployment": ..., "workload": ...}`` of the command's arguments for ``--json``; empty
    when they do not make a Deployment (estimate then says what is wrong, in its own words)."""
    from ..errors import InferlabError
    from ..inputs.convert import from_kwargs

    try:
        deployment, workload = from_kwargs("estimate", **kw)
    except InferlabError:
        return {}
    return {"deployment": deployment.to_dict(), "workload": workload.to_dict()}


def _unpriced_hardware(est: Any) -> list[str]:
    """The GPUs of ``est`` (one, or a disaggregation's two pools) that have no price."""
    import math

    if hasattr(est, "cost"):
        pools = [(est.deployment, est.cost.usd_per_gpu_hour)]
    else:
        pools = list(zip((est.prefill_deployment, est.decode_deployment), est.usd_per_gpu_hour))
    return list(dict.fromkeys(dep.hardware.id for dep, price in pools if math.isnan(price)))


def run(args: argparse.Namespace) -> None:
    """Run ``inferlab estimate``."""
    import numpy as np

    from ..phases.estimate import estimate
    from .output import emit as _emit

    kw = _kwargs(args)
    if args.plot and kw.get("disaggregation") is not None:
        raise SpecError("--plot draws one deployment's roofline; with --disagg give --ops prefill or --ops decode "
                        "for each pool's op table, or plot one pool as an aggregated estimate")
    written = _inputs_written(kw)
    with cli_spelling(_spelling(args)):
        est = estimate(kw.pop("model"), kw.pop("hardware", None), **kw)
    text = str(est)
    unpriced = _unpriced_hardware(est)
    if unpriced:  # the table's $/M out shows '-'
        text += (f"\nno catalog price for {' or '.join(unpriced)}, so no $/M out; set one with "
                 f"{args.flag_names['price_per_gpu_hour']} USD_PER_GPU_HOUR")
    data = {**est.to_dict(), **written}
    if "notes" in data and not data["notes"] and kw.get("disaggregation") is not None:  # the file's, named on stderr too
        data["notes"] = _unused_limits(args, kw)
    if hasattr(est, "interval") and not args.explain:  # explain() shows the interval itself
        from ..phases.interval import estimate_interval_text

        text += "\n" + estimate_interval_text(est)
    if args.plot and hasattr(est, "op_table"):
        from ..plots import write_estimate_plot

        write_estimate_plot(est, args.plot, point=est.first_feasible())
        text += f"\nroofline chart written to {args.plot}"
    if args.explain and hasattr(est, "explain"):
        shown = set(getattr(est, "notes", []))  # the table's notes, not repeated
        why = "\n".join([*(line for line in est.explain().splitlines() if line not in shown),
                         *getattr(args, "engine_read", [])])
        text += "\n\n" + why
        data["explain"] = why
    if args.ops == "decode" and hasattr(est, "op_table") and float(np.ravel(np.broadcast_to(
            np.asarray(est.osl, float), np.shape(est.ttft_s)))[est.first_feasible()]) <= 1:
        raise SpecError("--ops decode: the first grid point that runs has an OSL of 1, so no decode step; give --osl "
                        "2 or more, or --ops prefill")
    if args.ops and hasattr(est, "op_table"):
        rows = est.op_table(args.ops)
        data["ops"] = rows
        table = [[r["op"], r["group"], f"{r['count']:g}", r["precision"], f"{r['flops'] / 1e9:.1f}",
                  f"{r['bytes'] / 1e6:.1f}", f"{r['intensity']:.0f}" if np.isfinite(r["intensity"]) else "-",
                  r["bound"], f"{r['time_s'] * 1e6:.0f}", f"{r['share']:.1%}"] for r in rows]
        text += f"\n\n{args.ops} step, first grid point, per GPU:\n" + text_table(
            ["op", "layers", "count", "prec", "GFLOP", "MB", "FLOP/B", "bound", "us", "share"], table,
            right={2, 4, 5, 6, 8, 9})
    _emit(args, data, text)
