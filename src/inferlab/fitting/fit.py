"""``inferlab calibrate``: fit a calibration profile to op-level and case-level measurements.

Kernel curves (GEMM per kernel, attention, kernel floor) are fitted per (engine, GPU) on
the op table and collectives per GPU (:mod:`.ops`); medians over GPUs give the
engine-wide and the ``generic`` (datasheet-only) values. Then each engine's per-step
overhead is fitted on the static-batch cases of the *fit half* (a fixed split by a hash
of the case id), and each engine's serving overheads on its serving cases of that half
(:mod:`.serving`); the other half is only scored. The same inputs give the same file.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import yaml
from scipy.optimize import least_squares

from ..validation.cases import Case, case_engine

from ..validation.predict import predict_cases
from ..validation.ops import OpTable, predict_ops
from ..validation.serving import serving_unsupported_reason, sweep_request_counts
from ..validation.summary import ErrorStats, error_stats, percent_errors, summarize
from .least_squares import LOSS_SCALE
from .ops import OpFits, assemble_profile, fit_ops
from .serving import TERMS as SERVING_TERMS
from .serving import fit_serving_terms, with_engine_terms

#: Significant digits kept in the written profile.
DIGITS = 4
#: Largest per-step overhead a fit may find [s].
STEP_OVERHEAD_MAX_S = 0.05
#: Not fitted (no measurements without CUDA graphs): a typical CUDA kernel launch [s].
LAUNCH_OVERHEAD_PRIOR_S = 5e-6


@dataclass(frozen=True)
class CalibrationReport:
    """A fitted profile and how well it does, in sample and held out."""

    profile: dict[str, Any]
    op_in_sample: list[ErrorStats]
    op_leave_one_gpu_out: list[ErrorStats]
    cases_fit: list[ErrorStats]
    cases_held_out: list[ErrorStats]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready report."""
        def rows(stats: list[ErrorStats]) -> list[dict[str, Any]]:
            return [s.to_dict() for s in stats]

        return {"op_in_sample": rows(self.op_in_sample), "op_leave_one_gpu_out": rows(self.op_leave_one_gpu_out),
                "cases_fit": rows(self.cases_fit), "cases_held_out": rows(self.cases_held_out),
                "profile": self.profile}


def round_tree(tree: Any, digits: int = DIGITS) -> Any:
    """Floats rounded to ``digits`` significant digits and mapping keys sorted, recursively."""
    if isinstance(tree, dict):
        return {k: round_tree(tree[k], digits) for k in sorted(tree)}
    if isinstance(tree, float):
        return float(f"{tree:.{digits}g}")
    return tree


def op_error_stats(table: OpTable, predicted: np.ndarray, label: str) -> list[ErrorStats]:
    """Median errors per op kind of predicted latencies."""
    errors = percent_errors(predicted, table.measured_s)
    kinds = sorted({str(k) for k in table["op"]})
    return [error_stats(errors[table["op"] == k], regime=label, metric=k) for k in kinds]


def leave_one_gpu_out(table: OpTable, fits: OpFits) -> np.ndarray:
    """Latency of every row predicted with its GPU left out of the fit (datasheet only) [s]."""
    out = np.empty(len(table))
    for gpu in fits.gpus:
        rows = np.flatnonzero(table["hardware"] == gpu)
        out[rows] = predict_ops(table.take(rows), with_priors(assemble_profile(fits, exclude=gpu)))
    return out


NETWORK_LATENCY_PRIOR_S = 15e-6
#: Step latency between nodes of NCCL's LL protocol (``network_ll_latency_s``), which NCCL
#: picks for small messages such as a decode step's all-reduce: NCCL's own tuning model puts a
#: network step of its tree algorithm at 5.0 us with LL (8.5 with LL128, 14 with Simple, the
#: protocol ``NETWORK_LATENCY_PRIOR_S`` stands for) plus a network post overhead of 1-2 us a
#: step (NVIDIA/nccl src/graph/tuning.cc, 2.2x: ``hwLatencies[NET]``, ``getNetOverhead``): 6 us.
NETWORK_LL_LATENCY_PRIOR_S = 6e-6
#: Serving terms the ``generic`` engine does not take from the engines' median: the fitted
#: per-request server overheads differ by 50x between engines (HTTP front ends, tokenizer
#: processes, harnesses), so an engine nobody measured gets none rather than a made-up one.
GENERIC_ZERO_TERMS = ("request_overhead_s",)
NETWORK_BANDWIDTH_PRIOR = 0.85
#: Engines that all-reduce inside an NVLink domain with kernels of their own, not NCCL
#: (vLLM's custom all-reduce, PR #2192, 2023; SGLang's, PR #2904; TensorRT-LLM's one-shot
#: and two-shot AllReduce, its "MultiShot" blog, 2024), and the latency of those kernels: the
#: op table measures NCCL only, so it is a prior bounded by a published measurement, 5.9 us
#: for 512 B over 8 H100s (SGLang PR #2904, timed without CUDA graphs; the 2- and 4-GPU
#: figures, 3.7 and 4.8 us, are lower). ``trtllm-pytorch`` runs TensorRT-LLM's kernels.
CUSTOM_ALL_REDUCE_ENGINES = ("vllm", "sglang", "trtllm")
CUSTOM_ALL_REDUCE_LATENCY_S = 5.9e-6
#: Engines whose all-reduces are not timed with NCCL's NVLink SHARP (NVLS) path, which the op
#: rows measure for plain NCCL (the ``generic`` engine): SGLang sets ``NCCL_NVLS_ENABLE=0``
#: unless launched with ``--enable-nccl-nvls`` (sglang PR #631, "Disable NCCL_NVLS by default");
#: for vLLM (``NCCL_CUMEM_ENABLE=0`` until vllm PR #24141; whether that kept NCCL off NVLS is not
#: established: NCCL's NVLS buffers are cuMem multicast objects, allocated through the driver API
#: either way), TensorRT-LLM (kernels of its own, one-shot, two-shot, its NVLS/userbuffers
#: strategies) and LMDeploy it is not established, and their closed-loop cases did not get
#: better with it. Their timing stays NCCL's ring and one-shot fit, as before NVLS was
#: modelled; a profile override turns it on.
NVLS_OFF_ENGINES = ("sglang", "vllm", "trtllm", "trtllm-pytorch", "lmdeploy")
#: Host time per kernel of the op graph in an iteration an engine runs eagerly, for engines that
#: capture CUDA graphs for decode batches only and run prefill and mixed iterations eagerly
#: (``eager_host_per_kernel_s``). SGLang (piecewise prefill graphs were opt-in,
#: ``--enable-piecewise-cuda-graph``; later releases turn them on by default, SGLang docs
#: advanced_features/piecewise_cuda_graph, but inferlab's default stays eager until the release
#: that did is established: ``prefill_graph_tokens`` turns them on): an eager DeepSeek-V3 forward of one new token took 82.6 ms
#: where the same forward captured in a CUDA graph took 23.1 ms (sglang PR #12160, its server log's
#: "forward cost"), so the host's issue time was the 82.6 ms; inferlab's graph of that prefill on
#: one GPU of eight has 1,389 kernels (61 layers): 59 us each. A check it was not fitted on: at
#: that rate a 1,024-token prefill of Llama-3.1-8B FP8 over eight H100s costs 9.5 ms more than
#: its GPU work, where SGLang's piecewise prefill graphs took 10.3 ms off the TTFT of that request
#: (29.97 -> 19.66 ms at concurrency 1, sglang PR #13094). vLLM runs prefill in piecewise CUDA
#: graphs (its default compilation). TensorRT-LLM's PyTorch runtime runs context and mixed
#: iterations eagerly too: its CUDA graphs hold generation-only batches, and the piecewise graphs
#: that "reduce context-phase launch overhead" are opt-in (TensorRT-LLM docs, "Torch Compile &
#: Piecewise CUDA Graph": piecewise graphs handle "context-only and mixed context+generation
#: iterations", generation-only ones the generation CUDA graph; ``torch_compile_config`` is off by
#: default). No measurement of its eager forward's host time was found, so it takes SGLang's rate:
#: both issue a PyTorch model's kernels one by one from Python (TensorRT-LLM fuses more of them,
#: so its own rate per op of the graph is likely lower: a bound, not a fit). With the serving terms
#: refitted it took closed-loop TTFT from 38.3 to 35.9% (held out 42.4 to 40.5%) and TPOT from 11.1
#: to 10.9%: DeepSeek-R1 at 4-8 clients on TensorRT-LLM 1.x with 1,024-token prompts had measured
#: 70-130 ms above the model; Llama-3.1-70B, whose GPU work outlasts its kernels' issue, had not. The legacy TensorRT engine (``trtllm``) runs a compiled
#: engine, not Python: none; nor LMDeploy, whose default TurboMind engine is C++.
EAGER_HOST_PER_KERNEL_S = {"sglang": 82.6e-3 / 1389, "trtllm-pytorch": 82.6e-3 / 1389}
#: The same for a decode step run eagerly (``eager_decode_host_per_kernel_s``: a decode batch
#: beyond the engine's largest CUDA graph, ``--cuda-graph-max-bs``, or ``--disable-cuda-graph``).
#: SGLang: an eager Llama-3-8B decode of one sequence took 8.23 ms where the graphed one took
#: 7.35 ms (sglang PR #1401, bench_latency, FlashInfer), so the host's issue time was the 8.23 ms;
#: inferlab's decode graph of that model has 323 kernels: 25.5 us each (the prefill rate would
#: give 19 ms). A check that disagrees: an eager DeepSeek-V2 decode over eight GPUs took 87 ms a
#: token (MLA on Triton kernels before their graph support, sglang issue #1264), 36 ms at this
#: rate over 60 layers of the DeepSeek-V3 decode graph's kernels (85 ms at the prefill rate): its
#: MoE and MLA layers issue more kernels than their ops in the graph. TensorRT-LLM's PyTorch runtime
#: runs a decode batch beyond its captured sizes (``cuda_graph_config``) eagerly too; it takes
#: SGLang's rate, as for prefill above.
EAGER_DECODE_HOST_PER_KERNEL_S = {"sglang": 8.23e-3 / 323, "trtllm-pytorch": 8.23e-3 / 323}


def with_priors(profile: dict[str, Any]) -> dict[str, Any]:
    """Fill the generic fields no op measurement constrains.

    Elementwise passes stream memory like a memory-bound 16-bit GEMM, so they get the
    generic ``bf16`` GEMM bandwidth share; the launch overhead (used only without CUDA
    graphs) is a prior; a scaled GEMM in a step pays none of its standalone quantization
    cost (``gemm_fixed_fraction`` 0, see :func:`fit_case_terms`).
    """
    generic = profile["generic"]
    bf16 = generic.get("gemm", {}).get("kernels", {}).get("bf16", {})
    generic.setdefault("elementwise_bandwidth_fraction", bf16.get("bandwidth_fraction", 1.0))
    generic.setdefault("launch_overhead_s", LAUNCH_OVERHEAD_PRIOR_S)
    # Engines fuse a scaled GEMM's input quantization upstream (see fit_case_terms).
    generic.setdefault("gemm_fixed_fraction", 0.0)
    # No multi-node measurements in the public op set: priors for the scale-out network, typical of
    # NCCL over 400 Gb/s InfiniBand (bus bandwidth ~85% of line rate, ~15 us per algorithm step).
    collective = generic.setdefault("collective", {})
    collective.setdefault("network_latency_s", NETWORK_LATENCY_PRIOR_S)
    collective.setdefault("network_ll_latency_s", NETWORK_LL_LATENCY_PRIOR_S)
    collective.setdefault("network_bandwidth_fraction", NETWORK_BANDWIDTH_PRIOR)
    overrides = profile.setdefault("overrides", {})
    for engine in CUSTOM_ALL_REDUCE_ENGINES:
        every_gpu = overrides.setdefault(engine, {}).setdefault("all", {})
        every_gpu.setdefault("collective", {}).setdefault("custom_latency_s", CUSTOM_ALL_REDUCE_LATENCY_S)
    for engine in NVLS_OFF_ENGINES:
        every_gpu = overrides.setdefault(engine, {}).setdefault("all", {})
        every_gpu.setdefault("collective", {}).setdefault("nvls_bandwidth_fraction", 0.0)
    for engine, seconds in EAGER_HOST_PER_KERNEL_S.items():
        overrides.setdefault(engine, {}).setdefault("all", {}).setdefault("eager_host_per_kernel_s", seconds)
    for engine, seconds in EAGER_DECODE_HOST_PER_KERNEL_S.items():
        overrides.setdefault(engine, {}).setdefault("all", {}).setdefault("eager_decode_host_per_kernel_s", seconds)
    return profile


def supported_fit_cases(cases: Sequence[Case], profile: dict[str, Any], half: int) -> list[tuple[Case, float]]:
    """Static-batch cases of one half the model predicts, with their predictions under ``profile``."""
    chosen = [c for c in cases if c.holdout_half == half and c.regime == "static_batch"]
    return [(c, p) for c, (p, _) in zip(chosen, predict_cases(chosen, profile)) if p is not None]


def fit_case_terms(profile: dict[str, Any], usable: Sequence[Case]) -> dict[str, Any]:
    """Step-level terms fitted on cases (log(predicted / measured), jointly).

    * ``step_overhead_s`` of each engine with cases in ``usable`` (scheduler and host work
      per step; engines without a profile of their own, ``generic``, are not fitted on);
    * the ``generic`` ``elementwise_floor_fraction``: how much of an isolated kernel's
      floor the norms, residual adds and activations pay inside a step (0: fused into
      their neighbours), which op-level timings of single kernels cannot tell;

    ``gemm_fixed_fraction`` is not fitted: engines fuse a scaled GEMM's input quantization
    into the norm or activation that produces it (TensorRT-LLM's fused RMSNorm/SwiGLU with
    FP8/NVFP4 output, vLLM's RMSNorm-quant fusion), so it is 0 (:func:`with_priors`). Fitted,
    it swung between 0 and 1 with a few cases, a knob that slowed every scaled GEMM to fix
    them. :func:`calibrate` passes no speculative case (they are scored, not fitted on): their
    rate is the acceptance length over a draft-and-verify step, and a per-step term fitted to
    them would charge every plain step the drafter's own kernels.

    The loss is Cauchy (scale 10%): a case missed by far more than that (a scheduler
    artefact, an engine version the kernels no longer match) barely moves the fit.

    Returns a profile fragment ``{"engines": {engine: seconds}, "elementwise_floor_fraction": f}``.
    """
    engines = sorted({case_engine(c) for c in usable} - {"generic"})
    mine = [c for c in usable if case_engine(c) in engines]
    if not mine:
        return {"engines": {}}
    measured = np.array([c.measured for c in mine])

    def trial(x: np.ndarray) -> dict[str, Any]:
        out = {**profile, "generic": {**profile["generic"], "elementwise_floor_fraction": float(x[-1])}}
        for engine, ms in zip(engines, x[:-1]):
            out = _with_overhead(out, engine, float(ms) * 1e-3)
        return out

    def residuals(x: np.ndarray) -> np.ndarray:
        return np.log(np.array([p for p, _ in predict_cases(mine, trial(x))], float) / measured)

    # Step overheads in milliseconds, so that finite-difference steps are microseconds.
    n = len(engines)
    result = least_squares(residuals, np.r_[np.full(n, 0.1), 0.5],
                           bounds=(np.zeros(n + 1), np.r_[np.full(n, STEP_OVERHEAD_MAX_S * 1e3), 1.0]),
                           loss="cauchy", f_scale=LOSS_SCALE, diff_step=1e-3)
    # Resolution 0.1 us and 0.001: what the bounds leave as rounding noise becomes exactly 0.
    return {"engines": {e: round(float(v), 4) * 1e-3 for e, v in zip(engines, result.x[:-1])},
            "elementwise_floor_fraction": round(float(result.x[-1]), 3)}


def _with_overhead(profile: dict[str, Any], engine: str, seconds: float) -> dict[str, Any]:
    trial = {**profile, "overrides": {**profile["overrides"]}}
    engine_section = dict(trial["overrides"].get(engine, {}))
    engine_section["all"] = {**engine_section.get("all", {}), "step_overhead_s": seconds}
    trial["overrides"][engine] = engine_section
    return trial


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:12]


def source_line(ops_label: str, ops_digest: str, num_rows: int, case_labels: Sequence[tuple[str, str]],
                num_fit_cases: int, command: str) -> str:
    """What the profile was fitted on, by which command, and when (``SOURCE_DATE_EPOCH`` if set)."""
    epoch = os.environ.get("SOURCE_DATE_EPOCH")
    when = datetime.datetime.fromtimestamp(int(epoch), datetime.timezone.utc) if epoch else \
        datetime.datetime.now(datetime.timezone.utc)
    cases = ", ".join(f"{name} (sha256 {digest})" for name, digest in case_labels) or "no case file"
    return (f"fitted by `{command}` on {when.date().isoformat()}: kernel curves on {ops_label} "
            f"({num_rows} rows, sha256 {ops_digest}); step terms on the {num_fit_cases} cases of the fit half "
            f"(by a hash of the case id) that the model predicts, of {cases}")


def calibrate(table: OpTable, cases: Sequence[Case], *, source: Callable[[int], str],
              score: bool = True) -> CalibrationReport:
    """Fit a profile to an op table and cases; score it in sample, leave-one-GPU-out and held out.

    ``source(n)`` gives the profile's ``source`` line when ``n`` cases were fitted on;
    ``score=False`` leaves the error tables empty (the profile alone, faster).
    """
    fits = fit_ops(table)
    profile = round_tree(with_priors(assemble_profile(fits)))
    usable = [c for c, _ in supported_fit_cases(cases, profile, half=0)
              if case_engine(c) != "generic" and not c.speculative]
    terms = round_tree(fit_case_terms(profile, usable))
    for engine, seconds in terms["engines"].items():
        profile = _with_overhead(profile, engine, seconds)
    if terms["engines"]:
        profile["generic"]["step_overhead_s"] = float(f"{np.median(list(terms['engines'].values())):.{DIGITS}g}")
        profile["generic"]["elementwise_floor_fraction"] = terms["elementwise_floor_fraction"]
    serving_cases = [c for c in sweep_request_counts(cases) if c.holdout_half == 0 and c.regime != "static_batch" and not c.speculative
                     and case_engine(c) != "generic" and serving_unsupported_reason(c) is None]
    serving = round_tree(fit_serving_terms(profile, serving_cases))
    for engine, values in serving.items():
        profile = with_engine_terms(profile, engine, values)
    for term in SERVING_TERMS if serving else ():
        if term in GENERIC_ZERO_TERMS:  # no particular server in front of the generic engine
            continue
        profile["generic"][term] = float(f"{np.median([v[term] for v in serving.values()]):.{DIGITS}g}")
    profile = {"source": source(len(usable) + len(serving_cases)), **round_tree(profile)}
    if not score:
        return CalibrationReport(profile, [], [], [], [])
    op_in = op_error_stats(table, predict_ops(table, profile), "in sample")
    op_out = op_error_stats(table, leave_one_gpu_out(table, fits), "leave one GPU out")

    def case_stats(half: int) -> list[ErrorStats]:
        chosen = [c for c in cases if c.holdout_half == half]
        records = [{"regime": c.regime, "metric": c.metric, "measured": c.measured, "predicted": p}
                   for c, (p, _) in zip(chosen, predict_cases(chosen, profile))]
        return summarize(records)

    return CalibrationReport(profile, op_in, op_out, case_stats(0), case_stats(1))


def profile_yaml(report: CalibrationReport) -> str:
    """The profile as YAML, headed by comments with the fit's errors."""
    def lines(title: str, stats: list[ErrorStats], regime: bool = False) -> list[str]:
        return [f"# {title}:"] + [f"#   {s.regime + ' ' if regime else ''}{s.metric}: n={s.count}, median |error| "
                                  f"{s.median_abs_error_pct:.1f}%, bias {s.bias_pct:+.1f}%" for s in stats if s.count]

    head = ["# Written by `inferlab calibrate`; regenerate rather than edit (see `source`).",
            "# Median errors when written:"]
    head += lines("op latency, in sample", report.op_in_sample)
    head += lines("op latency, each GPU left out of the fit", report.op_leave_one_gpu_out)
    head += lines("cases, fit half", report.cases_fit, regime=True)
    head += lines("cases, held-out half", report.cases_held_out, regime=True)
    rest = {k: v for k, v in report.profile.items() if k != "source"}
    body = yaml.safe_dump(rest, sort_keys=False, default_flow_style=None, width=120)
    # A JSON string is a YAML scalar: the source stays on one line.
    return "\n".join(head) + f"\nsource: {json.dumps(report.profile.get('source', ''))}\n" + body


def write_profile(report: CalibrationReport, path: str | Path) -> None:
    """Write the profile YAML of ``report`` to ``path``."""
    Path(path).write_text(profile_yaml(report), encoding="utf-8")


def source_for(ops_path: str | Path, case_paths: Sequence[str | Path] | None, num_rows: int,
               command: str) -> Callable[[int], str]:
    """The ``source`` line (given the number of cases fitted on) for inputs read from these files."""
    ops_digest = _digest(Path(ops_path).read_bytes())
    if case_paths is None:
        from importlib import resources

        from ..validation.cases import PUBLIC_FILES

        folder = resources.files("inferlab.validation") / "data"
        labels = [(f"the shipped {name}", _digest((folder / name).read_bytes())) for name in PUBLIC_FILES]
    else:
        labels = [(Path(p).name, _digest(Path(p).read_bytes())) for p in case_paths]
    return lambda fitted: source_line(Path(ops_path).name, ops_digest, num_rows, labels, fitted, command)
