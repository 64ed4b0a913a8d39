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

from collections.abc import Callable
from dataclasses import dataclass, field, fields, replace

import numpy as np

from ..core.graph import Step, StepPrecision, build_graph
from ..core.quantization import PrecisionConfig
from ..core.ops import ArrayLike, Attention, Elementwise, Gemm, Op
from ..core.timing import step_time, time_op, time_ops
from ..errors import SpecError
from ..memo import IdentityMemo, array_key
from ..precision import number_format
from ..specs.model import LayerSpec, ModelSpec
from .speculative_config import (  # noqa: F401  (re-exported)
    PRESETS,
    SpeculativeConfig,
    acceptance_from_length,
    tokens_per_step,
)
from .step import (
    QUADRATURE_NODES,
    QUADRATURE_WEIGHTS,
    ResolvedDeployment,
    StepResult,
    busiest_rank,
    mean_decode_step_s,
    on_one_gpu,
    run_step,
)
from .tensor_parallel import apply_tensor_parallel


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


def speculative_decode(dep: ResolvedDeployment, batch: ArrayLike, context: ArrayLike,
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


def mean_speculative_tpot_s(dep: ResolvedDeployment, batch: ArrayLike, isl: ArrayLike, osl: ArrayLike,
                            spec: SpeculativeConfig) -> np.ndarray:
    """Mean time per output token over contexts ``isl .. isl + osl - 1`` with speculation [s].

    Notes
    -----
    Steps start at contexts ``isl, isl + T, isl + 2T, ...`` with ``T = tokens_per_step``,
    so ``osl - 1`` tokens take ``(osl - 1) / T`` steps, and at least one, and the time per token is
    ``(1 / T') * (1 / (b - a)) * integral_a^b t_spec(L) dL``, ``T' = min(T, osl - 1)``, ``a = isl``,
    ``b = isl + osl - 1``: the Gauss-Legendre nodes of :func:`mean_decode_step_s`. (A step's
    drafts past the last output token are verified and dropped: one token left still costs a
    whole step.)
    """
    batch, isl, osl = (np.asarray(x, float) for x in (batch, isl, osl))
    a = isl[..., None]
    b = (isl + np.maximum(osl - 1.0, 0.0))[..., None]
    contexts = a + (b - a) * (QUADRATURE_NODES + 1.0) / 2.0
    step = speculative_decode(dep, batch[..., None], contexts, spec)
    times = np.broadcast_to(step.time_s, np.broadcast_shapes(step.time_s.shape, contexts.shape))
    per_step = np.minimum(step.tokens_per_step, np.maximum(osl - 1.0, 1.0))
    return np.asarray(times @ QUADRATURE_WEIGHTS / 2.0 / per_step, float)


def break_even_batch(dep: ResolvedDeployment, isl: int, osl: int, spec: SpeculativeConfig,
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


def _draft_pass(dep: ResolvedDeployment, step: Step, ops: tuple[Op, ...], sharded: bool = False) -> StepResult:
    """Shard the ops of one draft pass over the tensor-parallel group (``sharded``: they are
    already, :func:`_head_ops`) and time them.

    A draft pass runs inside the engine step: no per-step scheduler overhead of its own.
    Only tensor parallelism applies: the drafter is replicated on every pipeline stage's
    and expert group's view of it.
    """
    sharded = ops if sharded else apply_tensor_parallel(ops, dep.tp)
    times = time_ops(sharded, dep.hardware, dep.profile, "decode")
    profile = dep.profile.model_copy(update={"step_overhead_s": 0.0})
    return StepResult(step, sharded, times, step_time(times, profile, cuda_graphs=dep.cuda_graphs))


def _draft_passes(dep: ResolvedDeployment, batch, context, k: int, make_ops: Callable[[Step], tuple[Op, ...]],
                  sharded: bool = False) -> tuple[StepResult, ...]:
    """``k`` draft passes at contexts ``context``, ``context + 1``, ...: one graph, sharded and
    timed once; each later pass re-times only its attention, the one op that sees the context
    (what :func:`_draft_pass` on a fresh graph per pass gives, without rebuilding it)."""
    first = _draft_pass(dep, Step.decode(batch, context), make_ops(Step.decode(batch, context)), sharded)
    passes = [first]
    profile = dep.profile.model_copy(update={"step_overhead_s": 0.0})
    for i in range(1, k):
        ops = tuple(replace(op, context=op.context + i) if isinstance(op, Attention) else op for op in first.ops)
        times = tuple(time_op(op, dep.hardware, dep.profile, "decode") if isinstance(op, Attention) else t
                      for op, t in zip(ops, first.times))
        passes.append(StepResult(Step.decode(batch, context + i), ops, times,
                                 step_time(times, profile, cuda_graphs=dep.cuda_graphs)))
    return tuple(passes)


def _draft_deployment(dep: ResolvedDeployment, spec: SpeculativeConfig) -> tuple[ResolvedDeployment, list[str]]:
    """The draft model on the target's tensor-parallel group (or one GPU of it), and notes."""
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
    return replace(dep, model=draft, tp=tp, **layout), notes


def _draft_model(dep: ResolvedDeployment, spec: SpeculativeConfig, batch, context) -> Drafts:
    ddep, notes = _draft_deployment(dep, spec)
    passes = _draft_passes(ddep, batch, context, spec.k,
                           lambda step: build_graph(ddep.model, step, ddep.step_precision, ddep.attention))
    return passes, tuple(notes)


def drafter_prefill_s(dep: ResolvedDeployment, spec: SpeculativeConfig, batch: ArrayLike, prompt: ArrayLike,
                      cached: ArrayLike = 0.0) -> np.ndarray:
    """Time the drafter spends over the prompts of a prefill [s]: part of the TTFT.

    Drafting from a request's first token needs the drafter's own state of its prompt: a draft
    model prefills it as the target does (into its own KV cache), an EAGLE or MTP head runs its
    layer over every prompt position (its KV of them, fed the target's hidden states); Medusa heads
    and n-gram lookup keep no per-token state (0). Inside the engine's step: its kernels, no
    scheduler overhead of its own.
    """
    step = Step.prefill(batch, prompt, cached)
    if spec.method == "draft":
        ddep = _draft_deployment(dep, spec)[0]
        sharded = apply_tensor_parallel(build_graph(ddep.model, step, ddep.step_precision, ddep.attention), ddep.tp)
    elif spec.method in ("eagle", "mtp"):
        ddep = eagle_deployment(dep) if spec.method == "eagle" else dep
        layer = eagle_layer(dep.model) if spec.method == "eagle" else dep.model.layers[-1]
        sharded = _head_ops(ddep, _one_layer_view(dep.model, layer, spec.draft_vocab_size), step,
                            f"{spec.method}_prefill")
    else:
        return np.zeros(np.broadcast_shapes(np.shape(batch), np.shape(prompt), np.shape(cached)))
    times = time_ops(sharded, ddep.hardware, ddep.profile, "prefill")
    profile = ddep.profile.model_copy(update={"step_overhead_s": 0.0})
    return np.asarray(step_time(times, profile, cuda_graphs=ddep.cuda_graphs), float)


#: One-layer views of recent models, by the model and the layer: a planner times the same head
#: on every GPU, and a view built once is not dumped and validated again.
_VIEWS = IdentityMemo(64)
#: The EAGLE head's layer of recent models (one object a model, so that its view is memoized).
_EAGLE_LAYERS = IdentityMemo(64)


def eagle_layer(model: ModelSpec) -> LayerSpec:
    """The decoder layer of an EAGLE head for ``model``: a dense, full-attention layer (EAGLE-3
    heads are Llama layers whatever the target), its MLP the target's first layer's where that
    is dense, else as wide as the experts a token runs (top-k routed plus shared). Published
    heads: Llama-3.1-8B's 14,336 and Qwen3-32B's 25,600 (the targets' own); Kimi-K2 (DeepSeek-V3's
    shape) 18,432, its dense layers' (and 8 x 2,048 + 2,048); gpt-oss-120b 17,280 (SpecForge's
    config; this rule gives 4 x 2,880 = 11,520). The target's first layer as it is had priced a
    gpt-oss head as a whole MoE layer of 128 experts (3.2B parameters) and windowed attention."""
    known = _EAGLE_LAYERS.get((model,))
    if known is not None:
        return known
    first = model.layers[0]
    moe = model.moe
    width = first.intermediate_size if first.mlp == "dense" or moe is None else \
        moe.num_experts_per_tok * moe.moe_intermediate_size + moe.num_shared_experts * moe.shared_expert_intermediate_size
    layer = LayerSpec(attention="full", mlp="dense", intermediate_size=width)
    return _EAGLE_LAYERS.put((model,), (), layer if layer != first else first)


def _one_layer_view(model: ModelSpec, layer: LayerSpec, vocab_size: int | None) -> ModelSpec:
    """The model with a single decoder layer: embedding, that layer, final norm, LM head. A
    drafter's head attends over its whole context: a linear-attention layer of a hybrid target
    stands as full attention (Qwen3.5's MTP layer and EAGLE heads are full attention)."""
    view = _VIEWS.get((model, layer), vocab_size)
    if view is not None:
        return view
    if layer.attention == "linear":
        layer = layer.model_copy(update={"attention": "full"})
    data = model.model_dump()
    data.update(num_hidden_layers=1, layers=[layer.model_dump()], num_mtp_layers=0,
                vocab_size=vocab_size or model.vocab_size, linear_attention=None)
    return _VIEWS.put((model, layer), vocab_size, ModelSpec.model_validate(data))


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


def _layer_head_passes(dep: ResolvedDeployment, spec: SpeculativeConfig, batch, context, layer: LayerSpec,
                       name: str) -> tuple[StepResult, ...]:
    view = _one_layer_view(dep.model, layer, spec.draft_vocab_size)
    return _draft_passes(dep, batch, context, spec.k, lambda step: _head_ops(dep, view, step, name), sharded=True)


#: Sharded graphs of recent EAGLE or MTP heads' steps, by the head (its one-layer view), name,
#: formats, tensor-parallel size and the step's shape: a planner times the same head on many
#: GPUs, built and sharded once (small grids only).
_HEAD_OPS = IdentityMemo(256)
_HEAD_OPS_MAX_ELEMENTS = 4096


def _head_ops(dep: ResolvedDeployment, view: ModelSpec, step: Step, name: str) -> tuple[Op, ...]:
    """A head's ops of ``step`` (embedding, the ``2H -> H`` fusion of :func:`_fusion_ops`, its
    layer, final norm and LM head) split over ``dep``'s tensor-parallel group; under attention
    DP as the target's layers run: the busiest rank's sequences over its GPUs, a routed-expert
    layer (DeepSeek's MTP module) over expert parallelism with its dispatch and combine."""
    prec, par = dep.step_precision, dep.parallel
    shape = array_key((step.batch, step.new_tokens, step.context), _HEAD_OPS_MAX_ELEMENTS)
    rest = (name, prec, dep.attention, par if par.attention_dp else dep.tp, dep.model.hidden_size, step.phase, shape)
    ops = _HEAD_OPS.get((view,), rest) if shape is not None else None
    if ops is not None:
        return ops
    local, gather = busiest_rank(step, par) if par.attention_dp else (step, None)
    graph = build_graph(view, local, prec, dep.attention)  # embedding, layer, final norm, LM head
    graph = (graph[0], *_fusion_ops(name, local.tokens, dep.model.hidden_size, prec), *graph[1:])
    # tensor parallelism alone without attention DP: the drafter's experts split over the TP group
    ops = on_one_gpu(graph, view, par, gather) if par.attention_dp else apply_tensor_parallel(graph, par.head_split)
    return _HEAD_OPS.put((view,), rest, ops) if shape is not None else ops


#: The format EAGLE heads ship in: BF16 weights and activations whatever the target's (EAGLE-3 heads
#: are trained and published in BF16: yuhuili's EAGLE3 heads, NVIDIA's and SGLang's SpecForge ones; vLLM,
#: SGLang and TensorRT-LLM load a draft checkpoint in its own format). The KV cache is the engine's.
EAGLE_HEAD_FORMAT = "bf16"


def eagle_deployment(dep: ResolvedDeployment) -> ResolvedDeployment:
    """``dep`` as its EAGLE head runs: the head's own BF16 weights and activations, the target's KV
    cache format (an FP8 or FP4 target's head reads twice or four times its bytes a token)."""
    cfg = dep.precision
    head = PrecisionConfig(weights=EAGLE_HEAD_FORMAT, activations=EAGLE_HEAD_FORMAT, kv_cache=cfg.kv_cache)
    return dep if head == cfg else replace(dep, precision=head)


def _eagle(dep: ResolvedDeployment, spec: SpeculativeConfig, batch, context) -> Drafts:
    notes = ("eagle head modelled as one decoder layer shaped like the target's first layer plus an LM head "
             f"over {spec.draft_vocab_size or dep.model.vocab_size} tokens, in its checkpoint's "
             f"{EAGLE_HEAD_FORMAT.upper()}",)
    return _layer_head_passes(eagle_deployment(dep), spec, batch, context, eagle_layer(dep.model), "eagle_fc"), notes


def _mtp(dep: ResolvedDeployment, spec: SpeculativeConfig, batch, context) -> Drafts:
    model = dep.model
    if model.num_mtp_layers < 1:
        raise SpecError(f"{model.id or model.name} has no multi-token-prediction module (num_mtp_layers=0); "
                        "methods that need none: draft, eagle, medusa, ngram")
    notes = ()
    if spec.k > model.num_mtp_layers:
        notes = (f"k={spec.k} exceeds the {model.num_mtp_layers} MTP module(s): reused autoregressively",)
    return _layer_head_passes(dep, spec, batch, context, model.layers[-1], "mtp_eh"), notes


def _medusa(dep: ResolvedDeployment, spec: SpeculativeConfig, batch, context) -> Drafts:
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


def _ngram(dep: ResolvedDeployment, spec: SpeculativeConfig, batch, context) -> Drafts:
    return (), ("n-gram prompt lookup runs on the host: no GPU work, host_s per step",)


_DRAFTERS: dict[str, Callable[..., Drafts]] = {
    "draft": _draft_model, "eagle": _eagle, "medusa": _medusa, "mtp": _mtp, "ngram": _ngram,
}
