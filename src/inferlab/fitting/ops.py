"""Fit the kernel efficiency curves of a profile to op-level measurements.

Each (engine, GPU) pair of the op table gets its GEMM curves (per kernel), attention
efficiencies and kernel floor in one joint fit; each GPU gets its collective latency and
bandwidth share. The fit minimises ``log(predicted / measured)`` of every row, with the
predictions made by the step model's own timing rules (:func:`time_op`), so the fitted
profile means exactly what the model does with it.

Notes
-----
Parameters are fitted in log space within physical bounds by
:func:`scipy.optimize.least_squares` (trust-region reflective) with a soft-L1 loss of
scale 0.1 (about 10%), so the rare shapes no kernel model captures (extreme GQA ratios,
benchmark L2 residency) do not pull the curves away from the common ones.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..calibration.profile import Profile, hardware_family
from ..errors import InferlabError
from ..specs.catalog import hardware_ids
from ..validation.ops import OpTable, predict_group
from .collectives import fit_collective
from .least_squares import Param, fit_log, get_path, set_path

#: GEMM kernels that read their inputs as they are: no quantization pass, so no fixed cost of
#: their own beyond the kernel floor (fitting one would only trade off against the floor).
UNSCALED_KERNELS = ("bf16", "fp16")


def _gemm_params(kernel: str) -> list[Param]:
    base = ("gemm", "kernels", kernel)
    params = [Param(base + ("peak_fraction",), 0.7, 0.02, 1.0), Param(base + ("m_half",), 30.0, 0.01, 1e4),
              Param(base + ("n_half",), 100.0, 0.01, 1e5), Param(base + ("bandwidth_fraction",), 0.7, 0.02, 1.0)]
    if kernel not in UNSCALED_KERNELS:
        params.append(Param(base + ("fixed_s",), 1e-6, 1e-9, 1e-4))
    return params


ATTENTION_PARAMS = [
    Param(("attention", "prefill_peak_fraction"), 0.4, 0.01, 1.0),
    Param(("attention", "decode_peak_fraction"), 0.1, 0.001, 1.0),
    Param(("attention", "decode_bandwidth_fraction"), 0.7, 0.01, 1.0),
    Param(("attention", "prefill_bandwidth_fraction"), 0.5, 0.01, 1.0),
    Param(("attention", "per_sequence_head_s"), 1e-8, 1e-13, 1e-5),
    Param(("attention", "fixed_s"), 2e-6, 1e-9, 1e-4),
]
FLOOR_PARAM = Param(("kernel_floor_s",), 5e-6, 1e-7, 1e-4)
def _rows_of(table: OpTable, engine: str, hardware: str, kinds: Sequence[str]) -> dict[tuple, np.ndarray]:
    return {k: rows for k, rows in table.groups().items() if k[1] == engine and k[2] == hardware and k[0] in kinds}


def fit_engine_gpu(table: OpTable, engine: str, hardware: str) -> dict[str, Any]:
    """GEMM curves, attention efficiencies and kernel floor of one engine on one GPU.

    Returns a profile fragment ``{gemm: {kernels: {...}}, attention: {...}, kernel_floor_s}``;
    kinds without rows in ``table`` are left out.
    """
    groups = _rows_of(table, engine, hardware, ("gemm", "attention_prefill", "attention_decode"))
    if not groups:
        return {}
    kernels = sorted({k[3] for k in groups if k[0] == "gemm"})
    has_attention = any(k[0] != "gemm" for k in groups)
    params = [FLOOR_PARAM] + [p for kern in kernels for p in _gemm_params(kern)]
    params += ATTENTION_PARAMS if has_attention else []
    measured = {k: table.measured_s[rows] for k, rows in groups.items()}
    # Which parameters can move which rows: the floor all of them, a curve its own kernel's.
    owner = [("gemm", k[3]) if k[0] == "gemm" else ("attention", "") for k in groups]
    sizes = [len(rows) for rows in groups.values()]
    sparsity = np.zeros((sum(sizes), len(params)), dtype=bool)
    start = 0
    for (kind, kern), size in zip(owner, sizes):
        for j, p in enumerate(params):
            moves = p is FLOOR_PARAM or (kind == "gemm" and p.path[:3] == ("gemm", "kernels", kern)) or \
                (kind == "attention" and p.path[0] == "attention")
            sparsity[start:start + size, j] = moves
        start += size

    def residuals(fragment: dict[str, Any]) -> np.ndarray:
        prof = Profile(**fragment)
        return np.concatenate([np.log(predict_group(table, rows, prof) / measured[k]) for k, rows in groups.items()])

    return fit_log(residuals, params, sparsity)


def median_fragment(fragments: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Field-by-field median of profile fragments (a field missing from some is the median of the rest)."""
    leaves: dict[tuple[str, ...], list[float]] = {}

    def walk(tree: dict[str, Any], prefix: tuple[str, ...]) -> None:
        for key, value in tree.items():
            if isinstance(value, dict):
                walk(value, prefix + (key,))
            else:
                leaves.setdefault(prefix + (key,), []).append(float(value))

    for fragment in fragments:
        walk(fragment, ())
    out: dict[str, Any] = {}
    for path in sorted(leaves):
        set_path(out, path, float(np.median(leaves[path])))
    return out


def with_ridges(fragment: dict[str, Any], gpu: str) -> dict[str, Any]:
    """Record on each GEMM curve the ridge point (peak at its kernel's compute precision over
    bandwidth) [FLOP/B] of the GPU it was fitted on: the medians of :func:`assemble_profile`
    then carry the median ridge of the GPUs behind them, and a GPU elsewhere scales the curve's
    ``m_half`` by its own ridge over that one (:func:`inferlab.core.timing.m_half_scale`)."""
    from ..specs.catalog import load_hardware

    kernels = get_path(fragment, ("gemm", "kernels")) or {}
    try:
        hw = load_hardware(gpu)
    except InferlabError:  # a GPU the catalog lacks: its curves carry no ridge (never scaled)
        return fragment
    for kernel, curve in kernels.items():
        try:
            curve["fitted_ridge"] = kernel_peak(hw, kernel) / hw.memory_bandwidth.si
        except InferlabError:
            continue
    return fragment


def kernel_peak(hw: Any, kernel: str) -> float:
    """Dense peak [FLOP/s] of ``hw`` at GEMM ``kernel``'s compute precision (an op file's dtype)."""
    from ..core.quantization import tensor_flops_per_s
    from ..validation.ops import GEMM_DTYPES

    return tensor_flops_per_s(hw, GEMM_DTYPES.get(kernel, (kernel,))[0])


def with_best(fragment: dict[str, Any], table: OpTable, engine: str, gpu: str) -> dict[str, Any]:
    """Record on each GEMM curve the fastest of its op rows as a share of the GPU's dense peak at
    the kernel's compute precision (``best_fraction``): the curve's plateau is fitted over every
    shape, mostly small ones, and runs past what large GEMMs measure (TensorRT-LLM's NVFP4 on the
    B200 had reached 0.998 of its 9 PFLOPS where no row beats 0.55)."""
    from ..specs.catalog import load_hardware

    kernels = get_path(fragment, ("gemm", "kernels")) or {}
    try:
        hw = load_hardware(gpu)
    except InferlabError:  # a GPU the catalog lacks: no peak to share
        return fragment
    for key, rows in _rows_of(table, engine, gpu, ("gemm",)).items():
        if key[3] not in kernels:
            continue
        try:
            peak = kernel_peak(hw, key[3])
        except InferlabError:
            continue
        rate = 2.0 * table["m"][rows] * table["n"][rows] * table["k"][rows] / table.measured_s[rows]
        kernels[key[3]]["best_fraction"] = float(min(1.0, np.max(rate) / peak))
    return fragment


#: Kernels a GPU runs on one tensor-core path at one dense rate: INT8 (SmoothQuant W8A8) and per-tensor
#: FP8 share Hopper's, Ada's and the B200's 8-bit MMAs, tiles and clocks. Without rows of its own there a
#: kernel takes its sibling's curve, not another GPU's: the A100's INT8 curve (0.87 of its peak) carried
#: to an H100 had run INT8 prefills 17-21% faster than FP8 at the same 1,979 TFLOPS.
SAME_RATE_SIBLINGS = {"int8_sq": "fp8"}


def with_siblings(fragment: dict[str, Any], gpus: Sequence[str]) -> dict[str, Any]:
    """Add to a profile level for ``gpus`` (one GPU, or a family's catalog GPUs) the curves of
    :data:`SAME_RATE_SIBLINGS` it lacks where each GPU runs kernel and sibling at one dense rate;
    after the medians, so a copy never stands in for a kernel's own rows elsewhere (the A100's INT8)."""
    from ..specs.catalog import load_hardware

    kernels = get_path(fragment, ("gemm", "kernels")) or {}
    for kernel, sibling in SAME_RATE_SIBLINGS.items():
        if kernel in kernels or sibling not in kernels or not gpus:
            continue
        try:
            same = all(kernel_peak(hw, kernel) == kernel_peak(hw, sibling)
                       for hw in map(load_hardware, gpus))
        except InferlabError:  # a GPU the catalog lacks, or one without the kernel's precision
            continue
        if same:
            kernels[kernel] = dict(kernels[sibling])
    return fragment


def with_default_curve(fragment: dict[str, Any]) -> dict[str, Any]:
    """Add the ``default`` GEMM curve (16-bit dense: the ``bf16`` one) where a ``bf16`` curve exists."""
    kernels = get_path(fragment, ("gemm", "kernels"))
    if kernels and "bf16" in kernels:
        kernels["default"] = dict(kernels["bf16"])
    return fragment


@dataclass(frozen=True)
class OpFits:
    """Independent fits of an op table: per (engine, GPU) kernel fragments and per-GPU collectives."""

    pairs: dict[tuple[str, str], dict[str, Any]]
    collectives: dict[str, dict[str, Any]]
    #: Each GPU's collectives fitted without a hop latency: the datasheet-only fallback's medians.
    flat_collectives: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def gpus(self) -> list[str]:
        """GPUs with any fit, sorted."""
        return sorted({g for _, g in self.pairs} | set(self.collectives))


def fit_ops(table: OpTable) -> OpFits:
    """Fit every (engine, GPU) pair and every GPU's collectives in ``table``."""
    engines = sorted({str(e) for e in table["engine"][table["op"] != "all_reduce"]})
    gpus = sorted({str(h) for h in table["hardware"]})
    pairs = {(e, g): with_default_curve(with_best(with_ridges(fit_engine_gpu(table, e, g), g), table, e, g))
             for e in engines for g in gpus}
    pairs = {k: v for k, v in pairs.items() if v}
    collectives, flat = {}, {}
    for g in gpus:
        base = median_fragment([v for (_, gpu), v in pairs.items() if gpu == g])
        fit = fit_collective(table, g, base)
        if fit:
            collectives[g], flat[g] = fit, fit_collective(table, g, base, hops=False)
    return OpFits(pairs, collectives, flat)


def assemble_profile(fits: OpFits, exclude: str | None = None) -> dict[str, Any]:
    """Profile sections from op fits: ``generic``, ``hardware`` and per-engine ``overrides``.

    * ``overrides[engine][gpu]``: the joint fit of that engine on that GPU;
    * ``hardware[gpu]``: the median over engines on that GPU (an engine without kernel
      data of its own runs there with it) and the GPU's collective fit;
    * ``hardware[family]`` and ``overrides[engine][family]``: the same medians over the
      measured GPUs of one architecture family (``hopper``, ``blackwell``...): a GPU known
      only from its datasheet runs the kernels of its measured siblings (an H200 the
      H100's, a GB200 the B200's), as fractions of its own peaks and bandwidth;
    * ``overrides[engine].all``: the engine's kernel curves, medians over GPUs (what a
      measured engine gets on a GPU whose family it was never measured on);
    * ``generic``: medians over GPUs of ``hardware`` (the datasheet-only fallback).

    ``exclude`` leaves one GPU out everywhere, as if it were known only from its datasheet.
    """
    pairs = {k: v for k, v in fits.pairs.items() if k[1] != exclude}
    gpus = [g for g in fits.gpus if g != exclude]
    hardware: dict[str, Any] = {}
    for g in gpus:
        level = median_fragment([v for (_, gpu), v in pairs.items() if gpu == g])
        level.update(fits.collectives.get(g, {}))
        if level:
            hardware[g] = level
    families: dict[str, list[str]] = {}
    for g in gpus:
        families.setdefault(_family_of(g), []).append(g)
    families = {f: members for f, members in families.items() if f not in hardware and f != "unknown"}
    generic = median_fragment(list(hardware.values()))
    if any(g in fits.flat_collectives for g in gpus):  # a GPU without a family fit: per-step latencies, as fitted
        generic["collective"] = {**median_fragment([fits.flat_collectives[g] for g in gpus if g in fits.flat_collectives])
                                 ["collective"], "hop_latency_s": 0.0}
    for family, members in sorted(families.items()):
        level = median_fragment([hardware[g] for g in members if g in hardware])
        if level:
            hardware[family] = level
    overrides: dict[str, Any] = {}
    for e in sorted({e for e, _ in pairs}):
        mine = {g: v for (eng, g), v in pairs.items() if eng == e}
        by_family = {f: median_fragment([mine[g] for g in members if g in mine]) for f, members in families.items()}
        overrides[e] = {"all": median_fragment(list(mine.values())), **mine,
                        **{f: v for f, v in sorted(by_family.items()) if v}}
    members = {f: [g for g in hardware_ids() if _family_of(g) == f] for f in families}
    for level, fragment in [*hardware.items(), *((g, v) for e in overrides.values() for g, v in e.items())]:
        with_siblings(fragment, [level] if level in gpus else members.get(level, []))
    return {"generic": generic, "hardware": hardware, "overrides": overrides}


def _family_of(gpu: str) -> str:
    """Architecture family of a catalog GPU (``unknown`` for an id the catalog lacks)."""
    from ..specs.catalog import load_hardware

    try:
        return hardware_family(load_hardware(gpu).architecture)
    except InferlabError:
        return "unknown"
