"""Calibration on the user's own serving benchmarks: what end-to-end runs can identify.

A serving benchmark measures mean TTFT, TPOT (or ITL) and output throughput of whole
runs, not kernels. From a set of such runs of one deployment family the fit identifies
five terms, starting from a profile (the shipped one by default) and moving each within a
physically meaningful range (:data:`BOUNDS`):

``request_overhead_s``
    The server's time per request outside the GPU iterations (HTTP, tokenization, hand-off
    to the scheduler, streaming back), [0, 0.25] s: a local server answers a short prompt
    well within a quarter second; more than that is the network or the client.
``serving_step_overhead_s``
    Host work per in-flight-batching iteration, [0, 0.02] s: more would show as idle GPU
    time between the kernels of every step.
``gemm_scale``, ``attention_scale``, ``collective_scale``
    Factors on the efficiencies (shares of datasheet peak FLOP/s and bandwidth) of each
    kernel family (for collectives, every NCCL protocol's share of the link and NVLS's; the
    engines' own all-reduce kernel keeps its measured rate), [0.25, 2]; each scaled share is
    capped at 1, never above the datasheet. A quarter of the fitted efficiency would be a broken installation, not a
    calibration.

They separate because they move different things: the request overhead only TTFT, the
step overhead every iteration by the same time whatever its size, GEMM efficiency the
prefill (compute-bound) and the weight reads of every step, attention the per-context
part that grows with prompt length and batch, collectives only runs over several GPUs.
A term the runs do not move (collectives on one GPU) keeps its start value and is
reported as not identified.

Notes
-----
Bounded least squares (``scipy.optimize.least_squares``, trust region reflective) on
``log(predicted / measured)`` of every case of the fit runs, with a soft-L1 loss at 5%
so that one odd run does not pull the rest. Where a scheduling decision flips (a
prefill chunk more or less) the errors have kinks that collapse the trust region before
the minimum; the fit starts from the two best points of a coarse grid of the GEMM and
attention scales (:data:`START_GRID`) and restarts from where it stopped, up to
:data:`RESTARTS` times, while that still lowers the cost by 0.1%. Runs, not cases, are split between fit and
held-out (by a hash of the run id), so a run's TTFT and TPOT are never on both sides.
The fitted terms are written as ``overrides[engine][gpu]`` of the start profile, the
place :func:`~inferlab.calibration.profile.load_profile` applies last.
"""

from __future__ import annotations

import copy
import hashlib
import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import yaml

from ..calibration.profile import Profile, _deep_merge, hardware_family, load_profile, profile_file
from ..errors import InfeasibleError, SpecError
from ..validation.cases import Case, case_engine
from ..validation.summary import percent_errors

#: Fitted terms and their (lower, upper) bounds; see the module docstring for why.
BOUNDS: dict[str, tuple[float, float]] = {
    "request_overhead_s": (0.0, 0.25),
    "serving_step_overhead_s": (0.0, 0.02),
    "gemm_scale": (0.25, 2.0),
    "attention_scale": (0.25, 2.0),
    "collective_scale": (0.25, 2.0),
}
TERMS = tuple(BOUNDS)
#: Most restarts of the trust region (see :func:`fit_bench`).
RESTARTS = 6
#: Values of the GEMM and attention scales the fit may start from (the best two of the grid).
START_GRID = (0.6, 0.8, 1.0, 1.25)
#: Residual of a case the trial profile cannot predict (an infeasible deployment).
_MISS = 5.0
#: Seconds <-> the fit's milliseconds for the two overheads (steps of microseconds).
_MS = np.array([1e3, 1e3, 1.0, 1.0, 1.0])


def start_mapping(profile: str) -> dict[str, Any]:
    """The profile file ``profile`` (``default``, ``roofline`` or a YAML path) as a mapping.

    Raises
    ------
    SpecError
        An unknown name or a file that is not a profile.
    """
    from ..specs.validation import SAFE_LOADER, read_text

    if profile == "roofline":
        return {"generic": {}, "source": "roofline"}
    if str(profile).endswith((".yaml", ".yml")):
        text = read_text(profile, f"profile {profile}")
    else:
        shipped = profile_file(str(profile))
        if not shipped.is_file():
            raise SpecError(f"profile {profile!r}: not a shipped profile (default, roofline) or a .yaml path")
        text = shipped.read_text(encoding="utf-8")
    data = yaml.load(text, Loader=SAFE_LOADER)
    if not isinstance(data, dict) or "generic" not in data:
        raise SpecError(f"profile {profile}: expected a mapping with 'generic' (and optional 'hardware', 'overrides')")
    return data


def _family(hardware: str) -> str:
    from ..specs.catalog import load_hardware

    return hardware_family(load_hardware(hardware).architecture)


def _scaled(prof: Profile, terms: Mapping[str, float]) -> dict[str, Any]:
    """The override section of ``prof`` with ``terms`` applied (shares capped at 1)."""
    g, a, c = terms["gemm_scale"], terms["attention_scale"], terms["collective_scale"]
    cap = lambda share, scale: float(min(1.0, share * scale))  # noqa: E731
    att = prof.attention
    attention = {"prefill_peak_fraction": cap(att.prefill_peak_fraction, a),
                 "decode_bandwidth_fraction": cap(att.decode_bandwidth_fraction, a)}
    for key in ("decode_peak_fraction", "prefill_bandwidth_fraction"):
        if getattr(att, key) is not None:
            attention[key] = cap(getattr(att, key), a)
    return {
        "gemm": {"kernels": {name: {"peak_fraction": cap(k.peak_fraction, g),
                                    "bandwidth_fraction": cap(k.bandwidth_fraction, g)}
                             for name, k in prof.gemm.kernels.items()}},
        "attention": attention,
        "collective": _scaled_collective(prof, c),
        "request_overhead_s": float(terms["request_overhead_s"]),
        "serving_step_overhead_s": float(terms["serving_step_overhead_s"]),
    }


def _scaled_collective(prof: Profile, scale: float) -> dict[str, float]:
    """The collective shares of the link scaled (capped at 1): every NCCL protocol's and NVLS's
    where the profile has them (a scale on the low-latency line alone had left large messages,
    which Simple carries, where they were)."""
    c = prof.collective
    names = ["bandwidth_fraction", "network_bandwidth_fraction"]
    names += [n for n in ("simple_bandwidth_fraction", "nvls_bandwidth_fraction") if getattr(c, n) > 0.0]
    return {n: float(min(1.0, getattr(c, n) * scale)) for n in names}


def calibrated_mapping(start: Mapping[str, Any], targets: Sequence[tuple[str, str]],
                       terms: Mapping[str, float]) -> dict[str, Any]:
    """``start`` with ``terms`` written for each ``(engine, gpu)`` in ``targets``."""
    out = copy.deepcopy(dict(start))
    overrides = out.setdefault("overrides", {}) or {}
    out["overrides"] = overrides
    for engine, gpu in targets:
        prof = load_profile(start, engine, gpu, _family(gpu))
        section = _scaled(prof, terms)
        per_engine = dict(overrides.get(engine) or {})
        per_engine[gpu] = _deep_merge(dict(per_engine.get(gpu) or {}), section)
        overrides[engine] = per_engine
    # what the fit is for: another engine or GPU resolves to the start's terms, and says so
    out["fitted_for"] = sorted({*(out.get("fitted_for") or []), *(f"{e}/{g}" for e, g in targets)})
    return out


def start_terms(start: Mapping[str, Any], targets: Sequence[tuple[str, str]]) -> dict[str, float]:
    """The overheads of ``start`` for the first target, scales at 1: where the fit begins."""
    engine, gpu = targets[0]
    prof = load_profile(start, engine, gpu, _family(gpu))
    return {"request_overhead_s": prof.request_overhead_s, "serving_step_overhead_s": prof.serving_step_overhead_s,
            "gemm_scale": 1.0, "attention_scale": 1.0, "collective_scale": 1.0}


def split_runs(cases: Sequence[Case], holdout: float) -> tuple[list[Case], list[Case]]:
    """(fit, held-out) cases: ``holdout`` of the runs (``source_id``), chosen by a hash of
    the run id without its folder, are held out; at least one run is always fitted."""
    def key(run: str) -> str:  # the file name, not the folder it was given from: the same split from anywhere
        return hashlib.sha256(run.replace("\\", "/").rsplit("/", 1)[-1].encode()).hexdigest() + run

    runs = sorted({c.source_id or c.id for c in cases}, key=key)
    held = set(runs[:min(len(runs) - 1, round(holdout * len(runs)))])
    return ([c for c in cases if (c.source_id or c.id) not in held], [c for c in cases if (c.source_id or c.id) in held])


def _predict(cases: Sequence[Case], mapping: Mapping[str, Any]) -> np.ndarray:
    from ..validation.predict import predict_cases

    return np.array([np.nan if p is None else p for p, _ in predict_cases(list(cases), mapping)], float)


def median_abs_error(cases: Sequence[Case], mapping: Mapping[str, Any]) -> float:
    """Median |error| [%] of the cases the profile predicts (NaN with none)."""
    if not cases:
        return float("nan")
    predicted = _predict(cases, mapping)
    keep = np.isfinite(predicted)
    if not keep.any():
        return float("nan")
    measured = np.array([c.measured for c in cases])[keep]
    return float(np.median(np.abs(percent_errors(predicted[keep], measured))))


@dataclass(frozen=True)
class BenchCalibration:
    """What :func:`fit_bench` found.

    Attributes
    ----------
    start, fitted : dict of str to float
        The terms before and after the fit ([s] for the overheads, factors for the scales).
    identified : tuple of str
        Terms the fit runs move; the others keep their start value.
    profile : dict
        The start profile with the fitted terms written in (what ``--out`` holds).
    fit_runs, held_out_runs : int
        Runs fitted and held out.
    kept : dict of str to float
        Terms of the start profile that end-to-end runs do not separate from the fitted ones and
        that stay as they were, where not zero: ``serving_kernel_overhead_s`` (per kernel of the
        forward pass, on top of the per-iteration ``serving_step_overhead_s``) [s].
    errors : dict of str to float
        Median |error| [%] ``before_fit``, ``after_fit``, ``before_held_out``, ``after_held_out``.
    """

    start: dict[str, float]
    fitted: dict[str, float]
    identified: tuple[str, ...]
    profile: dict[str, Any]
    fit_runs: int
    held_out_runs: int
    errors: dict[str, float]
    kept: dict[str, float] = field(default_factory=dict)

    @property
    def pinned(self) -> dict[str, str]:
        """Identified terms the fit left on a bound (``"lower"`` or ``"upper"``): the runs ask for
        more than the term's physical range, which a fit of runs of another GPU, engine or model
        than the profile's does. An overhead at 0 is a legitimate answer (hidden work), not listed.
        Within 1% of a bound counts as on it: the optimizer stops a hair short (1.995 of 2)."""
        out = {}
        for t in self.identified:
            lo, hi = BOUNDS[t]
            if np.isclose(self.fitted[t], hi, rtol=1e-2, atol=0.0):
                out[t] = "upper"
            elif lo > 0 and np.isclose(self.fitted[t], lo, rtol=1e-2, atol=0.0):
                out[t] = "lower"
        return out

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready summary (the profile itself is the written file); an error with no runs
        on its side is None."""
        return {"start": self.start, "fitted": self.fitted, "identified": list(self.identified), "kept": self.kept,
                "pinned": self.pinned,
                "fit_runs": self.fit_runs, "held_out_runs": self.held_out_runs,
                "median_abs_error_pct": {k: v if np.isfinite(v) else None for k, v in self.errors.items()}}


def fit_bench(cases: Sequence[Case], *, profile: str | Mapping[str, Any] = "default", holdout: float = 0.5,
              max_evaluations: int = 200) -> BenchCalibration:
    """Fit the :data:`TERMS` to benchmark cases, from ``profile``.

    Parameters
    ----------
    cases : sequence of Case
        Serving cases of benchmark runs (one run: the cases sharing a ``source_id``).
    profile : str or mapping
        Where the fit starts: ``default``, ``roofline``, a profile YAML or its mapping.
    holdout : float
        Share of the runs kept out of the fit to score it, in [0, 1).
    max_evaluations : int
        Most trial profiles the fit evaluates on every fit case (each a serving simulation
        per run), not counting the finite-difference Jacobians.

    Raises
    ------
    SpecError
        A holdout outside [0, 1), or runs of more than one engine or GPU.
    InfeasibleError
        None of the fit cases can be predicted from the start profile.
    """
    if not 0.0 <= holdout < 1.0:
        raise SpecError(f"calibrate: --holdout {holdout} must be in [0, 1) (the share of runs kept out of the fit)")
    start = copy.deepcopy(dict(profile)) if isinstance(profile, Mapping) else start_mapping(profile)
    fit, held = split_runs(cases, holdout)
    targets = sorted({(case_engine(c), c.hardware) for c in cases})
    if len(targets) > 1:  # the terms are one engine's host side and one GPU's kernels
        raise SpecError("calibrate: the runs are of " + ", ".join(f"{e} on {g}" for e, g in targets)
                        + "; calibrate one engine on one GPU at a time (give the files of each separately)")
    before = _predict(fit, start)
    usable = np.isfinite(before)
    if not usable.any():
        raise InfeasibleError(f"calibrate: none of the {len(fit)} fit cases can be predicted from the start profile")
    fit = [c for c, ok in zip(fit, usable) if ok]
    measured = np.array([c.measured for c in fit])
    x0_terms = start_terms(start, targets)
    x0 = np.array([x0_terms[t] for t in TERMS]) * _MS
    low, high = (np.array([BOUNDS[t][i] for t in TERMS]) * _MS for i in (0, 1))
    x0 = np.clip(x0, low, high)

    def mapping_at(x: np.ndarray) -> dict[str, Any]:
        return calibrated_mapping(start, targets, dict(zip(TERMS, (x / _MS).tolist())))

    def residuals(x: np.ndarray) -> np.ndarray:
        predicted = _predict(fit, mapping_at(x))
        return np.where(np.isfinite(predicted), np.log(np.maximum(predicted, 1e-30) / measured), _MISS)

    starts = _grid_starts(residuals, x0)
    result = min((_local_fit(residuals, x, (low, high), max_evaluations // len(starts)) for x in starts),
                 key=lambda r: r.cost)
    moved = np.linalg.norm(result.jac, axis=0) > 1e-9
    x = np.where(moved, result.x, x0)
    fitted = dict(zip(TERMS, (x / _MS).tolist()))
    out = mapping_at(x)
    errors = {"before_fit": median_abs_error(fit, start), "after_fit": median_abs_error(fit, out),
              "before_held_out": median_abs_error(held, start), "after_held_out": median_abs_error(held, out)}
    per_kernel = load_profile(start, *targets[0], _family(targets[0][1])).serving_kernel_overhead_s
    return BenchCalibration(start=x0_terms, fitted=fitted, identified=tuple(t for t, m in zip(TERMS, moved) if m),
                            profile=out, fit_runs=len({c.source_id for c in fit}),
                            held_out_runs=len({c.source_id for c in held}), errors=errors,
                            kept={"serving_kernel_overhead_s": per_kernel} if per_kernel else {})


def _grid_starts(residuals: Any, x0: np.ndarray, keep: int = 2) -> list[np.ndarray]:
    """The ``keep`` points of a coarse grid of the GEMM and attention scales (the two every run
    moves; :data:`START_GRID`) with the lowest soft-L1 cost: the errors are rugged enough that
    a local fit from the start profile alone can stall."""
    scored = []
    for gemm, attention in itertools.product(START_GRID, START_GRID):
        x = x0.copy()
        x[TERMS.index("gemm_scale")], x[TERMS.index("attention_scale")] = gemm, attention
        z = (residuals(x) / 0.05) ** 2
        scored.append((float(np.sum(np.sqrt(1 + z) - 1)), gemm, attention, x))
    return [x for *_, x in sorted(scored, key=lambda item: item[:3])[:keep]]


def _local_fit(residuals: Any, x: np.ndarray, bounds: tuple[np.ndarray, np.ndarray], budget: int) -> Any:
    """Bounded soft-L1 least squares from ``x``, restarted while that lowers the cost."""
    from scipy.optimize import least_squares

    cost = np.inf
    for _ in range(RESTARTS):  # a kink collapses the trust region; a restart resets it
        result = least_squares(residuals, x, bounds=bounds, loss="soft_l1", f_scale=0.05, diff_step=1e-3,
                               xtol=1e-10, max_nfev=max(budget, 1))
        budget -= result.nfev
        if result.cost > cost * (1 - 1e-3) or result.cost < 1e-12 or budget <= 0:
            break
        x, cost = result.x, result.cost
    return result


def profile_yaml(report: BenchCalibration, source: str) -> str:
    """The calibrated profile as YAML, its fit summarized in leading comments."""
    lines = [f"# Written by `inferlab calibrate --bench`; {source}",
             f"# {report.fit_runs} runs fitted, {report.held_out_runs} held out; median |error|:",
             *(f"#   {k.replace('_', ' ')}: {v:.1f}%" for k, v in report.errors.items() if np.isfinite(v)),
             "# fitted terms (start -> fitted):",
             *(f"#   {t}: {report.start[t]:.6g} -> {report.fitted[t]:.6g}"
               + ("" if t in report.identified else " (not identified by these runs)") for t in TERMS)]
    data = {**report.profile, "source": source}
    return "\n".join(lines) + "\n" + yaml.safe_dump(data, sort_keys=False, width=120)
