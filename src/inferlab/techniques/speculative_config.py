"""Speculative decoding, configured: method, draft length, acceptance, presets with sources.

The physics (what a speculative step costs) is in :mod:`inferlab.techniques.speculative`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

import numpy as np

from ..core.ops import ArrayLike
from ..checks import from_fields
from ..errors import SpecError, did_you_mean
from ..specs.model import ModelSpec

Method = Literal["draft", "eagle", "medusa", "mtp", "ngram"]
METHODS: tuple[str, ...] = ("draft", "eagle", "medusa", "mtp", "ngram")
#: Longest draft accepted [token]. Published drafters propose at most 7-8 tokens per step
#: (EAGLE-3 and DeepSeek-V3 MTP at K=7, Medusa's 5 heads); past that each added token
#: survives with probability ``a^k``, so longer drafts only add draft work.
MAX_DRAFT_TOKENS = 16
_EXAMPLE = "e.g. 'eagle:k=4,accept=0.7', 'mtp:k=1,length=1.85' or 'draft:model=llama-3.1-8b,k=4,accept=0.6'"


def tokens_per_step(acceptance: ArrayLike, k: int) -> ArrayLike:
    """Mean tokens emitted by one speculative step [token].

    Notes
    -----
    ``sum_{i=0}^{k} a^i = (1 - a^(k+1)) / (1 - a)``: draft ``i`` survives with probability
    ``a^i`` and the target always adds one token of its own; ``1`` at ``a = 0``, ``k + 1``
    at ``a = 1``. The sum form needs no limit at ``a = 1``.
    """
    a = np.asarray(acceptance, float)
    return sum(a**i for i in range(k + 1))


def acceptance_from_length(length: float, k: int) -> float:
    """Per-token acceptance ``a`` whose :func:`tokens_per_step` is ``length`` [1].

    ``k = 1`` has the closed form ``a = length - 1``; longer drafts solve the monotone
    polynomial by Brent's method on ``[0, 1]``.
    """
    if length <= 1.0:
        return 0.0
    if length >= k + 1.0:
        return 1.0
    if k == 1:
        return float(length - 1.0)
    from scipy.optimize import brentq  # scipy costs a fifth of a second to import; only this path needs it

    return float(brentq(lambda a: float(tokens_per_step(a, k)) - length, 0.0, 1.0, xtol=1e-14))


@dataclass(frozen=True)
class SpeculativeConfig:
    """How a deployment speculates: the drafter, the draft length and the measured acceptance.

    Exactly one of ``acceptance`` and ``acceptance_length`` is given; there is no default,
    because acceptance depends on the model pair, the task and the temperature. Take a
    measured value or a :meth:`preset` that carries its source.

    Parameters
    ----------
    method : {"draft", "eagle", "medusa", "mtp", "ngram"}
    k : int
        Draft tokens proposed per step [token], 1 to :data:`MAX_DRAFT_TOKENS`.
    acceptance : float, optional
        Per-token acceptance rate ``a`` in ``[0, 1)``.
    acceptance_length : float, optional
        Mean tokens emitted per target step, the verified token included, in ``[1, k + 1]``.
    draft_model : str or ModelSpec, optional
        Catalog id, config.json path or spec of the draft model; method ``draft`` only.
    draft_vocab_size : int, optional
        Width of the drafter's LM head for ``eagle``, ``mtp`` and ``medusa`` [token]; None:
        the target's vocabulary. EAGLE-3 heads predict over a reduced vocabulary (32000 for
        Llama 3.1 8B) and map back to the target's ids.
    host_s : float
        Host work per speculative step [s] (n-gram lookup, draft bookkeeping); 0 by
        default: prompt lookup is a hash probe per sequence, microseconds, and engines
        overlap it with the GPU.
    source : str
        Where the acceptance figure comes from.
    target : str, optional
        Catalog id of the model the acceptance was measured with (a preset's); speculation on
        another model is refused, since its drafter and acceptance are another pair's.
    """

    method: Method
    k: int
    acceptance: float | None = None
    acceptance_length: float | None = None
    draft_model: str | ModelSpec | None = None
    draft_vocab_size: int | None = None
    host_s: float = 0.0
    source: str = "stated by the user"
    target: str | None = None

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise SpecError(f"unknown speculative method {self.method!r}{_did_you_mean(self.method, METHODS)}; "
                            f"allowed: {', '.join(METHODS)}")
        if isinstance(self.k, bool) or not isinstance(self.k, (int, np.integer)) or self.k < 1:
            raise SpecError(f"draft length k must be an integer >= 1, got {self.k!r}")
        if self.k > MAX_DRAFT_TOKENS:
            raise SpecError(f"draft length k={self.k} is beyond {MAX_DRAFT_TOKENS}: published drafters propose at most "
                            f"7-8 tokens per step (EAGLE-3 and MTP at K=7, Medusa's 5 heads), and a draft token at "
                            f"position i survives with probability a^i, so longer drafts only add work; use "
                            f"k in 1..{MAX_DRAFT_TOKENS}")
        for name in ("acceptance", "acceptance_length", "host_s"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float, np.number))):
                raise SpecError(f"{name} must be a number, got {value!r}")
        if (self.acceptance is None) == (self.acceptance_length is None):
            raise SpecError("give exactly one of acceptance (per-token rate a in [0, 1)) or acceptance_length "
                            f"(mean tokens per target step in [1, k+1]); there is no default. Presets with sources: "
                            f"{', '.join(PRESETS)}")
        if self.acceptance is not None and not 0.0 <= float(self.acceptance) < 1.0:
            raise SpecError(f"acceptance must be in [0, 1), got {self.acceptance!r} (a rate, not a percentage; "
                            f"use acceptance_length={self.k + 1} for every draft accepted)")
        if self.acceptance_length is not None and not 1.0 <= float(self.acceptance_length) <= self.k + 1:
            raise SpecError(f"acceptance_length must be in [1, k+1] = [1, {self.k + 1}] for k={self.k}, "
                            f"got {self.acceptance_length!r}")
        if (self.method == "draft") != (self.draft_model is not None):
            raise SpecError("method 'draft' needs draft_model (a catalog id, config.json path or ModelSpec)"
                            if self.method == "draft" else
                            f"draft_model is used only by method 'draft', not {self.method!r}")
        if self.draft_vocab_size is not None and (
                isinstance(self.draft_vocab_size, bool) or not isinstance(self.draft_vocab_size, (int, np.integer))
                or self.draft_vocab_size < 1 or self.method in ("draft", "ngram")):
            raise SpecError(f"draft_vocab_size must be an integer >= 1 and applies to methods eagle, mtp and medusa; "
                            f"got {self.draft_vocab_size!r} for method {self.method!r}")
        if not np.isfinite(self.host_s) or self.host_s < 0:
            raise SpecError(f"host_s must be a finite time >= 0 [s], got {self.host_s!r}")

    @property
    def acceptance_rate(self) -> float:
        """Per-token acceptance ``a`` (solved from ``acceptance_length`` when that was given)."""
        if self.acceptance is not None:
            return float(self.acceptance)
        return acceptance_from_length(float(self.acceptance_length), int(self.k))  # type: ignore[arg-type]

    @property
    def tokens_per_step(self) -> float:
        """Mean tokens one speculative step emits [token]."""
        if self.acceptance_length is not None:
            return float(self.acceptance_length)
        return float(tokens_per_step(self.acceptance_rate, int(self.k)))

    def __str__(self) -> str:
        parts = [f"k={self.k}"]
        if self.draft_model is not None:
            model = self.draft_model
            parts.insert(0, f"model={model if isinstance(model, str) else (model.id or model.name)}")
        given = self.acceptance_length if self.acceptance is None else self.acceptance
        parts.append(f"{'length' if self.acceptance is None else 'accept'}={given:g}")
        if self.draft_vocab_size is not None:
            parts.append(f"vocab={self.draft_vocab_size}")
        if self.host_s:
            parts.append(f"host_us={self.host_s * 1e6:g}")
        return f"{self.method}:{','.join(parts)}"

    @classmethod
    def of(cls, value: object) -> SpeculativeConfig:
        """From itself, its text (``"eagle:k=4,accept=0.7"``), a preset name or a mapping of
        its fields (``{"method": "mtp", "k": 3, "acceptance_length": 2.4}``).

        >>> SpeculativeConfig.of({"method": "eagle", "k": 4, "acceptance": 0.5}).tokens_per_step
        1.9375
        """
        if isinstance(value, cls):
            return value
        if isinstance(value, str):
            return cls.parse(value)
        if isinstance(value, Mapping):
            return from_fields(cls, value, "speculative", required=("method", "k"))
        raise SpecError(f"speculative must be a text like 'eagle:k=4,accept=0.7', a preset name, a mapping of its "
                        f"fields or a SpeculativeConfig, got {value!r:.60}")

    @classmethod
    def preset(cls, name: str) -> SpeculativeConfig:
        """A documented configuration with its published acceptance and source (see :data:`PRESETS`)."""
        if name not in PRESETS:
            raise SpecError(f"unknown speculative preset {name!r}{_did_you_mean(name, PRESETS)}; "
                            f"allowed: {', '.join(PRESETS)}")
        return cls(**PRESETS[name])

    @classmethod
    def parse(cls, text: str) -> SpeculativeConfig:
        """Parse ``method:key=value,...`` or a preset name. Keys: ``k``, ``accept``, ``length``,
        ``model`` (method draft), ``vocab`` (draft vocabulary), ``host_us`` [us].

        >>> spec = SpeculativeConfig.parse("eagle:k=4,accept=0.5")
        >>> spec.tokens_per_step  # 1 + 0.5 + 0.25 + 0.125 + 0.0625
        1.9375
        """
        text = str(text).strip()
        if text in PRESETS:
            return cls.preset(text)
        values = cls.fields(text)
        try:
            return cls(**values)  # type: ignore[arg-type]
        except SpecError as err:
            raise SpecError(f"in speculative spec {text!r}: {err}") from None

    @staticmethod
    def fields(text: str) -> dict[str, object]:
        """The fields ``method:key=value,...`` names (``method`` and ``k`` at least), checked one by
        one but not yet as a whole: a benchmark run's recorded acceptance may complete them.

        >>> SpeculativeConfig.fields("mtp:k=3")
        {'method': 'mtp', 'k': 3}
        """
        text = str(text).strip()
        where = f"in speculative spec {text!r}"
        method, _, rest = text.partition(":")
        method = method.strip().lower()
        if method not in METHODS:
            raise SpecError(f"{where}: unknown method {method!r}{_did_you_mean(method, (*METHODS, *PRESETS))}; "
                            f"allowed: {', '.join(METHODS)} or a preset ({', '.join(PRESETS)}); {_EXAMPLE}")
        values: dict[str, object] = {}
        for item in filter(None, (s.strip() for s in rest.split(","))):
            key, eq, raw = (s.strip() for s in item.partition("="))
            if not eq or not raw:
                raise SpecError(f"{where}: {item!r} is not key=value; {_EXAMPLE}")
            if key.lower() not in _KEYS:
                raise SpecError(f"{where}: unknown key {key!r}{_did_you_mean(key.lower(), _KEYS)}; "
                                f"allowed: {', '.join(_KEYS)}")
            name, convert, what = _KEYS[key.lower()]
            if name in values:
                raise SpecError(f"{where}: {key!r} given twice")
            try:
                values[name] = convert(raw)
            except ValueError:
                raise SpecError(f"{where}: {key}={raw!r} is not {what}") from None
        if "k" not in values:
            raise SpecError(f"{where}: the draft length k is missing; {_EXAMPLE}")
        return {"method": method, **values}


def _microseconds(raw: str) -> float:
    return float(raw) * 1e-6


#: CLI key -> (field, conversion, what the value must be)
_KEYS: dict[str, tuple[str, Callable[[str], object], str]] = {
    "k": ("k", int, "an integer"),
    "accept": ("acceptance", float, "a number"), "acceptance": ("acceptance", float, "a number"),
    "length": ("acceptance_length", float, "a number"), "acceptance_length": ("acceptance_length", float, "a number"),
    "model": ("draft_model", str, "a model name"), "draft_model": ("draft_model", str, "a model name"),
    "vocab": ("draft_vocab_size", int, "an integer"), "draft_vocab_size": ("draft_vocab_size", int, "an integer"),
    "host_us": ("host_s", _microseconds, "a time in microseconds"),
}


def _did_you_mean(name: str, allowed: Iterable[str]) -> str:
    return did_you_mean(name, allowed, n=2)


#: Published acceptance figures, each with the page and number it comes from.
PRESETS: dict[str, dict] = {
    "mtp-deepseek-v3": dict(
        method="mtp", k=1, acceptance=0.85, target="deepseek-v3",
        source="DeepSeek-AI, DeepSeek-V3 Technical Report, arXiv:2412.19437, sec. 5.4.3: second-token acceptance "
               "85-90% across generation topics (lower end taken), 1.8x tokens/s"),
    "mtp-deepseek-v3-k7": dict(
        method="mtp", k=7, acceptance_length=3.20, target="deepseek-v3",
        source="nebius/MTP-DeepSeek-V3-0324 model card, Hugging Face: the original DeepSeek-V3 MTP module reused "
               "autoregressively, K=7, mean acceptance length 3.20 at temperature 0 (MT-bench, HumanEval, GSM8K)"),
    "eagle3-llama-3.1-8b": dict(
        method="eagle", k=7, acceptance_length=2.77, draft_vocab_size=32000, target="llama-3.1-8b",
        source="nebius/EAGLE3-Llama-3.3-70B-Instruct model card, Hugging Face, comparison table: "
               "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B, chain drafting K=7, temperature 1, MT-bench 2.77 "
               "(HumanEval 3.49, GSM8K 3.34); draft_vocab_size 32000 from that checkpoint's config.json"),
    "eagle3-llama-3.3-70b": dict(
        method="eagle", k=7, acceptance_length=2.88, target="llama-3.3-70b",
        source="nebius/EAGLE3-Llama-3.3-70B-Instruct model card, Hugging Face, comparison table: "
               "RedHatAI/Llama-3.3-70B-Instruct-speculator.eagle3, K=7, temperature 1, MT-bench 2.88 "
               "(HumanEval 3.62, GSM8K 3.29)"),
}
for _name, _preset in PRESETS.items():
    _preset["source"] = f"preset {_name}: {_preset['source']}"
