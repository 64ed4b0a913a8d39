"""Plain-language diagnosis of an estimate: what bounds each phase and what would move it."""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING, Any

import numpy as np

from ..core.memory import recurrent_state_per_gpu
from ..core.quantization import achievable_flops_per_s, derived_rate, tensor_flops_per_s
from ..core.timing import eager_floor
from ..techniques.step import beyond_graphs
from ..engines.memory_share import iteration_tokens, prefill_chunks
from ..engines.scheduler import default_scheduler, unused_limits_notes
from ..engines.state_pool import state_pool_limits
from ..engines.window_pool import held_windows
from ..errors import InferlabError, option
from ..results.render import pretty
from ..units import Q
from .interval import interval_lines
from .table_notes import whole_prompt_notes

if TYPE_CHECKING:
    from .result import Estimate


def _bound_shares(rows: list[dict]) -> dict[str, float]:
    shares: dict[str, float] = defaultdict(float)
    for r in rows:
        shares[r["bound"]] += r["share"]
    return dict(sorted(shares.items(), key=lambda kv: -kv[1]))


def _per_step_words(est: Estimate, step: Any, phase: str, point: int) -> str:
    """What a phase's time is of: one decode step, or the batch's prompts prefilled together,
    with the iterations of the engine's token budget they take where more than one."""
    if phase != "prefill":
        return "per step"
    at = _picker(est, point)
    batch, tokens = at(step.step.batch), at(step.step.new_tokens)
    words = f"for the batch's prompts together ({batch * tokens:,.0f} tokens a replica"
    if est.max_num_tokens:
        par = est.deployment.parallel
        budget = iteration_tokens(est.scheduler or default_scheduler(est.engine), par, est.max_num_tokens)
        chunks = float(prefill_chunks(batch, tokens, par, budget))
        if chunks > 1:
            return words + f", {chunks:.0f} iterations of the {budget:,.0f}-token budget: TTFT sums them)"
    return words + ")"


def _phase_text(est: Estimate, phase: str, point: int) -> list[str]:
    rows = est.op_table(phase, point)
    step = est.prefill_step if phase == "prefill" else est.decode_step
    hw = est.deployment.hardware
    total = float(np.ravel(step.time_s)[point])
    shares = _bound_shares(rows)
    main = next(iter(shares))
    flops = sum(r["flops"] for r in rows)
    moved = sum(r["bytes"] for r in rows)
    prec = next((r["precision"] for r in rows if r["kind"] == "gemm"), "bf16")
    # the rate the ops are timed at (derived where the datasheet does not list it, as on Rubin
    # CPX: explain()'s "tensor rate" line), or where the part sustains less than its peak, its own ridge
    ridge = min(tensor_flops_per_s(hw, prec), achievable_flops_per_s(hw, prec)) / hw.memory_bandwidth.si
    intensity = flops / moved if moved else float("inf")
    ops_s = sum(r["time_s"] for r in rows)
    # With pipeline stages the rows are one stage's micro-batch: no per-step remainder to show.
    overhead = total - ops_s if est.deployment.parallel.pp == 1 else 0.0
    host = _eager_host_s(est, phase, point)
    if host > ops_s:
        if phase == "decode" and est.deployment.cuda_graphs and est.deployment.parallel.pp == 1:
            total += host - ops_s  # the graphed step's time holds the GPU's work: the eager one lasts the issue time
        why = "beyond the engine's largest CUDA graph, " if phase == "decode" and est.deployment.cuda_graphs else ""
        pieces = getattr(est, "prefill_graph_tokens", None)
        if phase == "prefill" and pieces is not None:  # graphs on and not graphed: its chunk exceeds N
            why = (f"longer than its piecewise CUDA graphs' {pieces:,} tokens (prefill_graph_tokens), "
                   if est.deployment.cuda_graphs else "CUDA graphs off, piecewise ones with them, ")
        main_text = (f"host-bound (run eagerly, {why}the engine issues {step.kernels:,.0f} kernels, "
                     f"{pretty(Q(host, 's'))}, while the GPU's work takes {pretty(Q(ops_s, 's'))})")
        overhead = total - host if overhead > 0 else 0.0
    else:
        main_text = f"{main}-bound ({shares[main]:.0%} of op time in {main}-bound ops)"
    lines = [
        f"{phase}: {pretty(Q(total, 's'))} {_per_step_words(est, step, phase, point)}, {main_text}"
        + (f"; step overhead {pretty(Q(overhead, 's'))}" if overhead > 0 else ""),
        f"  {flops / 1e12:.3g} TFLOP and {moved / 1e9:.3g} GB per GPU: intensity {intensity:.0f} FLOP/B vs the "
        f"{prec} ridge point {ridge:.0f} FLOP/B of {hw.id}"
        + (" (below: memory-bound territory)" if intensity < ridge else " (above: compute-bound territory)"),
    ]
    if phase == "prefill" and _prefill_graphed(est, point):
        skipped = eager_floor(step.kernels, est.deployment.profile)
        lines.append(f"  runs in piecewise CUDA graphs (iterations of up to {est.prefill_graph_tokens:,} tokens, "
                     f"prefill_graph_tokens): the host's issue time of its {step.kernels:,.0f} kernels "
                     f"({pretty(Q(skipped, 's'))}) is not paid")
    top = sorted(rows, key=lambda r: -r["time_s"])[:3]
    lines.append("  costliest ops: " + "; ".join(
        f"{r['op']} [{r['group']}] {r['share']:.0%} ({r['bound']}"
        + (f", {r['intensity']:.0f} FLOP/B)" if np.isfinite(r["intensity"]) else ")") for r in top))
    return lines


def _eager_host_s(est: Estimate, phase: str, point: int) -> float:
    """The host's issue time of an eagerly run step: a prefill step of an engine that graphs
    decode only, a decode step of more sequences than its largest CUDA graph (0 otherwise)."""
    dep = est.deployment
    if phase == "prefill":  # none where piecewise CUDA graphs hold its chunks
        return 0.0 if _prefill_graphed(est, point) else eager_floor(est.prefill_step.kernels, dep.profile)
    batch = float(np.ravel(np.broadcast_to(est.wave_batch, np.shape(est.ttft_s)))[point])
    if dep.cuda_graphs and not bool(beyond_graphs(dep, batch, est.graph_max_batch)):
        return 0.0  # replayed from a graph
    return eager_floor(est.decode_step.kernels, dep.profile, "decode")


def _prefill_graphed(est: Estimate, point: int) -> bool:
    """Whether the prefill step's chunks run in piecewise CUDA graphs at ``point``."""
    graphed = np.broadcast_to(getattr(est, "prefill_graphed", False), np.shape(est.ttft_s))
    return bool(np.ravel(graphed)[point])


def _levers(est: Estimate, point: int) -> list[str]:
    decoding = float(np.ravel(np.broadcast_to(est.osl, np.shape(est.ttft_s)))[point]) > 1
    decode = _bound_shares(est.op_table("decode", point)) if decoding else {"none": 1.0}
    prefill = _bound_shares(est.op_table("prefill", point))
    out = []
    decode_ops = sum(r["time_s"] for r in est.op_table("decode", point)) if decoding else 0.0
    beyond = decoding and est.deployment.cuda_graphs and _eager_host_s(est, "decode", point) > decode_ops
    if next(iter(decode)) == "memory":
        out.append("decode is memory-bound: fewer bytes per step move it (FP8/FP4 weights, FP8 KV cache)"
                   + ("" if beyond else ", and so does a larger batch, which reuses each weight read for more tokens"))
    prefill_ops = sum(r["time_s"] for r in est.op_table("prefill", point))
    if _eager_host_s(est, "prefill", point) > prefill_ops:
        pieces = getattr(est, "prefill_graph_tokens", None)
        hold = (f"CUDA graphs on (prefill_graph_tokens {pieces:,} acts only with them)"
                if pieces is not None and not est.deployment.cuda_graphs
                else f"piecewise CUDA graphs of more than its {pieces:,} tokens (a larger prefill_graph_tokens)"
                if pieces is not None else "piecewise CUDA graphs holding its chunks (prefill_graph_tokens, "
                "--prefill-graph-tokens: SGLang's --enable-piecewise-cuda-graph, on by default in its later "
                "releases; TensorRT-LLM's torch_compile_config)")
        out.append(f"prefill runs eagerly and the host issuing its kernels is the longer: {hold} or an engine that "
                   "graphs prefill (vLLM) shorten it")
    if beyond:  # a larger batch stays eager: the lever is the graphs' size
        batch = float(np.ravel(np.broadcast_to(est.wave_batch, np.shape(est.ttft_s)))[point])
        out.append(f"decode runs eagerly, its batch of {batch:,.0f} beyond the engine's largest CUDA graph"
                   + (f" ({est.graph_max_batch:,.0f})" if getattr(est, "graph_max_batch", None) else "")
                   + ", and the host issuing its kernels is the longer: larger graphs (--graph-max-batch: "
                   "TensorRT-LLM's cuda_graph_config max_batch_size, SGLang's --cuda-graph-max-bs) or a batch "
                   "within them shorten it; a larger batch does not")
    if next(iter(decode)) == "overhead" or next(iter(prefill)) == "overhead":
        out.append("kernel and step overheads dominate: CUDA graphs, fewer, fused kernels"
                   + (" help" if beyond else " or a larger batch help"))
    if next(iter(prefill)) == "compute":
        out.append(_compute_lever(est, point))
    if "communication" in (next(iter(decode)), next(iter(prefill))) or decode.get("communication", 0) > 0.2:
        out.append("all-reduces take a large share: a smaller TP or a faster link (NVLink vs PCIe) helps")
    waves = float(np.ravel(est.waves)[point])
    if waves > 1:
        shape = np.shape(est.ttft_s)
        wave = float(np.ravel(np.broadcast_to(est.wave_batch, shape))[point])
        held = float(np.ravel(np.broadcast_to(est.memory.max_sequences, shape))[point])  # a replica's, as the wave
        pools = state_pool_limits(est.deployment, est.engine, est.memory)
        slots, kv = (float(np.ravel(np.broadcast_to(x, shape))[point]) for x in pools) if pools else (np.inf, np.inf)
        each = ' per replica' if est.deployment.parallel.dp > 1 else ''
        if wave < held and wave >= min(slots, kv):  # SGLang's two pools (engines.state_pool) hold fewer
            which = "pool of linear-attention states" if slots <= kv else "KV pool, beside its pool of states,"
            more = "a larger state pool (in serving: --mamba-full-memory-ratio)" if slots <= kv else \
                "a smaller state pool (in serving: --mamba-full-memory-ratio)"
            out.append(f"the engine's {which} runs the batch in {waves:.0f} waves of {wave:.0f}{each}; {more} or a "
                       "smaller batch removes the waiting")
        elif wave < held:  # the KV pool holds more: the sequence limit splits the batch
            out.append(f"the engine's sequence limit (max_num_seqs) runs the batch in {waves:.0f} waves of "
                       f"{wave:.0f}{' per replica' if est.deployment.parallel.dp > 1 else ''}; a higher limit (the "
                       f"KV cache holds {held:.0f} sequences) or a smaller batch removes the waiting")
        else:
            out.append(f"the batch's KV cache does not fit: it runs in {waves:.0f} waves; FP8 KV, more GPUs or a "
                       "smaller batch remove the waiting")
    return out


#: Quality risk of each reduced-precision choice, from least to most (weights < activations
#: < KV cache): weights are calibrated offline, activations vary per input, and KV-cache
#: errors accumulate over every later token that attends to them.
_QUALITY = {
    "weights": "weights in {fmt}: low risk with a calibrated checkpoint (per-channel/block scales)",
    "moe_weights": "routed-expert weights in {fmt}: low risk with a calibrated checkpoint (block scales)",
    "attention_weights": "attention weights in {fmt}: low risk with a calibrated checkpoint (per-channel/block scales)",
    "activations": "activations in {fmt}: moderate risk, outliers vary per input; needs per-token or block scales",
    "kv_cache": "KV cache in {fmt}: highest risk of the three, errors reach every later token; check long-context evals",
}


def _quality_notes(est: Estimate) -> list[str]:
    from ..techniques.deployed_precision import checkpoint_precision

    dep = est.deployment
    formats = dep.precision.to_dict()
    shipped = checkpoint_precision(dep.model).to_dict()
    notes = []
    for part, fmt in formats.items():
        if fmt in ("bf16", "fp16", "fp32") or (part == "moe_weights" and (not dep.model.is_moe or fmt == formats["weights"])):
            continue
        if fmt == shipped.get(part) and part != "kv_cache":
            notes.append(f"{_KIND_LABEL[part]} in {fmt}: as the checkpoint ships them (no change from the released model)")
        else:
            notes.append(_QUALITY[part].format(fmt=fmt))
    return notes


_KIND_LABEL = {"weights": "weights", "moe_weights": "routed-expert weights", "attention_weights": "attention weights",
               "activations": "activations", "kv_cache": "KV cache"}


def _technique_lines(est: Estimate, point: int) -> list[str]:
    dep = est.deployment
    par = dep.parallel
    lines = []
    if par.pp > 1:
        from ..techniques.pipeline import bubble_fraction

        bubble = float(np.ravel(bubble_fraction(est.wave_batch, par))[point])
        lines.append(f"pipeline: {par.pp} stages, prefill bubble {bubble:.0%} of stage slots; one stream gains "
                     "no speed from stages, a full pipeline multiplies throughput (op rows are one stage, one micro-batch)")
    if par.ep > 1 or par.attention_dp:
        a2a = sum(r["share"] for r in est.op_table("decode", point) if r["op"].split("/")[-1].startswith("moe_"))
        lines.append(f"experts: {par.ep} expert groups of {par.moe_tp} GPUs"
                     + (", attention data-parallel" + (f" in {par.attention_groups} ranks of {par.attention_tp} GPUs"
                                                      if par.attention_tp > 1 else "")
                        + f", all-to-all dispatch/combine {a2a:.0%} of the decode step"
                        if par.attention_dp else ", tensor-parallel attention")
                     + (f"; busiest group carries {par.expert_imbalance:.2f}x the mean load" if par.expert_imbalance > 1 else ""))
    if par.dp > 1:
        lines.append(f"data parallel: {par.dp} replicas of {par.tp * par.pp} GPUs, each with 1/{par.dp} of the requests")
    if est.speculative is not None:
        spec = est.speculative_step
        at = _picker(est, point)
        lines.append(f"speculative decoding ({est.speculative}): {spec.tokens_per_step:.2f} tokens per target step; "
                     f"drafting takes {at(spec.draft_s) / at(spec.time_s):.0%} of a step; output is identical to "
                     "plain decoding, so quality is unchanged; at large batch (compute-bound) it stops paying")
    if est.prefix_cache is not None:
        from ..techniques.prefix_cache import effective_cached_tokens

        cached = float(np.ravel(effective_cached_tokens(est.isl, est.prefix_cache))[point])
        lines.append(f"prefix cache: about {cached:.0f} of {float(np.ravel(est.isl)[point]):.0f} prompt tokens come "
                     "from the cache (prefill compute saved; their KV stays resident)")
    return lines


def _rate_words(hw: Any, precision: str) -> str | None:
    """How ``hw``'s ``precision`` tensor rate was derived where its spec does not list it (None: listed)."""
    try:
        return derived_rate(hw, precision)[1]
    except InferlabError:  # (not a tensor precision: nothing derived to say)
        return None


def explain(est: Estimate, point: int = 0) -> str:
    """Diagnosis of grid point ``point`` of ``est``."""
    dep = est.deployment
    at = _picker(est, point)
    mem = est.memory
    sp = dep.step_precision
    experts = f", routed experts at {sp.expert_gemm} ({sp.expert_kernel})" if sp.expert_kernel != sp.kernel else ""
    lines = [
        f"{dep.model.id or dep.model.name} on {dep.num_gpus}x {dep.hardware.id} ({dep.parallel}; {dep.precision}, GEMMs at "
        f"{sp.gemm}{experts}, attention at {sp.attention}"
        + (f", decode attention at {sp.decode_attention} over the {dep.precision.kv_cache} KV cache"
           if sp.decode_attention and sp.decode_attention != sp.attention else "")
        + f"), batch {at(est.batch_size):.0f}, "
        f"ISL {at(est.isl):.0f}, OSL {at(est.osl):.0f}; profile {dep.profile.name}",
        f"TTFT {pretty(Q(at(est.ttft_s), 's'))}, TPOT {pretty(Q(at(est.tpot_s), 's'))} "
        f"({1 / at(est.tpot_s):.1f} tok/s per user), {at(est.output_tokens_per_s):.0f} tok/s in all"
        if at(est.tpot_s) > 0 else f"TTFT {pretty(Q(at(est.ttft_s), 's'))}",
    ]
    lines += [f"precision: {note}" for note in dep.precision_notes]
    derived = dict.fromkeys(how for p in dict.fromkeys((sp.gemm, sp.expert_gemm, sp.attention))
                            if p and (how := _rate_words(dep.hardware, p)))
    lines += [f"tensor rate: {how}" for how in derived]
    lines += whole_prompt_notes(est, at(est.isl))
    lines += unused_limits_notes(est.inputs[0].engine.limits()) if est.inputs is not None else []
    if est.long_context and at(est.isl + est.osl) > dep.model.max_position_embeddings:
        lines.append(f"long context: isl + osl = {at(est.isl + est.osl):,.0f} tokens is beyond the "
                     f"{dep.model.max_position_embeddings:,} positions the model was trained for, accepted with "
                     f"{option('allow_long_context', True)} (RoPE scaling assumed); the cost model is unchanged, "
                     "quality past the trained length is not modelled")
    lines += interval_lines(est, point)
    lines += _technique_lines(est, point)
    lines += _phase_text(est, "prefill", point)
    lines += _phase_text(est, "decode", point) if at(est.osl) > 1 else ["decode: none (one output token a request)"]
    lines.append(
        f"memory per GPU: weights {mem.weights / 1e9:.1f} GB, KV cache {at(mem.kv_batch) / 1e9:.2f} GB "
        f"({_kv_per_token(est, point)}), workspace {at(mem.workspace) / 1e9:.2f} GB, reserve "
        f"{mem.reserve / 1e9:.1f} GB of {mem.budget / 1e9:.1f} GB usable"
        + (f", the KV pool {mem.kv_fraction:.0%} of what they leave ({at(mem.kv_budget) / 1e9:.1f} GB)"
           if mem.kv_fraction < 1.0 else "")
        + (f" (the reserve the engine keeps outside its share of {1 - mem.reserve / mem.capacity:.3f} for weights "
           "and KV cache, activations and graphs inside it)" if mem.sizing == "static" else "")
        + f"; up to {at(mem.max_sequences):.0f} sequences fit" + _pool_limit(est, point))
    quality = _quality_notes(est)
    if quality:
        lines.append("quality risk of the formats: " + "; ".join(quality))
    levers = _levers(est, point)
    if levers:
        lines.append("what would move the numbers:")
        lines += [f"  - {lever}" for lever in levers]
    return "\n".join(lines)


def _pool_limit(est: Estimate, point: int) -> str:
    """Where the engine splits its memory into a pool of linear-attention states and a KV pool
    (SGLang's, :func:`~inferlab.engines.state_pool.state_pool_limits`) that hold fewer sequences
    than the memory would: how many each holds."""
    pools = state_pool_limits(est.deployment, est.engine, est.memory)
    if not pools:
        return ""
    at = _picker(est, point)
    slots, kv = at(pools[0]), at(pools[1])
    if min(slots, kv) >= at(est.memory.max_sequences):
        return ""
    return (f" in memory, {min(slots, kv):.0f} in the engine's pools (its linear-attention states hold {slots:.0f}, "
            f"its KV pool {kv:.0f})")


def _kv_per_token(est: Estimate, point: int) -> str:
    """KV bytes per token of context as the batch holds them: below the full-attention figure
    where sliding-window or chunked-attention layers keep only their window."""
    mem = est.memory
    at = _picker(est, point)
    context = at(est.isl + est.osl)
    state = recurrent_state_per_gpu(est.deployment.model, est.deployment.parallel)
    if state:  # a hybrid model: its linear-attention layers hold a state a sequence, not a cache a token
        return f"{mem.kv_per_token / 1e3:.1f} kB/token and a {state / 1e6:.1f} MB linear-attention state a sequence"
    held = at(mem.kv_per_sequence) / max(context, 1.0)
    sched = est.scheduler or default_scheduler(est.engine)
    freed, ratio = held_windows(est.deployment.model, sched)
    ratio = ratio if 0.0 < est.deployment.model.kv_share_held_whole(freed) < 1.0 else None
    pool = (f" (the windowed layers in a pool of their own, {ratio:g} of a token for each of the full layers': "
            "SGLang's --swa-full-tokens-ratio)") if ratio is not None else ""
    if held < 0.95 * mem.kv_per_token:
        return (f"{held / 1e3:.1f} kB/token at {context:,.0f} tokens{pool}; {mem.kv_per_token / 1e3:.1f} if every layer "
                "held the whole context")
    model = est.deployment.model
    if freed == () and model.kv_share_held_whole() < 1.0:  # windowed layers kept at every token
        why = (f"{est.engine} keeps the windowed layers of {model.model_type} models whole"
               if model.model_type in sched.whole_window_models else "window_kv empty, no window freed")
        return f"{mem.kv_per_token / 1e3:.1f} kB/token, every layer at every token: {why}"
    return f"{mem.kv_per_token / 1e3:.1f} kB/token"


def _compute_lever(est: Estimate, point: int) -> str:
    """What shortens a compute-bound prefill on this device: a narrower tensor format it runs
    faster (named with its rate), and more devices where they can be joined by TP."""
    hw = est.deployment.hardware
    prec = next((r["precision"] for r in est.op_table("prefill", point) if r["kind"] == "gemm"), "bf16")
    rate = tensor_flops_per_s(hw, prec)
    faster = sorted(((tensor_flops_per_s(hw, p) / rate, str(p)) for p in hw.flops if tensor_flops_per_s(hw, p) > 1.01 * rate),
                    key=lambda f: (-f[0], f[1].startswith("int"), f[1]))  # the float formats first at a tie
    levers = [f"a narrower format runs faster on {hw.id}: "
              + ", ".join(f"{name.upper()} at {ratio:.1f}x the {prec.upper()} rate" for ratio, name in faster[:2])] \
        if faster else []
    if hw.kind == "gpu" and hw.scale_up.kind != "none":
        levers.append("more GPUs (TP) share its FLOPs")
    if not levers:
        return (f"prefill is compute-bound: {hw.id} runs no narrower tensor format faster and joins no other device: "
                "a shorter prompt, a prefix cache or a faster device shortens it")
    return "prefill is compute-bound: " + "; ".join(levers)


def _picker(est: Estimate, point: int) -> Any:
    """A function giving an array's value at grid ``point`` of ``est`` (broadcast to its grid)."""
    return lambda x: float(np.ravel(np.broadcast_to(np.asarray(x, float), np.shape(est.ttft_s)))[point])
