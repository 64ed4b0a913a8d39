"""Speculative decoding: a cheap drafter proposes ``k`` tokens, the target verifies them in one step.

This technique wraps the step model; the core never learns it exists. One speculative
step is the drafter's passes plus one target forward over ``k + 1`` tokens per sequence
(the last verified token and the ``k`` drafts), timed by the core as a decode step with
``new_tokens = k + 1``. The drafter is, by ``method``:

- ``draft``: a smaller model of the same tokenizer, ``k`` sequential decode steps;
- ``eagle``: a feature-level head, one decoder layer of the target plus the LM head, ``k`` times;
- ``mtp``: the model's own multi-token-prediction module (DeepSeek-V3), ``k`` times;
- ``medusa``: ``k`` heads (a residual block and an LM head each) in one pass;
- ``ngram``: prompt lookup on the host, no GPU work.

Speculation never changes quality: every emitted token is verified by the target with
rejection sampling, so the output has the target's own distribution [1]_. It only moves
time: fewer target steps per token, each a little larger, plus the drafter's passes.

Glossary: ``a`` acceptance (probability that one draft token is accepted, given that the
ones before it were), ``k`` draft length, ``tokens_per_step`` the mean tokens one
speculative step emits (the verified token included).

References
----------
.. [1] Leviathan, Kalman, Matias, "Fast Inference from Transformers via Speculative
   Decoding", ICML 2023, Theorem 3.5 (output distribution unchanged) and eq. (1)
   (expected tokens per step ``(1 - a^(k+1)) / (1 - a)``).
.. [2] Li et al., "EAGLE: Speculative Sampling Requires Rethinking Feature Uncertainty",
   ICML 2024 (one-decoder-layer draft head on target features).
.. [3] DeepSeek-AI, "DeepSeek-V3 Technical Report", arXiv:2412.19437, sec. 2.2 (MTP
   module: shared embedding and head, projection ``2H -> H``, one transformer block)
   and sec. 5.4.3 (second-token acceptance 85-90%).
.. [4] Cai et al., "Medusa", ICML 2024, sec. 2.1.1 (head: ``SiLU(W1 h) + h``, then ``W2``).
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field, fields, replace
from collections.abc import Callable, Iterable
from typing import Literal

import numpy as np
from scipy.optimize import brentq

from ..core.graph import Step, StepPrecision, build_graph
from ..core.ops import ArrayLike, Elementwise, Gemm, Op
from ..core.phases import QUADRATURE_NODES, QUADRATURE_WEIGHTS, Deployment, StepResult, mean_decode_step_s, run_step
from ..core.timing import step_time, time_ops
from ..errors import SpecError
from ..precision import number_format
from ..specs.model import LayerSpec, ModelSpec
from .tensor_parallel import apply_tensor_parallel

Method = Literal["draft", "eagle", "medusa", "mtp", "ngram"]
METHODS: tuple[str, ...] = ("draft", "eagle", "medusa", "mtp", "ngram")
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
        Draft tokens proposed per step [token], >= 1.
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
    """

    method: Method
    k: int
    acceptance: float | None = None
    acceptance_length: float | None = None
    draft_model: str | ModelSpec | None = None
    draft_vocab_size: int | None = None
    host_s: float = 0.0
    source: str = "stated by the user"

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise SpecError(f"unknown speculative method {self.method!r}{_did_you_mean(self.method, METHODS)}; "
                            f"allowed: {', '.join(METHODS)}")
        if isinstance(self.k, bool) or not isinstance(self.k, (int, np.integer)) or self.k < 1:
            raise SpecError(f"draft length k must be an integer >= 1, got {self.k!r}")
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
        try:
            return cls(method=method, **values)  # type: ignore[arg-type]
        except SpecError as err:
            raise SpecError(f"{where}: {err}") from None


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
    close = difflib.get_close_matches(name, list(allowed), n=2, cutoff=0.6)
    return f" (did you mean {' or '.join(map(repr, close))}?)" if close else ""


#: Published acceptance figures, each with the page and number it comes from.
PRESETS: dict[str, dict] = {
    "mtp-deepseek-v3": dict(
        method="mtp", k=1, acceptance=0.85,
        source="DeepSeek-AI, DeepSeek-V3 Technical Report, arXiv:2412.19437, sec. 5.4.3: second-token acceptance "
               "85-90% across generation topics (lower end taken), 1.8x tokens/s"),
    "mtp-deepseek-v3-k7": dict(
        method="mtp", k=7, acceptance_length=3.20,
        source="nebius/MTP-DeepSeek-V3-0324 model card, Hugging Face: the original DeepSeek-V3 MTP module reused "
               "autoregressively, K=7, mean acceptance length 3.20 at temperature 0 (MT-bench, HumanEval, GSM8K)"),
    "eagle3-llama-3.1-8b": dict(
        method="eagle", k=7, acceptance_length=2.77, draft_vocab_size=32000,
        source="nebius/EAGLE3-Llama-3.3-70B-Instruct model card, Hugging Face, comparison table: "
               "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B, chain drafting K=7, temperature 1, MT-bench 2.77 "
               "(HumanEval 3.49, GSM8K 3.34); draft_vocab_size 32000 from that checkpoint's config.json"),
    "eagle3-llama-3.3-70b": dict(
        method="eagle", k=7, acceptance_length=2.88,
        source="nebius/EAGLE3-Llama-3.3-70B-Instruct model card, Hugging Face, comparison table: "
               "RedHatAI/Llama-3.3-70B-Instruct-speculator.eagle3, K=7, temperature 1, MT-bench 2.88 "
               "(HumanEval 3.62, GSM8K 3.29)"),
}
for _name, _preset in PRESETS.items():
    _preset["source"] = f"preset {_name}: {_preset['source']}"


@dataclass(frozen=True)
class SpeculativeStep:
    """One speculative step of a batch: the drafter's passes, the verify pass, their times.

    ``time_s`` [s] is one step (arrays over the grid); ``tpot_s`` [s] the time per emitted
    token. :attr:`passes` names every component for per-op tables.
    """

    spec: SpeculativeConfig
    drafts: tuple[StepResult, ...]
    verify: StepResult
    tokens_per_step: float
    time_s: np.ndarray
    notes: tuple[str, ...] = field(default=())

    @property
    def tpot_s(self) -> np.ndarray:
        """Time per output token: ``time_s / tokens_per_step`` [s]."""
        return self.time_s / self.tokens_per_step

    @property
    def draft_s(self) -> np.ndarray:
        """Time of all draft passes of the step [s]."""
        return np.asarray(sum((d.time_s for d in self.drafts), np.zeros(())), float)

    @property
    def passes(self) -> tuple[tuple[str, StepResult], ...]:
        """``("draft_pass_1", ...), ..., ("verify", ...)`` in execution order."""
        return (*((f"draft_pass_{i + 1}", d) for i, d in enumerate(self.drafts)), ("verify", self.verify))


def speculative_decode(dep: Deployment, batch: ArrayLike, context: ArrayLike,
                       spec: SpeculativeConfig) -> SpeculativeStep:
    """One speculative step of ``batch`` sequences holding ``context`` tokens [arrays broadcast].

    Speculation never changes quality: the target verifies every token, so the output
    is the one plain decoding would give; only the time per token changes.

    Notes
    -----
    ``time = sum(draft passes) + verify(B, k + 1 tokens, L) + host_s`` and
    ``tpot = time / tokens_per_step``. Draft passes run inside the engine step: they pay
    their kernels (and launches without CUDA graphs), not the per-step scheduler overhead.
    """
    batch, context = np.asarray(batch, float), np.asarray(context, float)
    verify = run_step(dep, Step("decode", batch, np.asarray(spec.k + 1.0), context))
    drafts, notes = _DRAFTERS[spec.method](dep, spec, batch, context)
    time = verify.time_s + sum((d.time_s for d in drafts), np.zeros(())) + spec.host_s
    return SpeculativeStep(spec, drafts, verify, spec.tokens_per_step, np.asarray(time, float), notes)


def mean_speculative_tpot_s(dep: Deployment, batch: ArrayLike, isl: ArrayLike, osl: ArrayLike,
                            spec: SpeculativeConfig) -> np.ndarray:
    """Mean time per output token over contexts ``isl .. isl + osl - 1`` with speculation [s].

    Notes
    -----
    Steps start at contexts ``isl, isl + T, isl + 2T, ...`` with ``T = tokens_per_step``,
    so ``osl - 1`` tokens take ``(osl - 1) / T`` steps and the time per token is
    ``(1 / T) * (1 / (b - a)) * integral_a^b t_spec(L) dL``, ``a = isl``,
    ``b = isl + osl - 1``: the Gauss-Legendre nodes of :func:`mean_decode_step_s`.
    """
    batch, isl, osl = (np.asarray(x, float) for x in (batch, isl, osl))
    a = isl[..., None]
    b = (isl + np.maximum(osl - 1.0, 0.0))[..., None]
    contexts = a + (b - a) * (QUADRATURE_NODES + 1.0) / 2.0
    step = speculative_decode(dep, batch[..., None], contexts, spec)
    times = np.broadcast_to(step.time_s, np.broadcast_shapes(step.time_s.shape, contexts.shape))
    return np.asarray(times @ QUADRATURE_WEIGHTS / 2.0 / step.tokens_per_step, float)


def break_even_batch(dep: Deployment, isl: int, osl: int, spec: SpeculativeConfig,
                     max_batch: int = 4096) -> int | None:
    """Smallest batch at which speculation stops paying (its mean TPOT >= plain decoding's).

    ``None`` when it still pays at ``max_batch``; ``1`` when it never pays. Whether the
    batch fits in memory is not checked here. All batches ``1 .. max_batch`` are
    evaluated in one vectorized pass.
    """
    if isinstance(max_batch, bool) or not isinstance(max_batch, (int, np.integer)) or max_batch < 1:
        raise SpecError(f"max_batch must be an integer >= 1, got {max_batch!r}")
    batches = np.arange(1.0, max_batch + 1.0)
    spec_s = mean_speculative_tpot_s(dep, batches, isl, osl, spec)
    plain_s = mean_decode_step_s(dep, batches, isl, osl)
    stops = np.flatnonzero(np.broadcast_to(spec_s >= plain_s, batches.shape))
    return int(batches[stops[0]]) if stops.size else None


# --- drafters: each returns its passes (StepResults) and notes --------------------------------------

Drafts = tuple[tuple[StepResult, ...], tuple[str, ...]]


def _draft_pass(dep: Deployment, step: Step, ops: tuple[Op, ...]) -> StepResult:
    """Shard the ops of one draft pass over the tensor-parallel group and time them.

    A draft pass runs inside the engine step: no per-step scheduler overhead of its own.
    Only tensor parallelism applies: the drafter is replicated on every pipeline stage's
    and expert group's view of it.
    """
    sharded = apply_tensor_parallel(ops, dep.tp)
    times = time_ops(sharded, dep.hardware, dep.profile, "decode")
    profile = dep.profile.model_copy(update={"step_overhead_s": 0.0})
    return StepResult(step, sharded, times, step_time(times, profile, cuda_graphs=dep.cuda_graphs))


def _draft_model(dep: Deployment, spec: SpeculativeConfig, batch, context) -> Drafts:
    from ..specs.catalog import load_model

    draft = spec.draft_model if isinstance(spec.draft_model, ModelSpec) else load_model(str(spec.draft_model))
    name = draft.id or draft.name
    notes: list[str] = []
    tp = dep.tp
    if draft.num_attention_heads % dep.tp:
        tp = 1
        notes.append(f"draft model {name} has {draft.num_attention_heads} attention heads, not divisible by "
                     f"tp={dep.tp}: it runs at tp=1 on one GPU while the others wait")
    if draft.vocab_size != dep.model.vocab_size:
        notes.append(f"draft model {name} has vocab_size {draft.vocab_size}, the target {dep.model.vocab_size}: "
                     "speculation needs a shared tokenizer")
    # one tensor-parallel group of the target's GPUs; a layout field, where the core has one, is reset to it
    layout = {"parallel": None} if "parallel" in {f.name for f in fields(dep)} else {}
    ddep = replace(dep, model=draft, tp=tp, **layout)
    passes = []
    for i in range(spec.k):
        step = Step.decode(batch, context + i)
        passes.append(_draft_pass(ddep, step, build_graph(draft, step, ddep.step_precision, ddep.attention)))
    return tuple(passes), tuple(notes)


def _one_layer_view(model: ModelSpec, layer: LayerSpec, vocab_size: int | None) -> ModelSpec:
    """The model with a single decoder layer: embedding, that layer, final norm, LM head."""
    data = model.model_dump()
    data.update(num_hidden_layers=1, layers=[layer.model_dump()], num_mtp_layers=0,
                vocab_size=vocab_size or model.vocab_size)
    return ModelSpec.model_validate(data)


def _gemm_formats(prec: StepPrecision) -> dict:
    """Storage formats and kernel of the deployment's linear layers, as Gemm keywords."""
    return {"weight_bytes_per_element": number_format(prec.config.weights).bytes_per_element,
            "act_bytes_per_element": number_format(prec.config.activations).bytes_per_element,
            "precision": prec.gemm, "kernel": prec.kernel}


def _fusion_ops(name: str, tokens: ArrayLike, hidden: int, prec: StepPrecision) -> list[Op]:
    """Norms of the token embedding and the carried feature, then their ``2H -> H`` projection."""
    return [
        Elementwise(f"{name}_norms", elements_read=2 * tokens * hidden, elements_written=2 * tokens * hidden,
                    group="draft"),
        Gemm(f"{name}_proj", m=tokens, n=hidden, k=2 * hidden, group="draft", **_gemm_formats(prec)),
    ]


def _layer_head_passes(dep: Deployment, spec: SpeculativeConfig, batch, context, layer: LayerSpec,
                       name: str) -> tuple[StepResult, ...]:
    view = _one_layer_view(dep.model, layer, spec.draft_vocab_size)
    prec = dep.step_precision
    passes = []
    for i in range(spec.k):
        step = Step.decode(batch, context + i)
        graph = build_graph(view, step, prec, dep.attention)  # embedding, layer, final norm, LM head
        ops = (graph[0], *_fusion_ops(name, step.tokens, dep.model.hidden_size, prec), *graph[1:])
        passes.append(_draft_pass(dep, step, ops))
    return tuple(passes)


def _eagle(dep: Deployment, spec: SpeculativeConfig, batch, context) -> Drafts:
    notes = ("eagle head modelled as one decoder layer shaped like the target's first layer plus an LM head "
             f"over {spec.draft_vocab_size or dep.model.vocab_size} tokens",)
    return _layer_head_passes(dep, spec, batch, context, dep.model.layers[0], "eagle_fc"), notes


def _mtp(dep: Deployment, spec: SpeculativeConfig, batch, context) -> Drafts:
    model = dep.model
    if model.num_mtp_layers < 1:
        raise SpecError(f"{model.id or model.name} has no multi-token-prediction module (num_mtp_layers=0); "
                        "methods that need none: draft, eagle, medusa, ngram")
    notes = ()
    if spec.k > model.num_mtp_layers:
        notes = (f"k={spec.k} exceeds the {model.num_mtp_layers} MTP module(s): reused autoregressively",)
    return _layer_head_passes(dep, spec, batch, context, model.layers[-1], "mtp_eh"), notes


def _medusa(dep: Deployment, spec: SpeculativeConfig, batch, context) -> Drafts:
    prec, h, k = dep.step_precision, dep.model.hidden_size, spec.k
    vocab = spec.draft_vocab_size or dep.model.vocab_size
    step = Step.decode(batch, context)
    rows = step.tokens  # one hidden state per sequence: the last verified position
    ops: tuple[Op, ...] = (
        Gemm("medusa_block", m=rows, n=h, k=h, count=k, group="medusa", **_gemm_formats(prec)),
        Elementwise("medusa_silu_add", elements_read=2 * rows * h, elements_written=rows * h, flops_per_element=5.0,
                    count=k, group="medusa"),
        Gemm("medusa_lm_head", m=rows, n=vocab, k=h, shard="vocab", count=k, group="medusa", precision=prec.head),
    )
    return (_draft_pass(dep, step, ops),), ("medusa heads modelled as a chain (top-1 per head), no tree",)


def _ngram(dep: Deployment, spec: SpeculativeConfig, batch, context) -> Drafts:
    return (), ("n-gram prompt lookup runs on the host: no GPU work, host_s per step",)


_DRAFTERS: dict[str, Callable[..., Drafts]] = {
    "draft": _draft_model, "eagle": _eagle, "medusa": _medusa, "mtp": _mtp, "ngram": _ngram,
}
