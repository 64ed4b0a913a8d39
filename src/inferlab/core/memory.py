"""Device memory of a deployment: weights, KV cache, workspace, reserve, and what fits.

Per GPU, in bytes. The budget is ``usable capacity x gpu_memory_utilization`` (like
vLLM's setting); the KV cache gets what weights, the activation workspace and the runtime
reserve leave; sequences take whole pages of ``kv_block_size`` tokens. Engines that read
their share otherwise: ``sizing`` (:mod:`inferlab.engines.memory_share`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from ..errors import InfeasibleError, SpecError, option_name
from ..specs.hardware import HardwareSpec
from ..specs.model import ModelSpec
from .parallelism import Parallelism, kv_units, stage_layer_share, state_share, tp_split_reason, weights_per_gpu
from .quantization import PrecisionConfig
from ..results.record import array_record

#: CUDA context, library workspaces and communication buffers outside the engine's pool.
DEFAULT_RESERVE_BYTES = 1.0 * 2**30
#: Bytes of activations kept per token in flight: residual and normed input (2H), the
#: attention and MLP intermediates (qkv, gate/up at most 3 x the shard width), 16-bit.
_WORKSPACE_WIDTHS = 4


@array_record
@dataclass(frozen=True)
class MemoryPlan:
    """Where one GPU's memory goes [B]; arrays over the sweep grid."""

    capacity: float
    budget: float
    weights: float
    reserve: float
    workspace: np.ndarray
    kv_per_token: float
    kv_per_sequence: np.ndarray
    kv_batch: np.ndarray
    max_sequences: np.ndarray
    kv_fraction: float = 1.0  # the KV pool's share of what weights, reserve and workspace leave of all memory
    sizing: str = "all"  # how the engine's share reads (:mod:`inferlab.engines.memory_share`)

    @property
    def kv_budget(self) -> np.ndarray:
        """Bytes left for the KV cache: what weights, reserve and workspace leave of the budget."""
        return self.budget - self.weights - self.reserve - self.workspace

    @property
    def used(self) -> np.ndarray:
        """Weights, reserve, workspace and the batch's KV cache."""
        return self.weights + self.reserve + self.workspace + self.kv_batch

    @property
    def fits(self) -> np.ndarray:
        """Whether the batch's KV cache fits next to the weights."""
        return self.kv_batch <= self.kv_budget


def recurrent_state_per_gpu(model: ModelSpec, par: Parallelism) -> float:
    """Bytes of one sequence's linear-attention state on one GPU [B]: its heads' share of the linear
    layers of the pipeline stage that holds the most (stages of ``ceil(layers / pp)`` layers in
    order; 0 without linear attention)."""
    if model.linear_attention is None:  # (every other model: no walk over its layers)
        return 0.0
    linear = [layer.attention == "linear" for layer in model.layers]
    size = -(-len(linear) // par.pp)
    most = max(sum(linear[i:i + size]) for i in range(0, len(linear), size))
    return model.recurrent_state_bytes() * state_share(model, par.head_split) * most / sum(linear)


def weight_bytes_per_gpu(model: ModelSpec, precision: PrecisionConfig, tp: int) -> float:
    """Stored weights per GPU of a ``tp``-way tensor-parallel replica [B] (see
    :func:`inferlab.core.parallelism.weights_per_gpu` for every layout)."""
    return weights_per_gpu(model, precision, Parallelism(tp=tp))


def kv_share(model: ModelSpec, tp: int) -> float:
    """Share of a token's KV cache one of ``tp`` ranks holds (KV heads replicate past TP)."""
    return max(1.0 / tp, 1.0 / kv_units(model))


def plan_memory(model: ModelSpec, hw: HardwareSpec, precision: PrecisionConfig, *, tp: int = 1,
                batch: np.ndarray, context: np.ndarray, step_tokens: np.ndarray,
                gpu_memory_utilization: float = 0.9, kv_block_size: int = 16,
                reserve_bytes: float = DEFAULT_RESERVE_BYTES, parallel: Parallelism | None = None,
                extra_weight_bytes: float = 0.0, extra_kv_bytes_per_token: float = 0.0,
                lookahead_tokens: int = 0, sizing: str = "all", window_pool_ratio: float | None = None,
                window_kv: tuple[str, ...] = ("sliding", "chunked")) -> MemoryPlan:
    """Memory of one GPU of a replica serving ``batch`` sequences of ``context`` tokens.

    ``max_sequences`` is for the whole replica. With attention DP each GPU holds the full
    KV of its rank's sequences (the busiest rank's ``ceil(batch / ranks)``), or its heads' share of it when a rank
    spans ``attention_tp`` GPUs; otherwise every GPU holds its heads' share of all of them; the largest pipeline stage holds ``ceil(layers / pp)`` layers. A speculative drafter adds
    ``extra_weight_bytes`` on each GPU and ``extra_kv_bytes_per_token`` per token of every
    sequence, and each sequence holds ``lookahead_tokens`` slots beyond its context (the
    drafts being verified). A hybrid model's sequence also holds its linear-attention state
    (:func:`recurrent_state_per_gpu`), whatever its length. ``sizing`` (:mod:`inferlab.engines.memory_share`): ``"all"``, the KV
    cache takes what weights, workspace and reserve leave of ``gpu_memory_utilization`` of all
    memory (vLLM's); ``"free"``, that share of what they leave of all memory (TensorRT-LLM's
    ``free_gpu_memory_fraction``); ``"static"``, what the weights leave of that share, the rest
    of memory being the engine's reserve for activations and graphs (SGLang's
    ``mem_fraction_static``: the reserve is ``1 - gpu_memory_utilization`` of all memory, the
    workspace inside it). A windowed layer of a kind in ``window_kv`` holds a sequence's last
    ``W`` tokens (the engine frees the rest); with ``window_pool_ratio`` (SGLang's
    ``--swa-full-tokens-ratio``) those layers have a pool of their own of that many tokens for
    each of the full layers', so a sequence takes its length in both, and the windowed pool holds
    no more sequences than its tokens over :func:`window_pool_need` each
    (:mod:`inferlab.engines.window_pool`).
    """
    par = parallel or Parallelism(tp=tp)
    capacity = hw.usable_memory_capacity.si
    groups = par.attention_groups
    # the largest stage's layers: ceil(layers / pp) of them
    share = kv_share(model, par.head_split) * stage_layer_share(model, par.pp)
    kv_fmt = precision.kv_cache
    pages = np.ceil((np.asarray(context, float) + lookahead_tokens) / kv_block_size) * kv_block_size
    held = model.kv_cache_bytes(pages, kv_fmt, freed=window_kv)
    whole = model.kv_share_held_whole(window_kv)
    if window_pool_ratio is not None and 0.0 < whole < 1.0:  # windowed layers' pool: ratio x the full layers' tokens
        held = sum(model.kv_cache_bytes_per_token(kv_fmt).values()) * (whole + window_pool_ratio * (1.0 - whole)) * pages
    per_seq = held * share + extra_kv_bytes_per_token * pages + recurrent_state_per_gpu(model, par)
    per_token = sum(model.kv_cache_bytes_per_token(kv_fmt).values()) * share + extra_kv_bytes_per_token
    widest = max([layer.intermediate_size for layer in model.layers] +
                 [model.moe.moe_intermediate_size * model.moe.num_experts_per_tok if model.moe else 0])
    workspace = step_tokens / groups * (_WORKSPACE_WIDTHS * model.hidden_size + 3 * widest / par.tp) * 2.0
    weights = weights_per_gpu(model, precision, par) + extra_weight_bytes
    kv_fraction = gpu_memory_utilization if sizing == "free" else 1.0
    budget = capacity * gpu_memory_utilization
    if sizing == "static":  # weights and KV in the share; activations, graphs and metadata in the rest
        budget, reserve_bytes, workspace = capacity, (1.0 - gpu_memory_utilization) * capacity, np.zeros(np.shape(workspace))
    if sizing == "free":  # all memory but the share of the free rest the engine leaves
        budget = capacity - (1.0 - gpu_memory_utilization) * (capacity - weights - reserve_bytes - workspace)
        budget = float(budget) if np.ndim(budget) == 0 else np.asarray(budget, float)
    free = budget - weights - reserve_bytes - workspace
    with np.errstate(divide="ignore"):
        max_seq = np.floor(np.maximum(free, 0.0) / per_seq) * groups
    if window_pool_ratio is not None and 0.0 < whole < 1.0:  # the windowed layers' pool holds its sequences too
        max_seq = np.minimum(max_seq, np.floor(window_pool_ratio * max_seq * pages / np.minimum(
            pages, window_pool_need(model, window_kv, kv_block_size))))
    return MemoryPlan(capacity, budget, weights, reserve_bytes, np.asarray(workspace, float), per_token,
                      np.asarray(per_seq, float), np.asarray(np.ceil(batch / groups) * per_seq, float), max_seq, kv_fraction,
                      sizing)


def window_pool_need(model: ModelSpec, freed: tuple[str, ...], page: int) -> float:
    """Tokens a running sequence past its window holds in a windowed layers' pool of their own
    (SGLang's) [token]: the widest freed window and a page (SGLang frees a running request's
    windowed-layer tokens a window and a page behind, ``ScheduleBatch._evict_swa``; its radix
    cache those of a finished prompt). A shorter sequence holds its length."""
    return float(model.widest_window(freed) + page)


def require_weights_fit(plan: MemoryPlan, model: ModelSpec, hw: HardwareSpec, tp: int | Parallelism,
                        precision: PrecisionConfig | None = None) -> None:
    """Raise :class:`InfeasibleError` when not even one sequence fits next to the weights.

    The message gives the bytes needed and available per GPU and the smallest layout that
    would fit: a larger TP within the scale-up domain, else pipeline stages across nodes; and a
    narrower weight format that holds the model where one does (``precision``, the deployed
    formats: its other kinds are kept and a drafter's weights counted, :func:`_narrower`).
    """
    if np.all(plan.max_sequences >= 1):
        return
    par = tp if isinstance(tp, Parallelism) else Parallelism(tp=tp)
    kv = float(np.max(plan.kv_per_sequence))
    need = plan.weights + plan.reserve + float(np.max(plan.workspace)) + kv
    alone = hw.scale_up.kind == "none"  # a MIG slice or a single device: one device per replica, no tp or pp
    domain = 1 if alone else int(hw.scale_up.domain_size.si) if hw.scale_up.kind != "pcie" else 8
    scale = par.tp * par.pp
    stages = (1,) if alone else (1, 2, 4, 8, 16)
    layouts = sorted(((t, p) for t in range(1, domain + 1) if not tp_split_reason(model, t) for p in stages
                      if t * p > scale and p <= model.num_hidden_layers), key=lambda tp_pp: (tp_pp[0] * tp_pp[1], tp_pp[1]))
    workspace = float(np.max(plan.workspace))  # kept whole: its hidden-size part does not shard
    state = recurrent_state_per_gpu(model, par)

    def holds(t: int, p: int, weights_now: float = plan.weights) -> bool:
        """One sequence fits next to the weights (``weights_now`` per GPU as deployed) on ``t`` x ``p``
        GPUs: weights shard over both, a sequence's KV over the KV heads ``t`` splits (replicated
        past them) and the stages."""
        if p > 1 and t * p > domain and hw.scale_out is None:
            return False  # stages on separate nodes need a NIC between them
        weights = weights_now * scale / (t * p)
        # the KV cache splits over the KV heads, a hybrid model's state over its own heads
        kv_t = ((kv - state) * kv_share(model, t) / kv_share(model, par.head_split)
                + state * state_share(model, t) / state_share(model, par.head_split)) * par.pp / p
        left = plan.capacity - weights - plan.reserve - workspace
        if plan.kv_fraction < 1.0:  # the engine's KV pool is its share of the free memory
            return kv_t <= plan.kv_fraction * left
        return weights + plan.reserve + workspace + kv_t <= plan.budget

    fits = next(((t, p) for t, p in layouts if holds(t, p)), None)
    narrower = _narrower(model, par, plan, precision)
    share = plan.capacity - plan.reserve if plan.sizing == "static" else plan.budget  # what the engine takes
    if share < 0.5 * plan.capacity and plan.weights + workspace + kv <= 0.8 * plan.capacity:  # the share is too small
        hint = (f"; weights, workspace and one sequence fit in 80% of the GPU's {plan.capacity / 1e9:.1f} GB: raise "
                f"{option_name('gpu_memory_utilization')} (the engine's share is {share / 1e9:.1f} GB)")
        suggestion = {}
    elif fits and fits[1] == 1:
        hint, suggestion = f"; tp={fits[0]} would fit" + _narrower_here(par, narrower, holds), {"tp": fits[0]}
    elif fits:
        hint = (f"; tp={fits[0]} with pp={fits[1]} pipeline stages ({fits[0] * fits[1]} GPUs) would fit"
                + _narrower_here(par, narrower, holds))
        suggestion = {"tp": fits[0], "pp": fits[1]}
    elif alone:
        hint = ("; a MIG slice or single device cannot be joined to another by tp or pp: "
                + _larger_slice(hw, need, plan.budget / plan.capacity) + _narrower_here(par, narrower, holds, alone))
        suggestion = {}
    elif workspace > 0.5 * plan.capacity:  # the token budget's activations, which no layout shards
        hint = (f"; the workspace of one iteration's token budget alone takes {workspace / 1e9:.1f} GB: lower "
                f"{option_name('max_num_tokens')}")
        suggestion = {}
    else:
        hint, suggestion = _no_layout(hw, par, domain, [(par.tp, par.pp), *layouts], holds, narrower), {}
    raise InfeasibleError(
        f"{model.id or model.name} does not fit on {hw.id} as {par}: needs {need / 1e9:.1f} GB per GPU "
        f"(weights {plan.weights / 1e9:.1f} GB, one sequence's KV {kv / 1e9:.2f} GB, workspace "
        f"{workspace / 1e9:.2f} GB, reserve {plan.reserve / 1e9:.1f} GB) "
        f"but {_usable(plan)}{hint}",
        needed_bytes=need, available_bytes=plan.budget, suggestion=suggestion,
    )


#: Narrower weight formats a refusal may name, widest first: the 8- and 4-bit formats engines serve.
_NARROWER = ("fp8", "int4")


def _narrower(model: ModelSpec, par: Parallelism, plan: MemoryPlan,
              precision: PrecisionConfig | None) -> list[tuple[str, float]]:
    """``(format, weights per GPU)`` of each of :data:`_NARROWER` that stores the weights in fewer
    bytes than deployed, widest first: the deployed formats with the linear weights in it (its
    other kinds kept, as ``--weights`` sets them), a drafter's weights beside (what ``plan`` holds
    beyond the model's own); without ``precision``, the format alone."""
    extra = 0.0 if precision is None else max(plan.weights - weights_per_gpu(model, precision, par), 0.0)
    out = []
    for fmt in _NARROWER:
        try:
            config = PrecisionConfig(weights=fmt) if precision is None else replace(precision, weights=fmt)
        except SpecError:  # a combination the format refuses (activations narrower than it)
            continue
        weights = weights_per_gpu(model, config, par) + extra
        if weights < 0.99 * plan.weights:
            out.append((fmt, weights))
    return out


def _weights_option(fmt: str) -> str:
    """How the user sets the linear weights' format: ``--weights int4`` from the CLI, the
    scenario's key where a command reads one (``int4 in the scenario file's search: precisions``),
    else the keyword (``precision={'weights': 'int4'}``)."""
    flag = option_name("precision_weights")
    if flag.startswith("--"):
        return f"{flag} {fmt}"
    return f"precision={{'weights': '{fmt}'}}" if flag == "precision_weights" else f"{fmt} in {flag}"


def _narrower_here(par: Parallelism, narrower: list[tuple[str, float]], holds: Callable[..., bool],
                   alone: bool = False) -> str:
    """``", or fp8 weights on these 2 GPUs (--weights fp8)"``: the widest of ``narrower`` that
    holds one sequence on the GPUs as deployed (a single GPU's owner asks for a format, not more
    GPUs; ``alone``: a MIG slice or single device, said of it); empty when none does."""
    for fmt, weights in narrower:
        if holds(par.tp, par.pp, weights):
            if alone:
                return f"; {fmt} weights fit this one ({_weights_option(fmt)})"
            gpus = par.tp * par.pp
            where = "on this GPU" if gpus == 1 else f"on these {gpus} GPUs"
            return f", or {fmt} weights {where} ({_weights_option(fmt)})"
    return ""


def _no_layout(hw: HardwareSpec, par: Parallelism, domain: int, layouts: list[tuple[int, int]],
               holds: Callable[..., bool], narrower: list[tuple[str, float]]) -> str:
    """Why no layout of ``layouts`` (``(tp, pp)``, the deployed one first) holds the model, and a
    narrower weight format (``narrower``: :func:`_narrower`, on the deployed layout) only where
    one would fit: what limits the GPUs (one machine's ``domain`` without a scale-out NIC, else
    16 pipeline stages), then the format or a larger GPU."""
    if hw.scale_out is None:
        limit = (f"; no layout fits: one {hw.id} machine holds at most {domain} GPUs (tp x pp <= {domain}), and "
                 f"pipeline stages across machines need a scale-out NIC, which the {hw.id} spec does not have")
        reachable = [(t, p) for t, p in layouts if t * p <= domain]
    else:
        limit, reachable = "; no layout up to 16 pipeline stages fits", layouts
    for fmt, weights in narrower:
        fits = next(((t, p) for t, p in reachable if holds(t, p, weights)), None)
        if fits is not None:
            at = f"tp={fits[0]}" + (f" with pp={fits[1]}" if fits[1] > 1 else "")
            return f"{limit}; a narrower weight format would fit: {_weights_option(fmt)} as {at}"
    if not narrower or not reachable:
        return f"{limit}: use a GPU with more memory"
    fmt, weights = narrower[-1]
    most = max(t * p for t, p in reachable)
    per_gpu = weights * par.tp * par.pp / most
    return (f"{limit}; even {fmt} weights, {per_gpu * most / 1e9:,.0f} GB over {most} GPUs ({per_gpu / 1e9:,.1f} GB "
            f"each), leave no room for one sequence: use a GPU with more memory")


def _usable(plan: MemoryPlan) -> str:
    """What the engine's share leaves the weights, in its own terms."""
    if plan.sizing == "static":
        share = plan.capacity - plan.reserve
        return (f"{share / 1e9:.1f} GB holds weights and KV cache (the engine's share, {share / plan.capacity:.3f} of "
                f"{plan.capacity / 1e9:.1f} GB; it reserves the rest)")
    return f"{plan.budget / 1e9:.1f} GB is usable ({plan.capacity / 1e9:.1f} GB x utilization)"


def _larger_slice(hw: HardwareSpec, need: float, utilization: float) -> str:
    """What fits instead of a device that is too small: the smallest MIG slice of the same GPU
    that holds ``need`` bytes at ``utilization``, else a narrower format or a larger device."""
    rest = "a narrower weight format or a device with more memory"
    parent_id, _, profile = hw.id.partition(":")
    if not profile:
        return f"use {rest}"
    from ..specs.catalog import load_hardware

    parent = load_hardware(parent_id)
    sizes = sorted((p.memory.si, p.name) for p in (parent.mig.profiles if parent.mig else ()))
    fits = next((name for memory, name in sizes if need <= memory * utilization), None)
    if fits is not None:
        return f"use {parent_id}:{fits} (the smallest slice that holds it), {rest}"
    if sizes:
        return f"no slice of {parent_id} holds it (the largest is {sizes[-1][1]}): use {rest}"
    return f"use a larger slice, {rest}"
