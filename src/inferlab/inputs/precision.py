"""The formats a deployment asks for, per tensor kind, before the model and GPU resolve them.

Every way of writing a precision (a format name, ``kind:format`` text, a mapping, a
:class:`~inferlab.techniques.quantization.PrecisionConfig`) becomes the kinds it sets:
``"fp8 kv:bf16"`` sets every kind (FP8 derived from the name, the KV cache then BF16),
``"kv:fp8"`` only the KV cache, leaving the others to the model's shipped checkpoint.
Passed back to :func:`inferlab.estimate` as that mapping, it resolves to the same formats
and the same notes as the text (:func:`~inferlab.techniques.deployed_precision.resolve_precision`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel

from ..core.quantization import CHECKPOINT, KINDS, SHORT_NAMES, PrecisionConfig
from ..errors import SpecError
from ..precision import FORMATS, number_format
from ..specs.hardware import HardwareSpec
from ..specs.model import ModelSpec
from ..techniques.deployed_precision import resolve_precision
from .techniques import FROZEN



class Precision(BaseModel):
    """Storage format per tensor kind; a kind left None is the checkpoint's.

    Parameters
    ----------
    weights : str, optional
        Linear-layer weights.
    moe_weights : str, optional
        Routed experts' weights.
    attention_weights : str, optional
        Attention projections' weights (Q, K, V, O; MLA's low-rank ones).
    activations : str, optional
        GEMM inputs.
    kv_cache : str, optional
        KV cache.
    state : str, optional
        A hybrid model's linear-attention state (fp32, bf16, fp16).
    """

    model_config = FROZEN
    weights: str | None = None
    moe_weights: str | None = None
    attention_weights: str | None = None
    activations: str | None = None
    kv_cache: str | None = None
    state: str | None = None

    @classmethod
    def of(cls, value: Any, model: ModelSpec | None = None, hw: HardwareSpec | None = None) -> Precision | None:
        """The kinds ``value`` sets (None when it sets none: the checkpoint's formats).

        With ``model`` and ``hw`` the value is also resolved, so that what they cannot
        take (expert formats on a dense model) is refused here.
        """
        if isinstance(value, Precision):
            kinds = value.to_dict()
        else:
            kinds = precision_kinds(value)
        if model is not None and hw is not None:
            resolve_precision(kinds or None, model, hw)
        return cls(**kinds) if kinds else None

    def to_dict(self) -> dict[str, str]:
        """The kinds set, ``{kind: format}``."""
        return {k: v for k, v in self.model_dump().items() if v is not None}

    def value(self) -> dict[str, str]:
        """The ``precision=`` argument of :func:`inferlab.estimate` and :func:`inferlab.serve`."""
        return self.to_dict()


def precision_kinds(value: Any) -> dict[str, str]:
    """``{kind: format}`` of every kind ``value`` sets, format names canonical.

    Raises
    ------
    SpecError
        A malformed value; :class:`~inferlab.errors.UnknownNameError` (with did-you-mean)
        for an unknown format.
    """
    if value is None:
        return {}
    if isinstance(value, PrecisionConfig):
        return value.to_dict()
    PrecisionConfig.parse(value)  # the parser's own messages for anything malformed
    if isinstance(value, Mapping):
        return {str(k): number_format(v).name for k, v in value.items() if v is not None}
    tokens = [t for t in re.split(r"[\s,]+", value.strip()) if t]
    kinds: dict[str, str] = {}
    if ":" not in tokens[0]:
        name = tokens.pop(0)
        if name.lower() != CHECKPOINT and name.lower() in FORMATS:
            kinds = PrecisionConfig.derived(name).to_dict()
    for token in tokens:
        kind, _, fmt = token.partition(":")
        kinds[SHORT_NAMES.get(kind.lower(), kind.lower())] = number_format(fmt).name
    unknown = set(kinds) - set(KINDS)
    if unknown:  # the parser refuses these first; kept as a guard
        raise SpecError(f"precision {value!r}: unknown kind(s) {sorted(unknown)}")
    return kinds
