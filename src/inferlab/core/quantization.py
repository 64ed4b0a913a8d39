"""Precision of weights, expert weights, activations and KV cache, and the tensor precision a GEMM runs at.

Formats are data (:mod:`inferlab.precision`). A matrix multiply runs at the widest of
its two operands' compute precisions (FP8 weights with BF16 activations is a BF16
GEMM on dequantized weights), then at the narrowest precision at least that wide the
hardware supports (FP8 on an A100 runs as BF16).

A precision is written as a format name (``"fp8"``: every kind derived from it), a
mapping of the kinds it sets, or text of ``kind:format`` tokens after an optional
name (``"fp8 kv:bf16"``, ``"w:bf16 moe:mxfp4 a:bf16 kv:bf16"``, ``"nvfp4 attn:bf16"``: kinds
``w`` weights, ``moe`` routed experts, ``attn`` attention projections, ``a`` activations,
``kv`` KV cache, ``state`` a hybrid model's linear-attention state). The kinds a mapping or
text leaves out come from its base: the named format's derivation, or the model's
shipped checkpoint (``"checkpoint"``, the default) when no format is named.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from ..errors import SpecError, UnknownNameError
from ..precision import FORMATS, number_format
from ..specs.hardware import HardwareSpec

#: Tensor precisions from narrowest to widest; equal-width pairs are listed together.
_WIDTH = {"fp4": 4, "fp6": 6, "fp8": 8, "int8": 8, "bf16": 16, "fp16": 16, "tf32": 32}
_ORDER = ("fp4", "fp6", "fp8", "int8", "bf16", "fp16", "tf32")

#: The tensor kinds a precision sets, with the short names the text form uses.
KINDS = ("weights", "moe_weights", "attention_weights", "activations", "kv_cache", "state")
SHORT_NAMES = {"w": "weights", "moe": "moe_weights", "attn": "attention_weights", "a": "activations", "kv": "kv_cache",
               "state": "state"}
#: The formats engines keep a linear-attention state in (SGLang ``--mamba-ssm-dtype``: float32,
#: bfloat16, float16; vLLM ``--mamba-ssm-cache-dtype``: auto, float32, bfloat16, float16).
STATE_FORMATS = ("fp32", "bf16", "fp16")
_LABEL = {v: k for k, v in SHORT_NAMES.items()}
#: The base meaning "the model's shipped checkpoint formats".
CHECKPOINT = "checkpoint"


@dataclass(frozen=True)
class PrecisionConfig:
    """Storage formats of weights, routed-expert weights, activations and the KV cache.

    ``PrecisionConfig.parse("fp8")`` gives FP8 weights, activations and KV cache;
    ``"int4"`` is weight-only (activations and KV stay BF16); a 4-bit float format keeps
    an FP8 KV cache. ``moe_weights`` is the format of the routed experts' weights; None
    means the same as ``weights`` (gpt-oss ships ``{"weights": "bf16", "moe_weights":
    "mxfp4"}``). ``attention_weights``, the attention projections' (Q, K, V, O and MLA's
    low-rank ones); None: as ``weights`` (NVIDIA's NVFP4 DeepSeek-R1 checkpoint leaves
    attention in BF16 and quantizes the MLPs). ``state``, a hybrid model's linear-attention
    (SSM) state; None: the config's ``mamba_ssm_dtype``, else the engine's default (SGLang FP32,
    vLLM the model's BF16).
    """

    weights: str = "bf16"
    activations: str = "bf16"
    kv_cache: str = "bf16"
    moe_weights: str | None = None
    attention_weights: str | None = None
    state: str | None = None

    def __post_init__(self) -> None:
        for name in KINDS:
            value = getattr(self, name)
            if value is not None:
                object.__setattr__(self, name, number_format(value).name)
        if self.moe_weights == self.weights:  # one spelling per configuration (equality, hashing)
            object.__setattr__(self, "moe_weights", None)
        if self.attention_weights == self.weights:
            object.__setattr__(self, "attention_weights", None)
        if self.state is not None and self.state not in STATE_FORMATS:
            raise SpecError(f"state {self.state}: engines keep a linear-attention state in {', '.join(STATE_FORMATS)} "
                            "(SGLang --mamba-ssm-dtype, vLLM --mamba-ssm-cache-dtype)")
        self._check_activations()

    def _check_activations(self) -> None:
        """Activations in a weight-only format, or narrower than every weight format (no GEMM
        would compute at their width: a product runs at the wider operand's) other than FP8
        (which attention computes at over 16-bit weights), are refused."""
        act = number_format(self.activations)
        if act.weight_only:
            raise SpecError(f"activations {act.name}: a weight-only format (its GEMMs dequantize it to {act.compute}); "
                            "activations take a compute format (bf16, fp16, fp8, int8, nvfp4, mxfp4...)")
        weights = [w for w in (self.weights, self.moe_weights, self.attention_weights) if w]
        narrowest = min(min(_WIDTH.get(number_format(w).compute, 16), 16) for w in weights)  # 16-bit and up alike
        if _WIDTH.get(act.compute, 16) < narrowest and act.compute != "fp8":
            raise SpecError(f"activations {act.name} are narrower than every weight format ({', '.join(weights)}): a "
                            f"GEMM computes at its wider operand, so none would run at {act.name} (nor attention, which runs "
                            f"at FP8 at the narrowest); quantize the weights too (precision {act.name}) or keep the "
                            "activations at the weights' width")

    @property
    def experts(self) -> str:
        """Format of the routed experts' weights."""
        return self.moe_weights or self.weights

    @property
    def attention(self) -> str:
        """Format of the attention projections' weights."""
        return self.attention_weights or self.weights

    @classmethod
    def derived(cls, name: str) -> PrecisionConfig:
        """Every kind from one format name: its activations and KV cache follow by rule.

        Notes
        -----
        Weight-only INT4 keeps BF16 activations and KV cache, the GGUF types FP16 ones (llama.cpp
        dequantizes into FP16 and keeps an f16 cache by default); FP4, FP6 and the FP8 family
        get an FP8 KV cache (per-tensor scaled, as engines store it); other formats keep
        their own (FP32 a BF16 cache).
        """
        fmt = number_format(name)
        if fmt.weight_only:  # INT4, GGUF: 16-bit activations and KV cache (llama.cpp's default f16 cache)
            return cls(fmt.name, fmt.compute, fmt.compute)
        kv = "fp8" if fmt.compute in ("fp4", "fp6", "fp8") else ("bf16" if fmt.name == "fp32" else fmt.name)
        return cls(fmt.name, fmt.name, kv)

    @classmethod
    def parse(cls, value: Any, *, checkpoint: PrecisionConfig | None = None) -> PrecisionConfig:
        """From a format name, ``kind:format`` text, a mapping or a PrecisionConfig.

        ``checkpoint`` is the base of the kinds left out when no format is named (the
        model's shipped formats; all BF16 when not given). None means that base whole.

        Raises
        ------
        SpecError
            On an unknown kind or a malformed value; :class:`UnknownNameError` with
            did-you-mean on an unknown format.
        """
        base = checkpoint or cls()
        if value is None:
            return base
        if isinstance(value, PrecisionConfig):
            return value
        if isinstance(value, str):
            return _parse_text(value, base)
        if isinstance(value, Mapping):
            unknown = sorted(str(k) for k in set(value) - set(KINDS))
            if unknown:
                raise SpecError(f"precision: unknown key(s) {unknown}; allowed: {', '.join(KINDS)}")
            return base.with_kinds({k: v for k, v in value.items() if v is not None})
        raise SpecError(f"precision must be a format name such as 'fp8', text such as 'fp8 kv:bf16' or a mapping "
                        f"of {', '.join(KINDS)}; got {value!r}")

    def with_kinds(self, kinds: Mapping[str, Any]) -> PrecisionConfig:
        """This configuration with the given kinds replaced, each only its own kind.

        Expert and attention weights that follow the weights here keep following them.
        """
        fields = {"weights": self.weights, "moe_weights": self.moe_weights, "attention_weights": self.attention_weights,
                  "activations": self.activations, "kv_cache": self.kv_cache, "state": self.state}
        for kind, fmt in kinds.items():
            if not isinstance(fmt, str):
                raise SpecError(f"precision: {kind} must be a format name, got {fmt!r}")
            fields[kind] = number_format(fmt).name
        return PrecisionConfig(**fields)

    def to_dict(self) -> dict[str, str]:
        """Every kind's format, expert weights resolved: ``{"weights": "bf16", "moe_weights": "mxfp4", ...}``
        (``attention_weights`` only where it differs from the weights, ``state`` where one is set)."""
        out = {"weights": self.weights, "moe_weights": self.experts, "activations": self.activations,
               "kv_cache": self.kv_cache}
        if self.attention_weights is not None:
            out["attention_weights"] = self.attention_weights
        if self.state is not None:
            out["state"] = self.state
        return out

    def __str__(self) -> str:
        """The weights' format, then each kind that differs from what that format implies
        (``"fp8 kv:bf16"``, ``"bf16 moe:mxfp4"``): text that parses back to this configuration
        whatever the model's checkpoint (a text of kinds alone, ``"w:fp8 a:bf16"``, takes the
        kinds it leaves out from the checkpoint: gpt-oss's experts stay MXFP4)."""
        base = replace(self, state=None)
        state = f" state:{self.state}" if self.state is not None else ""
        implied = PrecisionConfig.derived(self.weights).to_dict()
        kinds = [f"{_LABEL[k]}:{v}" for k, v in base.to_dict().items() if k != "weights" and implied.get(k) != v]
        return " ".join([self.weights, *kinds]) + state


_TOKEN = re.compile(r"[\s,]+")


def _parse_text(text: str, checkpoint: PrecisionConfig) -> PrecisionConfig:
    """``[NAME] [kind:format ...]``: NAME is a format or ``checkpoint`` (the default base)."""
    tokens = [t for t in _TOKEN.split(text.strip()) if t]
    if not tokens:
        raise SpecError(f"precision {text!r} is empty; give a format name such as 'fp8', kind:format text such as "
                        "'fp8 kv:bf16', or 'checkpoint' (the default) for the model's shipped formats")
    base, kinds = checkpoint, {}
    if ":" not in tokens[0]:
        name = tokens.pop(0)
        if name.lower() == CHECKPOINT:
            base = checkpoint
        elif name.lower() in FORMATS:
            base = PrecisionConfig.derived(name)
        else:
            raise UnknownNameError("precision", name, [CHECKPOINT, *FORMATS])
    for token in tokens:
        kind, _, fmt = token.partition(":")
        full = SHORT_NAMES.get(kind.lower(), kind.lower())
        if not fmt or full not in KINDS:
            raise SpecError(f"precision {text!r}: {token!r} is not kind:format; kinds: w (weights), moe (routed-expert "
                            "weights), attn (attention weights), a (activations), kv (KV cache), state (a hybrid "
                            "model's linear-attention state), e.g. 'fp8 kv:bf16'")
        if full in kinds:
            raise SpecError(f"precision {text!r}: {kind} is given twice ({full}:{kinds[full]} and {full}:{fmt}); "
                            "give each kind once")
        kinds[full] = fmt
    return base.with_kinds(kinds)


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


#: The other 16-bit float: a GPU without a BF16 tensor path (Turing, some phone NPUs) runs a
#: BF16 model as FP16 at that rate; a CPU listing BF16 only runs FP16 on its FP32 units.
_SIXTEEN_BIT_TWIN = {"bf16": "fp16", "fp16": "bf16"}


def tensor_flops_per_s(hw: HardwareSpec, precision: str) -> float:
    """Dense tensor throughput of ``hw`` at ``precision`` [FLOP/s].

    Notes
    -----
    A listed rate is used as it is; a 16-bit float the datasheet does not list takes the other
    16-bit float's rate (the RTX 2080 Ti has FP16 tensor cores and no BF16 path: 53.8 TFLOPS,
    not its INT8 rate halved). Another precision the datasheet does not list is derived from
    the closest narrower listed one by the ratio of widths: NVIDIA tensor cores from Hopper
    on double their rate with each halving of the operand width (H100 SXM dense: 989 TFLOPS
    BF16, 1979 FP8; B200: 2.25 / 4.5 / 9 PFLOPS BF16 / FP8 / FP4, NVIDIA datasheets), so a
    datasheet that states only FP4 gives FP8 at half and BF16 at a quarter of it. Where the spec
    names a sibling of its architecture (``tensor_rates_like``: Rubin CPX, Rubin), the sibling's
    published ratio replaces the widths' (Rubin lists BF16 at 4 of its 35 NVFP4 PFLOPS, not a
    quarter); :func:`derived_rate` says which rule gave a rate.
    """
    return derived_rate(hw, precision)[0]


def runs_natively(hw: HardwareSpec, precision: str) -> bool:
    """Whether ``hw`` has tensor cores for ``precision``: its spec lists the rate, or the sibling
    of its architecture it names (``tensor_rates_like``: Rubin CPX, whose datasheet lists NVFP4
    only, runs what Rubin's lists)."""
    if precision in hw.flops:
        return True
    if not hw.tensor_rates_like:
        return False
    from ..specs.catalog import load_hardware

    return precision in load_hardware(hw.tensor_rates_like).flops


def derived_rate(hw: HardwareSpec, precision: str) -> tuple[float, str | None]:
    """:func:`tensor_flops_per_s` of ``hw`` at ``precision`` [FLOP/s] and, where ``hw`` does not
    list it, how it was derived (words for ``explain()``; None for a listed rate, or a 16-bit
    float's twin's, or a storage format's compute precision's where that one is listed)."""
    fig = hw.flops.get(precision)  # type: ignore[call-overload]
    if fig is not None:
        return fig.si, None
    if precision not in _WIDTH and precision in FORMATS:  # a storage format: its tensor-core rate
        return derived_rate(hw, number_format(precision).compute)
    width = _WIDTH.get(precision, 16)
    twin = _SIXTEEN_BIT_TWIN.get(precision)
    if twin in hw.flops:  # BF16 without a BF16 path runs as FP16 (and FP16 as BF16): the same tensor rate
        # but a CPU's BF16 rate is its BF16 dot-product instructions (AVX512-BF16, AMX), which FP16
        # lacks on x86 before AMX-FP16: FP16 runs on its FP32 FMAs, half the BF16 pairs per cycle
        return hw.flops[twin].si * (0.5 if precision == "fp16" and hw.kind == "cpu" else 1.0), None  # type: ignore[index]
    narrower = sorted((p for p in hw.flops if _WIDTH.get(p, 99) < width), key=lambda p: -_WIDTH[p])
    if not narrower:
        raise SpecError(f"{hw.id} lists no tensor throughput for {precision} (it lists "
                        f"{', '.join(hw.supported_precisions)})")
    closest = narrower[0]
    listed = hw.flops[closest].si
    if hw.tensor_rates_like:
        from ..specs.catalog import load_hardware  # (a sibling's published ratio, not the widths')

        sib = load_hardware(hw.tensor_rates_like)
        own, base = sib.flops.get(precision) or sib.flops.get(twin), sib.flops.get(closest)  # type: ignore[call-overload,arg-type]
        if own is not None and base is not None:
            rate = listed * own.si / base.si
            return rate, (f"{hw.id} publishes no {precision} tensor rate: {rate / 1e15:.3g} PFLOPS, its {closest} "
                          f"{listed / 1e15:.3g} PFLOPS at {sib.id}'s published {precision}/{closest} ratio "
                          f"({own.si / 1e15:.3g}/{base.si / 1e15:.3g} PFLOPS)")
    rate = listed * _WIDTH[closest] / width
    return rate, (f"{hw.id} publishes no {precision} tensor rate: {rate / 1e15:.3g} PFLOPS, its {closest} "
                  f"{listed / 1e15:.3g} PFLOPS x {_WIDTH[closest]}/{width} (the rate doubling as the operand "
                  "width halves)")


def achievable_flops_per_s(hw: HardwareSpec, precision: str) -> float:
    """The fastest dense tensor throughput ``hw`` was measured to sustain at ``precision``
    (:attr:`~inferlab.specs.hardware.HardwareSpec.achievable_flops`) [FLOP/s]; ``inf`` where
    none is published (a storage format takes its compute precision's)."""
    fig = hw.achievable_flops.get(precision)  # type: ignore[call-overload]
    if fig is not None:
        return fig.si
    if precision not in _WIDTH and precision in FORMATS:
        return achievable_flops_per_s(hw, number_format(precision).compute)
    return math.inf


#: Weight-only INT4 formats (group 128 and group 32).
_INT4 = frozenset({"int4", "int4_g32"})


def matmul_precision(a: str, b: str, hw: HardwareSpec) -> str:
    """Tensor precision of a product of operands stored in formats ``a`` and ``b``."""
    ca, cb = number_format(a).compute, number_format(b).compute
    if a in _INT4 and cb == "fp8" and runs_natively(hw, "fp8"):  # a: the weights (a KV cache is b)
        return "fp8"  # INT4 weights widened to FP8 in the kernel (TensorRT-LLM's W4A8-AWQ), not to 16 bits
    if ca == cb:
        wanted = ca
    elif _WIDTH[ca] == _WIDTH[cb]:
        wanted = "bf16"  # FP8 x INT8 (or FP16 x BF16) has no common kernel: 16-bit
    else:
        wanted = ca if _WIDTH[ca] > _WIDTH[cb] else cb
    return supported_precision(wanted, hw)


def decode_attention_precision(attention: str, kv_cache: str, hw: HardwareSpec) -> str:
    """Tensor precision decode attention computes at, for attention at ``attention``.

    A decode kernel takes its math from the KV cache it reads: over an FP8 cache it quantizes
    the one-token query and multiplies in FP8 where the GPU has FP8 tensor cores (vLLM's
    FlashAttention 3 FP8 path, TensorRT-LLM's XQA), whatever format the linear layers compute
    in, so NVFP4 or INT4 weights with 16-bit activations leave decode attention as FP8
    weights do. Prefill attention keeps ``attention`` (FP8 context attention needs FP8
    activations too).
    """
    if number_format(kv_cache).compute == "fp8" and runs_natively(hw, "fp8"):
        return "fp8"
    return attention


def gemm_kernel(weights: str, gemm_precision: str) -> str:
    """Kernel family of GEMMs on weights in format ``weights``, the key of their efficiency curve.

    Weight-only formats (weights narrower than the compute) are ``<weights>_wo``; INT8
    weights and activations are SmoothQuant-style ``int8_sq``; otherwise the weight format
    (``fp8``, ``fp8_block``, ``nvfp4``, ``bf16``...).
    """
    fmt = number_format(weights)
    if fmt.compute != gemm_precision and _WIDTH.get(fmt.compute, 16) < _WIDTH[gemm_precision]:
        return f"{fmt.name}_wo"
    if fmt.name in _INT4:  # one kernel family (Marlin, Machete) whatever the group; over FP8 math, W4A8's
        return "w4a8" if gemm_precision == "fp8" else "int4_wo"
    if fmt.name == "int8":
        return "int8_sq"
    return fmt.name
