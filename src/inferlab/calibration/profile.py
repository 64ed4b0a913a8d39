"""Calibration profiles: the empirical efficiency layer, kept apart from datasheet facts.

A profile holds named, keyword-only efficiency parameters. The shipped profile
(``profiles/default.yaml``) is written by ``inferlab calibrate`` from the public
measurements; it has ``generic`` values (the datasheet-only fallback for any GPU and
engine), ``hardware`` values per measured GPU (any engine) and ``overrides`` per engine
and per engine+GPU. ``"roofline"`` is the
speed-of-light view: every efficiency 1, every floor and overhead 0.
"""

from __future__ import annotations

import functools
from importlib import resources
from pathlib import Path
from collections.abc import Mapping
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from ..errors import SpecError, UnknownNameError
from ..specs.validation import SAFE_LOADER, format_validation_error, read_text

_STRICT = ConfigDict(frozen=True, extra="forbid")


class GemmCurve(BaseModel):
    """Efficiency of one GEMM kernel family (dtype and scaling scheme).

    Compute efficiency at ``M`` rows per weight matrix and ``N`` output features is
    ``peak_fraction * M / (M + m_half) * N / (N + n_half)``: small-M GEMMs cannot fill the
    tensor cores, and narrow outputs leave too few output tiles to occupy every SM; large
    ones plateau at a share of peak that depends on the kernel (LESSONS: 70-80%). Bytes
    move at ``bandwidth_fraction`` of DRAM bandwidth. ``fixed_s`` is a cost per call above
    the kernel floor that does not shrink with the shape: the activation quantization and
    scale kernels a scaled low-precision GEMM launches with it, split-K reductions. Without
    it a fit would hide that latency in a low bandwidth share and make large decode GEMMs
    too slow.
    """

    model_config = _STRICT
    peak_fraction: float = Field(default=1.0, gt=0.0, le=1.0)
    m_half: float = Field(default=0.0, ge=0.0)
    n_half: float = Field(default=0.0, ge=0.0)
    bandwidth_fraction: float = Field(default=1.0, gt=0.0, le=1.0)
    fixed_s: float = Field(default=0.0, ge=0.0)
    fitted_ridge: float = Field(
        default=0.0, ge=0.0,
        description="Ridge point (dense peak at the kernel's compute precision over memory bandwidth) [FLOP/B] "
                    "of the GPU whose op rows fitted the curve, the median over GPUs for a curve that is their "
                    "median; 0: unknown. On another GPU m_half is carried over as the time it stands for "
                    "(core.timing.m_half_scale).")

    best_fraction: float | None = Field(
        default=None, gt=0.0, le=1.0,
        description="The fastest the kernel was measured to run, as a share of the GPU's dense peak at its compute "
                    "precision (the op rows' best 2MNK / time; the median over engines or GPUs for a curve that is "
                    "their median); None: unmeasured. No GEMM of the kernel is timed faster, whatever the curve "
                    "gives at shapes the rows did not reach.")

    def compute_fraction(self, m: Any, n: Any = None, m_half_scale: float = 1.0) -> Any:
        """Share of dense peak reached at ``m`` rows per weight matrix and ``n`` output features
        (``m_half`` times ``m_half_scale``: on a GPU of another ridge point than
        :attr:`fitted_ridge`)."""
        m_half = self.m_half * m_half_scale
        eff = self.peak_fraction * m / (m + m_half) if m_half else self.peak_fraction + 0.0 * m
        if self.n_half and n is not None:
            eff = eff * n / (n + self.n_half)
        return eff


#: A compute precision without a curve of its own -> the measured kernel that runs on the same
#: tensor-core path: MXFP4 (32-element blocks, E8M0 scales) and NVFP4 (16, E4M3) are both
#: block-scaled FP4 MMAs on Blackwell (tcgen05 ``kind::mxf4nvf4``), FP6 runs at FP8's rate
#: (``kind::mxf8f6f4``). Without it an MXFP4 GEMM took the BF16 curve's higher efficiency and
#: prefilled 28% faster than the same GEMM in NVFP4.
SAME_TENSOR_PATH = {"fp4": "nvfp4", "fp6": "fp8"}


class GemmEfficiency(BaseModel):
    """GEMM curves keyed by kernel (``bf16``, ``fp8``, ``fp8_block``, ``nvfp4``, ``int4_wo``...);
    a kernel without a curve uses its compute precision's, then ``default``."""

    model_config = _STRICT
    kernels: dict[str, GemmCurve] = Field(default_factory=lambda: {"default": GemmCurve()})

    def curve(self, kernel: str, precision: str) -> GemmCurve:
        """The curve for ``kernel``, falling back to ``precision``, to the measured kernel of the
        same tensor-core path (:data:`SAME_TENSOR_PATH`) and then ``default``."""
        for key in (kernel, precision, SAME_TENSOR_PATH.get(precision, precision), "default"):
            if key in self.kernels:
                return self.kernels[key]
        return GemmCurve()


class AttentionEfficiency(BaseModel):
    """Attention kernels.

    Prefill runs at ``prefill_peak_fraction`` of dense peak; decode computes at
    ``decode_peak_fraction`` (its kernels multiply one query row per head, far from the
    tensor-core peak; unset: the prefill value) and streams the KV cache at
    ``decode_bandwidth_fraction`` of DRAM bandwidth (prefill at
    ``prefill_bandwidth_fraction``; unset: the decode value), plus ``per_sequence_head_s`` for every
    (sequence x KV head) it touches (LESSONS: a fixed cost that dominates small calls) and
    ``fixed_s`` per call above the kernel floor (split-KV reduction and scheduling kernels).
    """

    model_config = _STRICT
    prefill_peak_fraction: float = Field(default=1.0, gt=0.0, le=1.0)
    decode_peak_fraction: float | None = Field(default=None, gt=0.0, le=1.0)
    decode_bandwidth_fraction: float = Field(default=1.0, gt=0.0, le=1.0)
    prefill_bandwidth_fraction: float | None = Field(default=None, gt=0.0, le=1.0)
    per_sequence_head_s: float = Field(default=0.0, ge=0.0)
    fixed_s: float = Field(default=0.0, ge=0.0)

    def peak_fraction(self, phase: str) -> float:
        """Share of dense peak attention computes at in ``phase`` (``prefill`` or ``decode``)."""
        if phase == "decode" and self.decode_peak_fraction is not None:
            return self.decode_peak_fraction
        return self.prefill_peak_fraction

    def bandwidth_fraction(self, phase: str) -> float:
        """Share of DRAM bandwidth attention streams at in ``phase``."""
        if phase == "prefill" and self.prefill_bandwidth_fraction is not None:
            return self.prefill_bandwidth_fraction
        return self.decode_bandwidth_fraction


class CollectiveEfficiency(BaseModel):
    """Collectives on the scale-up fabric: NCCL's low-latency protocols as ``latency_s`` and
    ``hop_latency_s`` a step (or, with no hop fitted, ``latency_s`` a step) plus bytes at
    ``bandwidth_fraction`` of the link; its Simple protocol the same with ``simple_*`` where
    timed apart; NVLS and the engines' own kernels beside them. ``network_*`` the same across
    nodes over the scale-out NICs."""

    model_config = _STRICT
    latency_s: float = Field(default=0.0, ge=0.0)
    hop_latency_s: float = Field(
        default=0.0, ge=0.0,
        description="Time of each step of a ring in the node beyond latency_s, paid once (NCCL's tuning model: "
                    "a base latency plus one per step); 0: latency_s per step.")
    bandwidth_fraction: float = Field(default=1.0, gt=0.0, le=1.0)
    simple_latency_s: float = Field(
        default=0.0, ge=0.0,
        description="Fixed time of NCCL's Simple protocol in the node (its pipeline's fill), where it is timed apart "
                    "from the low-latency protocols that latency_s, hop_latency_s and bandwidth_fraction describe.")
    simple_hop_latency_s: float = Field(
        default=0.0, ge=0.0,
        description="Simple protocol's time a ring step beyond simple_latency_s, where hop_latency_s is fitted; "
                    "without it (a GPU with two-GPU rows only) simple_latency_s is a step's, as latency_s is.")
    simple_bandwidth_fraction: float = Field(
        default=0.0, ge=0.0, le=1.0,
        description="Share of the link NCCL's Simple protocol moves; 0: no Simple path apart (the one ring stands "
                    "for every protocol). NCCL takes whichever protocol is faster for a message.")
    network_latency_s: float = Field(default=0.0, ge=0.0)
    network_bandwidth_fraction: float = Field(default=1.0, gt=0.0, le=1.0)
    network_ll_latency_s: float = Field(
        default=0.0, ge=0.0,
        description="Step latency between nodes of NCCL's low-latency (LL) protocol, which small messages take: "
                    "flags ride with the data, so a step waits for no separate signal, at a quarter of the "
                    "bandwidth; 0: no LL path (every step network_latency_s).")
    custom_latency_s: float = Field(
        default=0.0, ge=0.0,
        description="Latency of the engine's own one-shot all-reduce kernel inside an NVLink/xGMI domain "
                    "(peer-to-peer loads after one flag barrier); 0 where the engine runs NCCL only.")
    nvls_bandwidth_fraction: float = Field(
        default=0.0, ge=0.0, le=1.0,
        description="Share of link bandwidth of NCCL's NVLink SHARP (NVLS) all-reduce, reduced in the NVSwitch "
                    "(each GPU sends and receives the buffer once); 0 where it was not measured (no NVLS path).")
    nvls_latency_s: float = Field(default=0.0, ge=0.0,
                                  description="Fixed time of an NVLS all-reduce (its setup and pipeline fill).")

    @model_validator(mode="after")
    def _simple_fills(self) -> CollectiveEfficiency:
        """A Simple line timed apart has a fixed time where the low-latency one does: with none it
        would take every message, so a small collective would cost next to nothing."""
        if self.simple_bandwidth_fraction > 0.0 and self.simple_latency_s == 0.0 and self.latency_s > 0.0:
            raise ValueError("simple_latency_s must be above 0 where simple_bandwidth_fraction is set and latency_s "
                             "is: NCCL's Simple protocol fills its pipeline before it streams (fitted: 20 us on 8 "
                             "H100s); with no fixed time it would take every message")
        return self


class Profile(BaseModel):
    """All efficiency parameters for one engine on one GPU."""

    model_config = _STRICT
    name: str = "roofline"
    gemm: GemmEfficiency = GemmEfficiency()
    attention: AttentionEfficiency = AttentionEfficiency()
    collective: CollectiveEfficiency = CollectiveEfficiency()
    elementwise_bandwidth_fraction: float = Field(default=1.0, gt=0.0, le=1.0)
    elementwise_floor_fraction: float = Field(
        default=1.0, ge=0.0, le=1.0,
        description="Share of the kernel floor an elementwise pass pays: 0 where engines fuse norms, residual "
                    "adds and activations into neighbouring kernels, 1 where each runs as its own kernel.")
    gemm_fixed_fraction: float = Field(
        default=1.0, ge=0.0, le=1.0,
        description="Share of a GEMM curve's fixed_s (the activation quantization a standalone scaled GEMM "
                    "launches) a GEMM pays inside a step: 0 where engines fuse the quantization into the norm "
                    "or activation that produces the GEMM's input.")
    kernel_floor_s: float = Field(default=0.0, ge=0.0, description="Shortest time any kernel takes.")
    launch_overhead_s: float = Field(default=0.0, ge=0.0, description="Per kernel when CUDA graphs are off.")
    eager_host_per_kernel_s: float = Field(
        default=0.0, ge=0.0,
        description="Host time per kernel of the op graph in an iteration the engine runs eagerly (prefill and "
                    "mixed iterations of an engine that captures CUDA graphs for decode batches only): the "
                    "engine's Python issues every kernel's calls, and the iteration lasts the longer of the "
                    "host's issue time and the GPU's work. 0 where prefill runs in (piecewise) CUDA graphs.")
    eager_decode_host_per_kernel_s: float = Field(
        default=0.0, ge=0.0,
        description="eager_host_per_kernel_s for a decode step run eagerly (a decode batch beyond the engine's "
                    "largest CUDA graph, or CUDA graphs off), where the engine's decode path issues its kernels at "
                    "another rate; 0: eager_host_per_kernel_s.")
    step_overhead_s: float = Field(default=0.0, ge=0.0, description="Scheduler and host work per step.")
    serving_step_overhead_s: float = Field(
        default=0.0, ge=0.0,
        description="In-flight batching only: host work per iteration beyond a static step's (scheduling, "
                    "building the mixed batch, updating request state); fitted on serving cases.")
    serving_kernel_overhead_s: float = Field(
        default=0.0, ge=0.0,
        description="In-flight batching only: time per kernel of the model's forward pass (the op graph's "
                    "kernels in a decode step, every pipeline stage's) that each iteration costs beyond the op "
                    "graph's: an engine that fuses less runs more, smaller kernels than the graph counts, each "
                    "with its own floor and gap, so the cost grows with the layers and the ops in them, not per "
                    "iteration. Fitted on serving cases where serving_step_overhead_s reaches a measured value.")
    request_overhead_s: float = Field(
        default=0.0, ge=0.0,
        description="Serving only: per request, the server's time outside the GPU iterations (HTTP, "
                    "tokenization, handing the request to the scheduler, streaming the first token back); "
                    "a request reaches the scheduler this long after it is sent. Fitted on serving cases.")
    source: str = "datasheet peaks only"
    #: Where the file was calibrated for other deployments than this one (``fitted_for``, written
    #: by ``calibrate --bench``): what the terms here are instead. Empty otherwise.
    note: str = ""


ROOFLINE = Profile()


def _deep_merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in extra.items():
        out[key] = _deep_merge(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


@functools.lru_cache(maxsize=32)
def _parse_profile_text(text: str, label: str) -> dict[str, Any]:
    """Parsed profile file, cached on its text (estimates re-resolve profiles per call)."""
    try:
        data = yaml.load(text, Loader=SAFE_LOADER)
    except yaml.YAMLError as exc:
        raise SpecError(f"profile {label}: not valid YAML ({exc})") from None
    if not isinstance(data, dict) or "generic" not in data:
        raise SpecError(f"profile {label}: expected a mapping with 'generic' (and optional 'hardware' and 'overrides')")
    return data


def profile_file(name: str) -> Any:
    """The shipped profile file ``name`` (``default``)."""
    return resources.files("inferlab.calibration") / "profiles" / f"{name}.yaml"


#: Profile terms of an engine's runtime (scheduler, server, how it launches the model's
#: kernels), not of the kernels themselves.
HOST_TERMS = frozenset({"step_overhead_s", "serving_step_overhead_s", "serving_kernel_overhead_s",
                        "request_overhead_s", "launch_overhead_s", "eager_host_per_kernel_s",
                        "eager_decode_host_per_kernel_s"})


#: GPUs whose tensor cores are another family's: GeForce and RTX PRO Blackwell (sm_120) run
#: warp-level MMA like Ada, without the datacenter Blackwell tcgen05 / tensor-memory path, so
#: kernels tuned on the B200 (its 256-row tiles among them) do not carry over; Ada's fits do.
KERNEL_FAMILY = {"sm_120": "ada"}


def hardware_family(architecture: str) -> str:
    """``"Hopper (GH100)"`` -> ``"hopper"``: the GPU family a profile override may name (the
    family whose kernels the GPU runs, :data:`KERNEL_FAMILY`)."""
    for marker, family in KERNEL_FAMILY.items():
        if marker in architecture:
            return family
    return architecture.split()[0].lower() if architecture.strip() else "unknown"


def load_profile(profile: str | Path | Mapping[str, Any] | Profile, engine: str, hardware_id: str,
                 family: str = "") -> Profile:
    """Resolve a profile for ``engine`` on ``hardware_id``.

    Parameters
    ----------
    profile : str, Path, mapping or Profile
        ``"roofline"``, ``"default"`` (the shipped calibration), a path to a profile YAML
        written by ``inferlab calibrate``, that file's content as a mapping, or a ready
        :class:`Profile`.
    engine, hardware_id, family : str
        On top of ``generic``, the file's ``hardware`` section (per GPU family, then GPU id,
        for every engine) applies first, then the engine's ``overrides`` in the order
        engine-wide (``all``), GPU family, GPU id; a runtime variant such as
        ``trtllm-pytorch`` takes its base engine's (``trtllm``) kernel overrides (not its
        host-side :data:`HOST_TERMS`) before its own.
    """
    if isinstance(profile, Profile):
        return profile
    if profile == "roofline":
        return ROOFLINE
    path = Path(profile) if str(profile).endswith((".yaml", ".yml")) else None
    if isinstance(profile, Mapping):
        if "generic" not in profile:
            raise SpecError("profile mapping: expected 'generic' (and optional 'hardware' and 'overrides')")
        return _resolve(profile, "mapping", engine, hardware_id, family)
    if path is None:
        text = _shipped_text(str(profile))
        if text is None:
            raise UnknownNameError("profile", str(profile), ["roofline", "default", "<path>.yaml"])
        label = str(profile)
    else:
        text = read_text(path, f"profile {path}")
        label = str(path)
    return _resolve_text(text, label, engine, hardware_id, family)


@functools.lru_cache(maxsize=8)
def _shipped_text(name: str) -> str | None:
    """Text of a shipped profile (None if there is none): package files do not change while we run."""
    shipped = profile_file(name)
    return shipped.read_text(encoding="utf-8") if shipped.is_file() else None


@functools.lru_cache(maxsize=1024)
def _resolve_text(text: str, label: str, engine: str, hardware_id: str, family: str) -> Profile:
    """:func:`_resolve` of a profile file's text, cached (a planner resolves the same few
    profiles thousands of times; :class:`Profile` is frozen, so sharing it is safe)."""
    return _resolve(_parse_profile_text(text, label), label, engine, hardware_id, family)


def _unfitted_note(fitted_for: Any, label: str, engine: str, hardware_id: str) -> str:
    """Why ``engine`` on ``hardware_id`` does not get a calibration written for other pairs
    (``fitted_for``: the ``engine/gpu`` pairs its runs came from), or ``""``."""
    pairs = [str(p) for p in fitted_for] if isinstance(fitted_for, (list, tuple)) else []
    base = engine.split("-")[0]  # a runtime variant takes its base engine's kernel terms (_resolve)
    if not pairs or f"{engine}/{hardware_id}" in pairs:
        return ""
    got = (f"the kernel terms fitted for {base}, not its host-side ones" if f"{base}/{hardware_id}" in pairs
           else "the terms it started from, not that fit")
    return f"profile {label} was calibrated on {', '.join(pairs)} runs; {engine} on {hardware_id} gets {got}"


def _resolve(data: Mapping[str, Any], label: str, engine: str, hardware_id: str, family: str) -> Profile:
    per_gpu = data.get("hardware") or {}
    overrides = data.get("overrides") or {}
    merged = dict(data["generic"])
    used = "generic"
    for key in (family, hardware_id):
        if key and key in per_gpu:
            merged = _deep_merge(merged, per_gpu[key])
            used = key
    # A runtime variant (``trtllm-pytorch``) runs its base engine's kernels, not its host
    # side: the base's kernel terms first, then the variant's own.
    base = engine.split("-")[0]
    for name in dict.fromkeys((base, engine)):
        per_engine = overrides.get(name, {})
        for key in ("all", family, hardware_id):
            if key and key in per_engine:
                part = per_engine[key]
                if name != engine:
                    part = {k: v for k, v in part.items() if k not in HOST_TERMS}
                merged = _deep_merge(merged, part)
                used = key if key != "all" else used
    name = f"{label}:{engine}/{used}"
    try:
        return Profile(**{**merged, "name": name, "source": data.get("source", label),
                          "note": _unfitted_note(data.get("fitted_for"), label, engine, hardware_id)})
    except ValidationError as exc:
        raise SpecError(f"profile {label}: {format_validation_error(exc, Profile)}") from None
