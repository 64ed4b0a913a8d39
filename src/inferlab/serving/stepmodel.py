"""A fast stand-in for the core's step time, for iteration-level simulation.

An in-flight-batching engine runs thousands of *mixed* iterations (decode tokens of the
running requests plus prefill chunks), each with its own mix of contexts. Calling the
full op graph per iteration would be too slow for sweeps, so this module asks the core
once per deployment and keeps what an iteration needs:

- the non-attention ops (projections, MLP/experts, norms, collectives) as a table over
  the iteration's token count, and the LM head over the rows that produce logits;
- each attention op's per-pair FLOPs and per-token bytes, its attention timed by the core's rule
  on the *sums* over its requests: ``max(FLOPs / min(rate, achievable), bytes / (bandwidth x efficiency)) + floors``.

With attention data parallelism each of the ``g`` ranks runs attention and the layers
around it on its own requests, and the ranks meet at every MoE layer (the all-to-all), so
an iteration lasts as long as its busiest rank. Decoding sequences spread evenly; a prompt
is prefilled whole on the rank that holds it, so an iteration with one prefill chunk runs
that chunk's attention and projections on one rank while the others wait (SGLang and
TensorRT-LLM assign each request to one rank); the routed experts' share stays even.

An engine that captures CUDA graphs for decode batches only issues an iteration with prompt
tokens from Python, kernel by kernel, lasting at least the host's issue time of the prefill graph's
kernels (:func:`~inferlab.core.timing.eager_floor`), unless piecewise CUDA graphs hold it (at most
``prefill_graph_tokens`` tokens, decodes included); decode-only iterations replay a graph up to the
largest captured batch (``graph_max_batch``) and beyond it run eagerly, at least the host's issue
time of the decode graph's kernels. A uniform decode step matches :func:`~inferlab.techniques.step.decode`.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from ..core.graph import Step
from ..core.ops import Attention
from ..core.quantization import achievable_flops_per_s, tensor_flops_per_s
from ..core.timing import MLA_HEAD_TILE, eager_floor, mla_decode_flops_per_s, mla_tile_fill, on_mla_tiles
from ..techniques.serving_overhead import eager_prefill_s, serving_iteration_s
from ..techniques.step import ResolvedDeployment, run_step
from .iteration import busiest_rank

#: Iteration times :class:`StepModel` keeps by their sums before it starts afresh.
MEMO_SIZE = 1 << 16


@dataclass(frozen=True)
class AttentionCosts:
    """One attention op (one layer group) on one GPU, per repetition; ``ceiling``: the part's measured best
    (``inf``: none published); ``heads``: MLA decode's on tiles (``peak``: its full-tile rate), else 0."""

    count: float
    window: float
    flops_per_pair: float
    kv_bytes_per_token: float
    act_bytes_per_query: float
    peak: float
    heads_kv: float
    ceiling: float = float("inf")
    heads: float = 0.0


class StepModel:
    """Iteration time of one replica of ``dep`` [s].

    Parameters
    ----------
    dep : ResolvedDeployment
    max_tokens : int
        Largest iteration (decode tokens + prefill chunk) to tabulate.

    Notes
    -----
    With ``pp`` pipeline stages an engine keeps ``pp`` batches in flight, one per stage
    (vLLM's virtual engines, TensorRT-LLM's micro-batches): each batch's iteration passes
    every stage in turn, so it takes ``pp`` stage times (``1/pp`` of the layers each, plus
    the hand-off to the next stage) while the stages work on the others. The model times
    one such batch's iteration; :func:`inferlab.serve` runs ``pp`` of them side by side.
    """

    prompt_gpu_s: float = 0.0  #: a request's GPU work beside its tokens [s] (the engine adds it: Engine._plan_prefill)

    def __init__(self, dep: ResolvedDeployment, max_tokens: int, overlap_host: bool = False,
                 graph_max_batch: int | None = None, prefill_graph_tokens: int | None = None):
        self.dep = dep
        self.groups = float(dep.parallel.attention_groups)
        # a busy attention-DP rank reads the tables at g times its tokens (replica tokens, as built)
        grid = np.unique(np.round(np.geomspace(1, max(max_tokens * self.groups, 2), 96)))
        stages = dep.parallel.pp
        if stages > 1:  # one batch per stage: no splitting into micro-batches
            dep = replace(dep, parallel=replace(dep.parallel, micro_batches=1))
        step = run_step(dep, Step.decode(grid, np.zeros_like(grid)))
        lin = np.zeros_like(grid)
        shared = np.zeros_like(grid)  # routed experts: every rank's tokens after the dispatch
        head = np.zeros_like(grid)
        attention: list[AttentionCosts] = []
        hw, prof = dep.hardware, dep.profile
        for t in step.times:
            total = np.broadcast_to(t.total_s, grid.shape) * stages
            if isinstance(t.op, Attention):
                attention.append(self._costs(t.op, stages))
            elif t.op.name in ("lm_head", "all_gather_logits"):
                head = head + total
            elif self.groups > 1 and t.op.role == "routed_expert":
                shared = shared + total
            else:
                lin = lin + total
        self.attention = tuple(attention)
        # prefill's attention as the prefill graph has it (MLA decompresses its latents for prompts,
        # where decode multiplies in the 576-wide latent space), at prefill's precision
        prefill = run_step(dep, Step.prefill(np.ones(1), np.full(1, 16.0)))
        pre = tuple(self._costs(t.op, stages) for t in prefill.times if isinstance(t.op, Attention))
        self.prefill_attention = pre if len(pre) == len(attention) else self.attention
        # tables over the iteration's tokens as plain lists (numpy's per-call overhead would dominate)
        self._grid_list, self._linear_list, self._head_list = grid.tolist(), lin.tolist(), head.tolist()
        self._shared_list = shared.tolist() if self.groups > 1 else None
        # a decode-only iteration is balanced over the ranks: both tables at its tokens
        self._balanced_list = (lin + shared).tolist() if self.groups > 1 else self._linear_list
        self._all_full = all(a.window == np.inf for a in self.attention)
        self._decode_tables: dict[float, float] = {}  # time_decode's table part by batch size
        # time_decode_sum and time_sums by their arguments: an engine meets the same mixes again (pure)
        self._by_sums: dict[tuple, Any] = {}
        a = prof.attention
        self.bandwidth = hw.memory_bandwidth.si
        self.floor = prof.kernel_floor_s + a.fixed_s
        self.per_sequence_head_s = a.per_sequence_head_s
        self.fractions = {ph: (a.peak_fraction(ph), a.bandwidth_fraction(ph)) for ph in ("prefill", "decode")}
        # step_overhead_s runs beside the GPU's work under overlap; the serving iteration's stays exposed
        self.step_overhead_s = prof.step_overhead_s + serving_iteration_s(self.dep)
        self.hidden_host_s, self.request_overhead_s = prof.step_overhead_s if overlap_host else 0.0, prof.request_overhead_s
        # an iteration with prompt tokens runs eagerly where the engine graphs decode only, beyond its
        # piecewise graphs' tokens: its kernels are the prefill graph's (MLA's prefill path differs)
        self.eager_s, self.prefill_graph_tokens = 0.0, float(prefill_graph_tokens or 0)
        self.graph_max_batch, self.eager_decode_s = np.inf if graph_max_batch is None else float(graph_max_batch), 0.0
        if prof.eager_host_per_kernel_s:
            self.eager_s = eager_prefill_s(dep, prefill)
            if graph_max_batch is not None:
                decode = run_step(dep, Step.decode(np.ones(1), np.full(1, 16.0)))
                self.eager_decode_s = eager_floor(decode.kernels, prof, "decode") * stages

    def _costs(self, op: Attention, stages: int = 1) -> AttentionCosts:
        hw = self.dep.hardware
        mla = on_mla_tiles(op, hw)
        return AttentionCosts(
            count=float(op.count) * stages, window=float(op.window), heads=float(op.heads) * mla,
            flops_per_pair=float(np.max(op.flops_per_pair)), kv_bytes_per_token=float(np.max(op.kv_bytes_per_token)),
            act_bytes_per_query=float(np.max(op.act_bytes_per_query)),
            peak=mla_decode_flops_per_s(hw, 1.0, MLA_HEAD_TILE) if mla else tensor_flops_per_s(hw, op.precision),
            heads_kv=float(op.sequence_heads), ceiling=achievable_flops_per_s(hw, op.precision))

    def _table(self, values: list[float], tokens: float) -> float:
        """Linear interpolation in a table over :attr:`grid` (clamped at its ends)."""
        if tokens <= 0:
            return 0.0
        grid = self._grid_list
        j = bisect.bisect_right(grid, tokens)
        if j <= 0:
            return values[0]
        if j >= len(grid):
            return values[-1]
        g0, g1 = grid[j - 1], grid[j]
        return values[j - 1] + (values[j] - values[j - 1]) * (tokens - g0) / (g1 - g0)

    def _attention_s(self, phase: str, pairs: Sequence[float], kv_tokens: Sequence[float], queries: float,
                     seqs: float) -> float:
        """One attention kernel per layer over a set of sequences (sums already taken)."""
        if seqs <= 0:
            return 0.0
        (pf, bf), g, total = self.fractions[phase], self.groups, 0.0
        for j, a in enumerate(self.prefill_attention if phase == "prefill" else self.attention):
            flops = a.flops_per_pair * pairs[j] / g
            moved = (a.kv_bytes_per_token * kv_tokens[j] + a.act_bytes_per_query * queries) / g
            share = float(mla_tile_fill(a.heads, queries / seqs)) if a.heads else pf
            t = max(flops / (a.peak * share), flops / a.ceiling, moved / (self.bandwidth * bf))
            total += a.count * (t + self.floor + self.per_sequence_head_s * seqs / g * a.heads_kv)
        return total

    def spans(self, context: np.ndarray, new: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per attention op: summed (query, key) pairs and cached tokens read, over sequences."""
        c, q = np.asarray(context, float), np.asarray(new, float)
        pairs, reads = [], []
        full: tuple[float, float] | None = None
        for a in self.attention:
            w = a.window
            if w == np.inf:  # full attention: every query sees its whole prefix
                if full is None:
                    full = (float(np.add.reduce(q * c + q * (q + 1.0) / 2.0)), float(np.add.reduce(c + q)))
                pairs.append(full[0])
                reads.append(full[1])
                continue
            n1 = np.clip(np.minimum(w - c, q), 0.0, None)
            pairs.append(float(np.sum(n1 * c + n1 * (n1 + 1.0) / 2.0 + (q - n1) * np.minimum(w, c + q))))
            reads.append(float(np.sum(np.minimum(c + q, w))))
        return np.asarray(pairs), np.asarray(reads)

    def verify_spans(self, context: np.ndarray, new: float) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`spans` of ``new`` tokens per sequence; with full attention only, from the
        sum of the contexts: ``new sum(c) + n new (new + 1) / 2`` pairs, ``sum(c) + n new`` reads."""
        if not self._all_full:
            return self.spans(context, np.full(len(context), new))
        c, n = float(np.add.reduce(context)), float(len(context))
        m = len(self.attention)
        return [new * c + n * new * (new + 1.0) / 2.0] * m, [c + n * new] * m  # type: ignore[return-value]

    def decode_spans(self, context: np.ndarray) -> np.ndarray:
        """:meth:`spans` of a decode step (one new token per sequence): pairs equal reads,
        ``sum(min(c + 1, W))``, computed once per distinct window."""
        c = np.asarray(context, float)
        if self._all_full:
            return [float(np.add.reduce(c)) + len(c)] * len(self.attention)  # type: ignore[return-value]
        by_window: dict[float, float] = {}
        out = np.empty(len(self.attention))
        for j, a in enumerate(self.attention):
            w = a.window
            if w not in by_window:
                by_window[w] = (float(np.add.reduce(c)) + len(c)) if w == np.inf else \
                    float(np.add.reduce(np.minimum(c + 1.0, w)))
            out[j] = by_window[w]
        return out

    def time_decode(self, context: np.ndarray, new: float = 1.0) -> tuple[float, float]:
        """A decode-only iteration, and the same with every context one token longer: every
        sequence of ``context`` [token] runs ``new`` tokens (``k + 1`` in a speculative verify
        pass) with a logit row each; each equals :meth:`time` with no prefill."""
        d = float(len(context))
        if not d:
            return self.step_overhead_s, self.step_overhead_s
        if new != 1.0:
            return self._time_verify(np.asarray(context, float), float(new))
        t = self._decode_tables.get(d)
        if t is None:  # the tables at a batch size, once
            t = self._decode_tables[d] = self._table(self._balanced_list, d) + self._table(self._head_list, d)
        spans = self.decode_spans(context)
        # one token later every span grows by one (a window caps it: recompute then)
        after = [x + d for x in spans] if self._all_full else self.decode_spans(context + 1.0)
        return (self._with_host(self._graphless(d, t + self._attention_s("decode", spans, spans, d, d))),
                self._with_host(self._graphless(d, t + self._attention_s("decode", after, after, d, d))))

    def time_decode_sum(self, n: int, total: float) -> tuple[float, float]:
        """:meth:`time_decode` of ``n`` sequences (one new token each) holding ``total`` cached
        tokens [token] together; only with full attention (:attr:`full_attention`), where the
        sum is all the spans depend on: ``total + n``."""
        if (known := self._by_sums.get((n, total))) is not None:
            return known
        if not n:
            return self.step_overhead_s, self.step_overhead_s
        d = float(n)
        t = self._decode_tables.get(d)
        if t is None:
            t = self._decode_tables[d] = self._table(self._balanced_list, d) + self._table(self._head_list, d)
        spans = [total + n] * len(self.attention)
        after = [x + d for x in spans]
        times = (self._with_host(self._graphless(d, t + self._attention_s("decode", spans, spans, d, d))),
                 self._with_host(self._graphless(d, t + self._attention_s("decode", after, after, d, d))))
        self._remember((n, total), times)
        return times

    def _graphless(self, d: float, gpu_s: float) -> float:
        """A decode-only iteration of ``d`` sequences [s]: a graph's ``gpu_s``, or beyond the largest
        graph (on one rank) at least the host's issue time of the decode graph's kernels."""
        return max(gpu_s, self.eager_decode_s) if math.ceil(d / self.groups) > self.graph_max_batch else gpu_s

    def _prompt_floor(self, tokens: float) -> float:
        """Least time of an iteration of ``tokens`` with prompt tokens [s]: the eager floor, beyond piecewise graphs."""
        return 0.0 if tokens <= self.prefill_graph_tokens else self.eager_s

    def _remember(self, key: tuple, value: Any) -> None:
        if len(self._by_sums) >= MEMO_SIZE:  # lengths that seldom repeat: start afresh
            self._by_sums.clear()
        self._by_sums[key] = value

    def time_sums(self, n_decode: int, decode_total: float, prefill_tokens: float, prefill_pairs: float,
                  prefill_reads: float, n_prefill: int, logits: float) -> float:
        """:meth:`time` from sums over the sequences: ``n_decode`` decoding ones holding
        ``decode_total`` cached tokens, ``n_prefill`` prompts' chunks of ``prefill_tokens``
        tokens with ``prefill_pairs`` (query, key) pairs and ``prefill_reads`` cached tokens read.
        Only with full attention, one decode token per sequence and no attention-DP ranks
        (:attr:`full_attention`, ``groups == 1``), where these sums are all :meth:`time` reads."""
        key = (n_decode, decode_total, prefill_tokens, prefill_pairs, prefill_reads, n_prefill, logits)
        if (known := self._by_sums.get(key)) is not None:
            return known
        d = float(n_decode)
        p = prefill_tokens
        t = self._table(self._balanced_list, d + p) + self._table(self._head_list, logits)
        if d:
            spans = [decode_total + n_decode] * len(self.attention)
            t += self._attention_s("decode", spans, spans, d, d)
        if p:
            m = len(self.attention)
            t += self._attention_s("prefill", [prefill_pairs] * m, [prefill_reads] * m, p, float(n_prefill))
            t = max(t, self._prompt_floor(d + p))
        elif d:
            t = self._graphless(d, t)
        elapsed = self._with_host(t)
        self._remember(key, elapsed)
        return elapsed

    @property
    def full_attention(self) -> bool:
        """Whether every attention op sees the whole context (no sliding window)."""
        return self._all_full

    def _with_host(self, gpu_s: float) -> float:
        """An iteration of ``gpu_s`` of GPU work plus the host's [s]. Without overlap the host
        schedules the next iteration after this one ends: ``gpu + step_overhead + serving`` (the
        serving iteration's own work, :func:`~inferlab.techniques.serving_overhead.serving_iteration_s`).
        An overlap scheduler (TensorRT-LLM's PyTorch runtime, SGLang; both on by default) prepares
        iteration ``n + 1`` on the CPU while the GPU runs ``n``, so the host's part shows only
        where it is the longer: ``max(gpu, step_overhead) + serving``.
        """
        if self.hidden_host_s:
            return max(gpu_s, self.hidden_host_s) + (self.step_overhead_s - self.hidden_host_s)
        return gpu_s + self.step_overhead_s

    def _time_verify(self, context: np.ndarray, new: float) -> tuple[float, float]:
        """:meth:`time_decode` with ``new`` tokens per sequence."""
        d = float(len(context))
        queries = d * new
        t = self._table(self._balanced_list, queries) + self._table(self._head_list, queries)
        pairs, reads = self.verify_spans(context, new)
        if self._all_full:  # one token later each sequence's queries see one more key
            after = ([x + new * d for x in pairs], [x + d for x in reads])
        else:
            after = self.verify_spans(context + 1.0, new)
        return (self._with_host(self._graphless(d, t + self._attention_s("decode", pairs, reads, queries, d))),
                self._with_host(self._graphless(d, t + self._attention_s("decode", *after, queries, d))))

    def time(self, *, decode_context: np.ndarray, prefill_context: np.ndarray, prefill_tokens: np.ndarray,
             logits: float, decode_new: float = 1.0) -> float:
        """One iteration: decode tokens of ``decode_context`` sequences and prefill chunks.

        Parameters
        ----------
        decode_context : array [token]
            Cached tokens of each decoding sequence.
        prefill_context, prefill_tokens : arrays [token]
            Cached tokens and chunk length of each sequence being prefilled.
        logits : float
            Rows that produce logits (decoding sequences plus prompts that finish).
        decode_new : float [token]
            Tokens each decoding sequence runs through the model: 1, or ``k + 1`` for the
            verify pass of speculative decoding (the last token and ``k`` drafts).
        """
        d = float(len(decode_context))
        p = float(np.add.reduce(prefill_tokens)) if len(prefill_tokens) else 0.0
        queries = d * decode_new
        if p and self._shared_list is not None:
            return self._with_host(max(self._time_busiest_rank(decode_context, prefill_context, prefill_tokens,
                                                               logits, decode_new), self._prompt_floor(queries + p)))
        t = self._table(self._balanced_list, queries + p) + self._table(self._head_list, logits)
        t += self._decode_attention_s(decode_context, decode_new)
        if p:
            if len(prefill_tokens) == 1 and self._all_full:  # one prompt (a closed loop's usual): no arrays
                q, c = float(prefill_tokens[0]), float(prefill_context[0])
                pairs, reads = [q * c + q * (q + 1.0) / 2.0] * len(self.attention), [c + q] * len(self.attention)
            else:
                pairs, reads = self.spans(prefill_context, prefill_tokens)
            t += self._attention_s("prefill", pairs, reads, p, float(len(prefill_tokens)))
            t = max(t, self._prompt_floor(queries + p))
        elif d:
            t = self._graphless(d, t)
        return self._with_host(t)

    def _decode_attention_s(self, decode_context: np.ndarray, decode_new: float) -> float:
        """Attention of an iteration's decoding sequences (``decode_new`` tokens each)."""
        d = float(len(decode_context))
        if not d:
            return 0.0
        if decode_new == 1.0:
            spans = self.decode_spans(decode_context)
            return self._attention_s("decode", spans, spans, d, d)
        pairs, reads = self.verify_spans(decode_context, float(decode_new))
        return self._attention_s("decode", pairs, reads, d * decode_new, d)

    def _time_busiest_rank(self, decode_context: np.ndarray, prefill_context: np.ndarray,
                           prefill_tokens: np.ndarray, logits: float, decode_new: float) -> float:
        """GPU time of a mixed iteration under attention DP: the busiest of the ``g`` ranks.

        Prompts go to ranks largest first, each to the least loaded (:func:`~.iteration.busiest_rank`);
        decoding sequences and logit rows split evenly. The rank tables are indexed in replica
        tokens (``g`` times a rank's), as built.
        """
        g = self.groups
        order = busiest_rank(np.asarray(prefill_tokens, float), int(g))
        mine_tokens = np.asarray(prefill_tokens, float)[order]
        mine_context = np.asarray(prefill_context, float)[order]
        p_all = float(np.add.reduce(prefill_tokens))
        p_mine = float(np.add.reduce(mine_tokens))
        d = float(len(decode_context))
        queries = d * decode_new
        t = (self._table(self._linear_list, queries + p_mine * g) + self._table(self._shared_list, queries + p_all)
             + self._table(self._head_list, logits))
        t += self._decode_attention_s(decode_context, decode_new)
        pairs, reads = self.spans(mine_context, mine_tokens)
        # _attention_s spreads its sums over the g ranks: these are one rank's alone
        t += self._attention_s("prefill", pairs * g, reads * g, p_mine * g, float(len(mine_tokens)) * g)
        return t
