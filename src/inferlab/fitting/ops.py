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

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.optimize import least_squares

from ..calibration.profile import Profile, hardware_family
from ..errors import InferlabError
from ..specs.catalog import hardware_ids
from ..validation.ops import OpTable, predict_group

#: Robust loss of the fits: residuals [log ratio] beyond this scale count less than squared.
LOSS_SCALE = 0.1


@dataclass(frozen=True)
class Param:
    """One fitted profile field: its path in the profile mapping, start value and bounds."""

    path: tuple[str, ...]
    initial: float
    lower: float
    upper: float


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
COLLECTIVE_PARAMS = [Param(("collective", "latency_s"), 5e-6, 1e-8, 1e-3),
                     Param(("collective", "bandwidth_fraction"), 0.7, 0.005, 1.0)]
HOP_PARAM = Param(("collective", "hop_latency_s"), 1e-6, 1e-9, 1e-4)  # fitted where groups of > 2 GPUs show it
#: Where the switch reduces in the fabric (NVLS), its share of the link too.
NVLS_PARAMS = [Param(("collective", "nvls_bandwidth_fraction"), 0.5, 0.005, 1.0),
               Param(("collective", "nvls_latency_s"), 5e-5, 1e-6, 1e-3)]


def set_path(tree: dict[str, Any], path: Sequence[str], value: Any) -> None:
    """Set ``tree[path[0]][path[1]]... = value``, creating mappings on the way."""
    for key in path[:-1]:
        tree = tree.setdefault(key, {})
    tree[path[-1]] = value


def get_path(tree: dict[str, Any], path: Sequence[str]) -> Any:
    """``tree[path[0]][path[1]]...``, or None when a key is missing."""
    for key in path:
        if not isinstance(tree, dict) or key not in tree:
            return None
        tree = tree[key]
    return tree


def fit_log(residuals: Callable[[dict[str, Any]], np.ndarray], params: Sequence[Param],
            sparsity: np.ndarray | None = None) -> dict[str, Any]:
    """Fit ``params`` so that ``residuals(fragment)`` (log ratios) are smallest.

    ``fragment`` is a nested mapping of the parameter values (a partial profile).
    ``sparsity`` [rows x params] says which residuals a parameter can move.
    """
    lower = np.log([p.lower for p in params])
    upper = np.log([p.upper for p in params])
    start = np.clip(np.log([p.initial for p in params]), lower + 1e-9, upper - 1e-9)

    def fragment(x: np.ndarray) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for p, v in zip(params, np.exp(x)):
            set_path(out, p.path, float(v))
        return out

    result = least_squares(lambda x: residuals(fragment(x)), start, bounds=(lower, upper), loss="soft_l1",
                           f_scale=LOSS_SCALE, jac_sparsity=sparsity, diff_step=1e-4, max_nfev=400)
    return fragment(result.x)


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


def fit_collective(table: OpTable, hardware: str, base: dict[str, Any]) -> dict[str, Any]:
    """Collective latency and bandwidth share on one GPU (``base``: the rest of its profile),
    and NVLS's share where the GPU's switch reduces in the fabric.

    In two stages: the ring (and, without a hop latency, one-shot) on every row without NVLS, then NVLS's share
    and fixed time with those kept, so that NVLS wins only where the rows it can serve
    (16-bit) run faster than those paths predict, and the rows it cannot serve (8-bit; an
    engine with NVLS off, SGLang's) keep the paths' own fit. On 8 H100s the 16-bit rows run
    up to 20% faster than the int8 ones from 128 MiB; on 8 B200s the two are alike, so what
    NVLS gains there is where the ring's fit misses both.

    On a PCIe-only GPU only the two-GPU rows are fitted: two GPUs move their data over the
    same two x16 links with or without peer-to-peer, so those rows measure the link; larger
    groups also measure the server's PCIe topology (switch or host-staged,
    :func:`~inferlab.core.interconnect.pcie_share`), which an op table does not record.
    """
    groups = {k: rows for k, rows in table.groups().items() if k[0] == "all_reduce" and k[2] == hardware}
    if _pcie_only(hardware):
        groups = {k: rows[table["num_gpus"][rows] == 2] for k, rows in groups.items()}
        groups = {k: rows for k, rows in groups.items() if rows.size}
    if not groups:
        return {}
    measured = {k: table.measured_s[rows] for k, rows in groups.items()}

    def fit(params: Sequence[Param], fixed: dict[str, Any]) -> dict[str, Any]:
        def residuals(fragment: dict[str, Any]) -> np.ndarray:
            merged = {**base, "collective": {**base.get("collective", {}), **fixed.get("collective", {}),
                                             **fragment.get("collective", {})}}
            prof = Profile(**merged)
            return np.concatenate([np.log(predict_group(table, rows, prof) / measured[k])
                                   for k, rows in groups.items()])

        return fit_log(residuals, params)

    paths = fit(COLLECTIVE_PARAMS + [HOP_PARAM] * any(np.any(table["num_gpus"][r] > 2) for r in groups.values()), {})
    if not _nvls(hardware):
        return paths
    nvls = fit(NVLS_PARAMS, paths)
    return {"collective": {**paths["collective"], **nvls["collective"]}}


def _hardware(hardware: str) -> Any:
    """The catalog spec of an op table's GPU, or None for one the catalog lacks."""
    from ..specs.catalog import load_hardware

    try:
        return load_hardware(hardware)
    except InferlabError:
        return None


def _nvls(hardware: str) -> bool:
    from ..core.interconnect import in_switch_reduction

    hw = _hardware(hardware)
    return hw is not None and in_switch_reduction(hw)


def _pcie_only(hardware: str) -> bool:
    hw = _hardware(hardware)
    return hw is not None and hw.scale_up.kind in ("pcie", "none")


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
    collectives = {}
    for g in gpus:
        fit = fit_collective(table, g, median_fragment([v for (_, gpu), v in pairs.items() if gpu == g]))
        if fit:
            collectives[g] = fit
    return OpFits(pairs, collectives)


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
