"""Precision of weights, activations and KV cache, and the tensor precision a GEMM runs at.

Formats are data (:mod:`inferlab.precision`). A matrix multiply runs at the widest of
its two operands' compute precisions (FP8 weights with BF16 activations is a BF16
GEMM on dequantized weights), then at the narrowest precision at least that wide the
hardware supports (FP8 on an A100 runs as BF16).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..errors import SpecError
from ..precision import number_format
from ..specs.hardware import HardwareSpec

#: Tensor precisions from narrowest to widest; equal-width pairs are listed together.
_WIDTH = {"fp4": 4, "fp6": 6, "fp8": 8, "int8": 8, "bf16": 16, "fp16": 16, "tf32": 32}
_ORDER = ("fp4", "fp6", "fp8", "int8", "bf16", "fp16", "tf32")


@dataclass(frozen=True)
class PrecisionConfig:
    """Storage formats of weights, activations and the KV cache.

    ``PrecisionConfig.parse("fp8")`` gives FP8 weights, activations and KV cache;
    ``"int4"`` is weight-only (activations and KV stay BF16); a 4-bit float format keeps
    an FP8 KV cache. A mapping ``{weights, activations, kv_cache}`` sets each.
    """

    weights: str = "bf16"
    activations: str = "bf16"
    kv_cache: str = "bf16"

    def __post_init__(self) -> None:
        for name in ("weights", "activations", "kv_cache"):
            number_format(getattr(self, name))

    @classmethod
    def parse(cls, value: Any) -> PrecisionConfig:
        """From a format name, a mapping or a PrecisionConfig."""
        if isinstance(value, PrecisionConfig):
            return value
        if isinstance(value, str):
            fmt = number_format(value).name
            if fmt in ("int4",):
                return cls(fmt, "bf16", "bf16")
            if fmt in ("nvfp4", "mxfp4", "mxfp6"):
                return cls(fmt, fmt, "fp8")
            return cls(fmt, fmt, fmt if fmt != "fp32" else "bf16")
        if isinstance(value, dict):
            unknown = set(value) - {"weights", "activations", "kv_cache"}
            if unknown:
                raise SpecError(f"precision: unknown key(s) {sorted(unknown)}; allowed: weights, activations, kv_cache")
            weights = value.get("weights", "bf16")
            acts = value.get("activations") or ("bf16" if number_format(weights).name == "int4" else weights)
            kv = value.get("kv_cache") or ("bf16" if number_format(acts).bits_per_element > 8 else "fp8")
            return cls(number_format(weights).name, number_format(acts).name, number_format(kv).name)
        raise SpecError(f"precision must be a format name such as 'fp8' or a mapping, got {value!r}")

    def __str__(self) -> str:
        if self.weights == self.activations == self.kv_cache:
            return self.weights
        return f"w:{self.weights} a:{self.activations} kv:{self.kv_cache}"


def supported_precision(wanted: str, hw: HardwareSpec) -> str:
    """The narrowest tensor precision at least as wide as ``wanted`` that ``hw`` runs.

    Raises
    ------
    SpecError
        If the device lists no tensor rate that wide (e.g. an FP4-only datasheet).
    """
    width = _WIDTH[wanted]
    # Only the 16-bit formats stand in for each other; FP8 never runs as INT8.
    same = [wanted] + [p for p in ("bf16", "fp16") if width == 16 and p != wanted]
    wider = [p for p in _ORDER if _WIDTH[p] > width]
    for prec in same + wider:
        if prec in hw.flops:
            return prec
    if any(_WIDTH.get(p, 99) < width for p in hw.flops):
        # Only narrower rates listed (an FP4-only datasheet such as Rubin CPX): the device still
        # runs the wider format, at a rate :func:`tensor_flops_per_s` derives from the listed one.
        return wanted
    raise SpecError(
        f"{hw.id} lists no tensor throughput for {wanted} or wider (it lists {', '.join(hw.supported_precisions)})"
    )


def tensor_flops_per_s(hw: HardwareSpec, precision: str) -> float:
    """Dense tensor throughput of ``hw`` at ``precision`` [FLOP/s].

    Notes
    -----
    A listed rate is used as it is. A precision the datasheet does not list is derived from
    the closest narrower listed one by the ratio of widths: NVIDIA tensor cores from Hopper
    on double their rate with each halving of the operand width (H100 SXM dense: 989 TFLOPS
    BF16, 1979 FP8; B200: 2.25 / 4.5 / 9 PFLOPS BF16 / FP8 / FP4, NVIDIA datasheets), so a
    datasheet that states only FP4 (Rubin CPX) gives FP8 at half and BF16 at a quarter of it.
    """
    fig = hw.flops.get(precision)  # type: ignore[call-overload]
    if fig is not None:
        return fig.si
    width = _WIDTH.get(precision, 16)
    narrower = sorted((p for p in hw.flops if _WIDTH.get(p, 99) < width), key=lambda p: -_WIDTH[p])
    if not narrower:
        raise SpecError(f"{hw.id} lists no tensor throughput for {precision} (it lists "
                        f"{', '.join(hw.supported_precisions)})")
    closest = narrower[0]
    return hw.flops[closest].si * _WIDTH[closest] / width


def matmul_precision(a: str, b: str, hw: HardwareSpec) -> str:
    """Tensor precision of a product of operands stored in formats ``a`` and ``b``."""
    ca, cb = number_format(a).compute, number_format(b).compute
    if ca == cb:
        wanted = ca
    elif _WIDTH[ca] == _WIDTH[cb]:
        wanted = "bf16"  # FP8 x INT8 (or FP16 x BF16) has no common kernel: 16-bit
    else:
        wanted = ca if _WIDTH[ca] > _WIDTH[cb] else cb
    return supported_precision(wanted, hw)


def gemm_kernel(config: PrecisionConfig, gemm_precision: str) -> str:
    """Kernel family of the model's GEMMs, the key of their efficiency curve.

    Weight-only formats (weights narrower than the compute) are ``<weights>_wo``; INT8
    weights and activations are SmoothQuant-style ``int8_sq``; otherwise the weight format
    (``fp8``, ``fp8_block``, ``nvfp4``, ``bf16``...).
    """
    weights = number_format(config.weights)
    if weights.compute != gemm_precision and _WIDTH.get(weights.compute, 16) < _WIDTH[gemm_precision]:
        return f"{weights.name}_wo"
    if weights.name == "int4":
        return "int4_wo"
    if weights.name == "int8":
        return "int8_sq"
    return weights.name
