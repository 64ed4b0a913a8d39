"""Precision texts as engine launches and their messages read and write them: the formats a
text sets by tensor kind (``"fp8 kv:bf16"``), and those kinds written short again."""

from __future__ import annotations

from typing import Any


def short_text(kinds: dict[str, str]) -> str:
    """Formats by tensor kind as a precision text abbreviates them (``kv:fp8 w:fp8``)."""
    from ..core.quantization import SHORT_NAMES

    label = {full: short for short, full in SHORT_NAMES.items()}
    return " ".join(f"{label.get(k, k)}:{v}" for k, v in kinds.items())


def precision_text_kinds(text: Any) -> dict[str, str]:
    """The kinds a precision text sets over the checkpoint (``"fp8"`` sets all three)."""
    from ..core.quantization import SHORT_NAMES, PrecisionConfig
    from ..precision import number_format

    tokens = str(text).split()
    out: dict[str, str] = {}
    if tokens and ":" not in tokens[0] and tokens[0].lower() != "checkpoint":
        out = {k: v for k, v in PrecisionConfig.derived(tokens[0]).to_dict().items() if k != "moe_weights"}
    for token in tokens[1:] if tokens and ":" not in tokens[0] else tokens:
        kind, _, fmt = token.partition(":")
        out[SHORT_NAMES.get(kind, kind)] = number_format(fmt).name
    return out


def precision_kinds(text: Any) -> dict[str, str]:
    """Public form of the kinds a precision text sets explicitly (None or ``checkpoint``: none)."""
    return {} if text is None else precision_text_kinds(text)
