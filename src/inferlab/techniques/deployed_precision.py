"""The formats a deployment runs: what the user asked, else the model's shipped checkpoint, on this GPU.

``precision=None`` (the default of every entry point) means the checkpoint's formats
per tensor kind (:attr:`inferlab.specs.model.ModelSpec.checkpoint`): gpt-oss runs its
MXFP4 experts with BF16 attention, DeepSeek-V3 its block-scaled FP8 weights, a model
without a quantization config BF16. A mapping or ``kind:format`` text sets the kinds it
names over that base (see :mod:`inferlab.core.quantization`).

Then the GPU: activations in a format narrower than 16 bits that it has no tensor rate
for (FP4 on an H100 or A100, FP8 on an A100) are kept in BF16, with a note: the GEMMs
dequantize the stored weights to BF16 (the ``<format>_wo`` weight-only kernels), as
engines run MXFP4 or FP8 checkpoints on GPUs without those tensor cores. The weights
keep their stored format, so their bytes are unchanged.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from ..core.quantization import SHORT_NAMES, PrecisionConfig, runs_natively
from ..errors import SpecError
from ..precision import FORMATS, number_format
from ..specs.hardware import HardwareSpec
from ..specs.model import ModelSpec

#: Where each narrow compute precision runs natively, for the note.
_NATIVE = {"fp4": "FP4 tensor cores (Blackwell: b200, b300, gb200)", "fp6": "FP6 tensor cores (Blackwell)",
           "fp8": "FP8 tensor cores (Ada, Hopper, Blackwell)"}
#: The kinds a checkpoint sets (attention weights follow the weights unless the user sets them).
_KIND_NAMES = {"weights": "weights", "moe_weights": "routed experts", "activations": "activations",
               "kv_cache": "KV cache"}


@dataclass(frozen=True)
class ResolvedPrecision:
    """The formats a deployment runs and how they were chosen.

    Attributes
    ----------
    config : PrecisionConfig
        Storage format of each tensor kind.
    notes : tuple of str
        Where the formats came from (the checkpoint's defaults) and what the GPU changed.
    """

    config: PrecisionConfig
    notes: tuple[str, ...] = ()


def checkpoint_precision(model: ModelSpec) -> PrecisionConfig:
    """The shipped checkpoint's formats as a :class:`PrecisionConfig` (all BF16 without one)."""
    ck = model.checkpoint
    if ck is None:
        return PrecisionConfig()
    return PrecisionConfig(weights=ck.weights, activations=ck.activations, kv_cache=ck.kv_cache or "bf16",
                           moe_weights=ck.moe_weights if model.is_moe else None)


def _kinds_from_checkpoint(value: Any) -> tuple[str, ...]:
    """The kinds ``value`` leaves to the checkpoint (all of them for None or ``"checkpoint"``)."""
    if value is None:
        return tuple(_KIND_NAMES)
    if isinstance(value, Mapping):
        return tuple(k for k in _KIND_NAMES if value.get(k) is None)
    if isinstance(value, str):
        tokens = value.replace(",", " ").split()
        if tokens and ":" not in tokens[0] and tokens[0].lower() in FORMATS:
            return ()
        named = {t.split(":")[0].lower() for t in tokens if ":" in t}
        short = {full: name for name, full in SHORT_NAMES.items()}
        return tuple(k for k in _KIND_NAMES if k not in named and short[k] not in named)
    return ()


def _describe(cfg: PrecisionConfig, kinds: tuple[str, ...], moe: bool) -> str:
    values = cfg.to_dict()
    return ", ".join(f"{_KIND_NAMES[k]} {values[k]}" for k in kinds if moe or k != "moe_weights")


def native_activations(cfg: PrecisionConfig, hw: HardwareSpec) -> tuple[PrecisionConfig, tuple[str, ...]]:
    """``cfg`` with activations the GPU cannot compute in kept in BF16, and the note saying so."""
    fmt = number_format(cfg.activations)
    if fmt.bits_per_element >= 16 or runs_natively(hw, fmt.compute):
        return cfg, ()
    half = "fp16" if "bf16" not in hw.flops and "fp16" in hw.flops else "bf16"  # (Turing: FP16, no BF16)
    note = (f"activations {half}, not {fmt.name}: {hw.id} has no {fmt.compute} tensor rate, so the GEMMs dequantize "
            f"the stored weights to {half.upper()} (weight-only kernels); {fmt.compute} activations need "
            f"{_NATIVE.get(fmt.compute, 'a GPU with ' + fmt.compute + ' tensor cores')}")
    return replace(cfg, activations=half), (note,)


def half_for_bf16(cfg: PrecisionConfig, kinds: tuple[str, ...],
                  hw: HardwareSpec) -> tuple[PrecisionConfig, tuple[str, ...]]:
    """``cfg`` with its BF16 kinds in FP16 where the GPU computes FP16 and not BF16 (Turing, a
    phone's NPU), and the notes saying so: engines load a BF16 checkpoint as FP16 there (vLLM's
    ``dtype="auto"`` casts it, "Bfloat16 is only supported on GPUs with compute capability of at
    least 8.0"; llama.cpp keeps F16), the ``kinds`` taken from it; a BF16 the user gave is modelled
    as FP16 too, with its own note (vLLM refuses it there). Same bytes, so only the label and the
    kernels' format move."""
    if "bf16" in hw.flops or "fp16" not in hw.flops:
        return cfg, ()
    values = {"weights": cfg.weights, "activations": cfg.activations, "kv_cache": cfg.kv_cache,
              "moe_weights": cfg.moe_weights}
    cast = [k for k in kinds if values.get(k) == "bf16"]
    given = [k for k in values if k not in kinds and values[k] == "bf16"]
    notes = []
    if cast:
        notes.append(f"{', '.join(_KIND_NAMES[k] for k in cast)} fp16, not the checkpoint's bf16: {hw.id} computes "
                     "FP16 and not BF16, so engines load the checkpoint as FP16 (same bytes)")
    if given:
        notes.append(f"{', '.join(_KIND_NAMES[k] for k in given)} fp16, not the bf16 given: {hw.id} computes FP16 and "
                     "not BF16 (vLLM refuses dtype bfloat16 below compute capability 8.0 and asks for float16), so "
                     "they are modelled as FP16, the same bytes")
    return replace(cfg, **{k: "fp16" for k in cast + given}), tuple(notes)


def _check_activations(cfg: PrecisionConfig, model: ModelSpec) -> None:
    """Refuse activations narrower than every weight format the model's GEMMs read: no kernel
    multiplies 16-bit weights by 8-bit activations (FP8 and INT8 GEMMs take both operands in
    8 bits; weight-only kernels widen the weights to the activations, W4A8 included), so the
    GEMMs would run at the weights' format while the label said the activations' (BF16 weights
    with FP8 activations had been priced as BF16 and labelled a:fp8)."""
    weights = {cfg.weights, cfg.experts if model.is_moe else cfg.weights, cfg.attention_weights or cfg.weights}
    bits = lambda name: math.floor(number_format(name).bits_per_element)  # noqa: E731 - the element, not its scales
    act = bits(cfg.activations)
    if all(bits(w) > act for w in weights):
        named = " / ".join(sorted(weights))
        raise SpecError(f"precision: activations {cfg.activations} (--activations, a:{cfg.activations}) are narrower "
                        f"than the weights ({named}): no GEMM kernel multiplies {named} weights by "
                        f"{cfg.activations} activations; quantize the weights too (--precision {cfg.activations}, "
                        f"--weights) or leave the activations at the weights' format")


def resolve_precision(value: Any, model: ModelSpec, hw: HardwareSpec) -> ResolvedPrecision:
    """The formats ``model`` runs on ``hw`` for the user's ``precision`` value.

    Parameters
    ----------
    value : None, str, mapping or PrecisionConfig
        None or ``"checkpoint"``: the shipped checkpoint's formats; a format name (every
        kind derived from it); ``kind:format`` text or a mapping (the kinds it names over
        the checkpoint's, or over a named format's: ``"fp8 kv:bf16"``).
    model, hw : ModelSpec, HardwareSpec
        The model (its checkpoint formats) and the GPU (its tensor rates).

    Returns
    -------
    ResolvedPrecision
        The formats, and notes for ``explain()``.
    """
    checkpoint = checkpoint_precision(model)
    cfg = PrecisionConfig.parse(value, checkpoint=checkpoint)
    if not model.is_moe and cfg.moe_weights is not None:
        raise SpecError(f"precision: moe_weights {cfg.moe_weights} (--moe-weights, moe:{cfg.moe_weights}) sets the "
                        f"routed experts' format, but {model.id or model.name} is dense: it has no experts; drop it, "
                        "or set weights (--weights) for its linear layers")
    if model.linear_attention is None and cfg.state is not None:
        raise SpecError(f"precision: state {cfg.state} (state:{cfg.state}) sets a linear-attention state's format, but "
                        f"{model.id or model.name} keeps none (hybrid models such as qwen3-next-80b-a3b do); drop it")
    _check_activations(cfg, model)
    notes: list[str] = []
    inherited = _kinds_from_checkpoint(value) if not isinstance(value, PrecisionConfig) else ()
    if inherited:
        source = model.checkpoint.source if model.checkpoint is not None else "no quantization config: 16-bit weights"
        whole = len(inherited) == len(_KIND_NAMES)
        notes.append(f"{'formats' if whole else 'kinds not given'} ({_describe(cfg, inherited, model.is_moe)}): "
                     f"the shipped checkpoint's defaults ({source})"
                     + ("; precision= (--precision, --weights, --kv-cache-dtype...) chooses others" if whole else ""))
    cfg, half_notes = half_for_bf16(cfg, inherited, hw)
    cfg, hw_notes = native_activations(cfg, hw)
    return ResolvedPrecision(cfg, tuple(notes) + half_notes + hw_notes)

