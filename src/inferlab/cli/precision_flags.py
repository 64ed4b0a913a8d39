"""Precision flags shared by every command that takes a precision: one per tensor kind.

``--precision`` sets every kind from one format; ``--weights``, ``--moe-weights``,
``--activations``, ``--kv-cache-dtype`` (vLLM's name) and ``--state-dtype`` each replace only their kind, over
``--precision`` or, without it, over the model's shipped checkpoint formats.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from typing import Any

from ..precision import number_format

PRECISION_HELP = ("formats of every tensor kind from one name: fp8 = FP8 weights, activations and KV cache; int4 "
                  "weight-only (BF16 activations and KV); nvfp4/mxfp4 = FP4 weights and activations (BF16 "
                  "activations on GPUs without FP4 tensor cores) with an FP8 KV cache; also bf16, fp16, fp8_block, "
                  "int8, mxfp8. Default 'checkpoint': the model's shipped formats (gpt-oss: MXFP4 experts, BF16 "
                  "elsewhere; DeepSeek-V3: block-scaled FP8)")

#: flag -> (tensor kind, help).
KIND_FLAGS: dict[str, tuple[str, str]] = {
    "--weights": ("weights", "format of the linear-layer weights (routed experts follow unless --moe-weights or "
                             "the checkpoint sets them apart)"),
    "--moe-weights": ("moe_weights", "format of the routed experts' weights (MoE models)"),
    "--attention-weights": ("attention_weights", "format of the attention projections' weights (Q, K, V, O; NVIDIA's "
                                                 "NVFP4 DeepSeek-R1 checkpoint keeps them BF16)"),
    "--activations": ("activations", "format the GEMM inputs are quantized to (bf16: weight-only kernels)"),
    "--kv-cache-dtype": ("kv_cache", "KV-cache format (vLLM's flag): bf16, fp8, ...; auto: as --precision or the "
                                     "checkpoint"),
    "--state-dtype": ("state", "a hybrid model's linear-attention (SSM) state format: fp32, bf16 or fp16 (SGLang "
                               "--mamba-ssm-dtype, vLLM --mamba-ssm-cache-dtype); auto: the config's, else the "
                               "engine's (SGLang fp32, vLLM bf16)"),
}
#: vLLM's spellings of the FP8 KV cache, and the engines' of the state formats.
_ALIASES = {"fp8_e4m3": "fp8", "fp8_e5m2": "fp8", "float32": "fp32", "bfloat16": "bf16", "float16": "fp16"}


def add_precision_flags(parser: argparse.ArgumentParser) -> None:
    """Add ``--precision`` and the per-kind flags (all default None: not given)."""
    parser.add_argument("--precision", default=None, help=PRECISION_HELP)
    for flag, (kind, text) in KIND_FLAGS.items():
        parser.add_argument(flag, dest=f"precision_{kind}", metavar="FORMAT", default=None, help=text)


def kind_overrides(args: argparse.Namespace) -> dict[str, str]:
    """The per-kind flags given, as ``{kind: format}`` (``auto`` leaves a kind alone).

    Raises
    ------
    UnknownNameError
        With did-you-mean, for a format name that is not known.
    """
    out = {}
    for _, (kind, _) in KIND_FLAGS.items():
        value = getattr(args, f"precision_{kind}", None)
        if value is None or value.lower() == "auto":
            continue
        out[kind] = number_format(_ALIASES.get(value.lower(), value)).name
    return out


def precision_value(base: Any, overrides: Mapping[str, str]) -> Any:
    """``base`` (None, a name or text, or a mapping) with the per-kind ``overrides`` applied."""
    if not overrides:
        return base
    if isinstance(base, Mapping):
        return {**base, **overrides}
    tokens = " ".join(f"{kind}:{fmt}" for kind, fmt in overrides.items())
    if base is None:
        return tokens
    from ..core.quantization import SHORT_NAMES

    def overridden(token: str) -> bool:  # a kind:format of the text that a kind flag replaces
        kind, sep, _ = token.partition(":")
        return bool(sep) and SHORT_NAMES.get(kind.lower(), kind.lower()) in overrides
    kept = [t for t in str(base).replace(",", " ").split() if not overridden(t)]
    return " ".join([*kept, tokens])


def precision_spelling(args: argparse.Namespace) -> dict[str, str]:
    """``args.flag_names`` with the precision named as the one per-kind flag given when
    ``--precision`` is not (a contradiction of ``--kv-cache-dtype bf16`` names that flag)."""
    names = dict(getattr(args, "flag_names", {}))
    if getattr(args, "precision", None) is None:
        given = [flag for flag, (kind, _) in KIND_FLAGS.items() if getattr(args, f"precision_{kind}", None) is not None]
        if len(given) == 1:
            names["precision"] = given[0]
    return names
