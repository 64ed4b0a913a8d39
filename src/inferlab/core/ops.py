"""Operations of one inference step, described by their shapes.

An op knows its shape (GEMM ``m x k @ k x n``, attention batch/heads/lengths, bytes
of an elementwise pass, message of a collective) and derives FLOPs and bytes by
category from it, so a technique (tensor parallelism, quantization) changes an op by
changing its shape and every cost follows. All shape fields may be numpy arrays that
broadcast over a sweep grid.

Byte categories: ``weight_read``, ``act_read``, ``act_write``, ``kv_read``, ``kv_write``.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Literal

import numpy as np

ArrayLike = np.ndarray | float

class memoized:
    """A computed attribute stored on first access, for immutable objects.

    :class:`functools.cached_property` without its lock (Python 3.11 takes one on every
    first access, which dominates when a search times hundreds of thousands of ops): the
    value lands in the instance ``__dict__`` and shadows this non-data descriptor, so later
    reads are plain attribute lookups. Values over :attr:`MAX_ELEMENTS` elements (a sweep's
    grid) are recomputed instead of kept: holding them would cost more than computing them.
    """

    MAX_ELEMENTS = 4096

    def __init__(self, fn):
        self.fn = fn
        self.name = fn.__name__
        self.__doc__ = fn.__doc__

    def __set_name__(self, owner, name):
        self.name = name

    def __get__(self, obj, cls=None):
        if obj is None:
            return self
        value = self.fn(obj)
        if np.size(value) <= self.MAX_ELEMENTS:
            obj.__dict__[self.name] = value
        return value


OpKind = Literal["gemm", "attention", "elementwise", "collective"]
#: How tensor parallelism splits an op: by output features (column), by input features
#: (row, followed by an all-reduce), by attention heads (per-head GEMMs and attention),
#: by KV heads (replicated once TP exceeds them), a fused QKV projection (query features
#: by column, its ``kv_n`` key/value features by KV heads), by vocabulary, or not at all.
Shard = Literal["column", "row", "heads", "kv_heads", "qkv", "vocab", "replicated", "reduced"]

BYTE_CATEGORIES = ("weight_read", "act_read", "act_write", "kv_read", "kv_write")
#: Role of a collective among the ranks tensor parallelism splits the model over: the graph builds
#: it for one GPU (``group_size`` 1, no cost), tensor parallelism sizes it.
TP_STATISTICS = "tensor_parallel_statistics"


@dataclass(frozen=True)
class Op:
    """Base of all ops: identity, repetition and how it shards."""

    name: str
    count: int = field(kw_only=True, default=1)  # repetitions per step (layers of this group)
    group: str = field(kw_only=True, default="model")  # layer group label, e.g. "full/dense"
    shard: Shard = field(kw_only=True, default="replicated")
    precision: str = field(kw_only=True, default="bf16")  # tensor precision the op computes at
    shard_units: float = field(kw_only=True, default=0.0)  # indivisible units along the split (KV heads)
    role: str = field(kw_only=True, default="")  # what techniques key on, e.g. "routed_expert"

    kind: OpKind = field(init=False, default="elementwise")

    @property
    def flops(self) -> ArrayLike:  # pragma: no cover - overridden
        return 0.0

    def byte_parts(self) -> dict[str, ArrayLike]:  # pragma: no cover - overridden
        return dict.fromkeys(BYTE_CATEGORIES, 0.0)

    @memoized
    def bytes(self) -> ArrayLike:
        """All bytes moved to or from device memory [B] (computed once: ops are immutable)."""
        return sum(self.byte_parts().values())

    @property
    def comm_bytes(self) -> ArrayLike:
        """Bytes sent over the scale-up link by one GPU [B] (collectives only)."""
        return 0.0


@dataclass(frozen=True)
class Gemm(Op):
    """``[m, k] x [k, n]`` matrix multiply.

    ``weight_copies`` distinct weight matrices are read (routed experts: the experts a
    batch touches); ``m`` is then the total rows over all of them. ``kv_n`` of the ``n``
    output features are keys and values (a fused QKV projection, which every engine runs
    as one GEMM); tensor parallelism splits them by KV head, the rest by column.
    """

    m: ArrayLike = 1.0
    n: ArrayLike = 1.0
    k: ArrayLike = 1.0
    weight_bytes_per_element: float = 2.0
    act_bytes_per_element: float = 2.0
    out_bytes_per_element: float = 2.0
    weight_copies: ArrayLike = 1.0
    kv_n: ArrayLike = 0.0
    kernel: str = ""  # efficiency curve key (fp8_block, int4_wo...); empty: the compute precision
    kind: OpKind = field(init=False, default="gemm")

    @memoized
    def flops(self) -> ArrayLike:
        return 2.0 * self.m * self.n * self.k

    @property
    def rows_per_weight(self) -> ArrayLike:
        """Rows of activations per weight matrix: the ``M`` a kernel sees."""
        return self.m / self.weight_copies

    def byte_parts(self) -> dict[str, ArrayLike]:
        return {
            "weight_read": self.weight_copies * self.n * self.k * self.weight_bytes_per_element,
            "act_read": self.m * self.k * self.act_bytes_per_element,
            "act_write": self.m * self.n * self.out_bytes_per_element,
            "kv_read": 0.0,
            "kv_write": 0.0,
        }


@dataclass(frozen=True)
class Attention(Op):
    """Causal self-attention of ``new_tokens`` queries per sequence over the cache.

    ``context`` tokens are already cached; each new token attends to the tokens before
    it and itself, at most ``window`` of them. ``kv_elements`` are cached per token per
    layer (``2 * kv_heads * head_dim``, or the MLA latent) at ``kv_bytes_per_element``.
    ``implementation`` ``naive`` materializes the full ``new_tokens x kv_span`` score matrix
    per head (masked, not skipped: written by QK^T, read and written by softmax, read by
    PV, four passes) at ``score_bytes_per_element``; 4096 x 4096 at FP16 is 33.6 MB.
    ``latent``: MLA's absorbed decode, every head over the one cached latent (its own kernels,
    :func:`~inferlab.core.timing.mla_decode_flops_per_s`).
    """

    batch: ArrayLike = 1.0
    new_tokens: ArrayLike = 1.0
    context: ArrayLike = 0.0
    heads: ArrayLike = 1.0
    kv_heads: ArrayLike = 1.0
    qk_dim: float = 128.0
    v_dim: float = 128.0
    window: float = np.inf
    kv_elements: ArrayLike = 256.0
    kv_bytes_per_element: float = 2.0
    act_bytes_per_element: float = 2.0
    implementation: Literal["flash", "naive"] = "flash"
    score_bytes_per_element: float = 2.0
    latent: bool = False
    kind: OpKind = field(init=False, default="attention")

    @memoized
    def attended_pairs(self) -> ArrayLike:
        """(query, key) pairs per sequence per head, causal and windowed.

        Notes
        -----
        ``sum_{i=1}^{q} min(c + i, W)``: the first ``n1 = clip(W - c, 0, q)`` queries see
        ``c + i`` keys, the rest see ``W``.
        """
        q, c, w = self.new_tokens, self.context, self.window
        if np.ndim(q) == 0 and q == 1:  # a decode step: one query sees min(c + 1, W) keys
            return np.minimum(c + 1.0, w)
        n1 = np.clip(np.minimum(w - c, q), 0.0, None)
        return n1 * c + n1 * (n1 + 1.0) / 2.0 + (q - n1) * np.minimum(w, c + q)

    @memoized
    def kv_span(self) -> ArrayLike:
        """Cached tokens read per sequence: ``min(c + q, W)``."""
        return np.minimum(self.context + self.new_tokens, self.window)

    @memoized
    def flops(self) -> ArrayLike:
        return self.batch * self.attended_pairs * self.flops_per_pair

    @property
    def flops_per_pair(self) -> ArrayLike:
        """FLOPs of one (query, key) pair over the op's heads: ``QK^T`` and ``PV``."""
        return 2.0 * self.heads * (self.qk_dim + self.v_dim)

    @property
    def kv_bytes_per_token(self) -> ArrayLike:
        """Bytes read per cached token of the span [B]."""
        return self.kv_elements * self.kv_bytes_per_element

    @property
    def act_bytes_per_query(self) -> ArrayLike:
        """Activation bytes read and written per new token [B]: its queries in, its outputs out."""
        return self.heads * (self.qk_dim + self.v_dim) * self.act_bytes_per_element

    @property
    def sequence_heads(self) -> ArrayLike:
        """Heads each sequence pays a fixed cost for (the KV heads a GQA decode kernel walks)."""
        return self.kv_heads

    def byte_parts(self) -> dict[str, ArrayLike]:
        tokens = self.batch * self.new_tokens
        act_read = tokens * self.heads * self.qk_dim * self.act_bytes_per_element
        act_write = tokens * self.heads * self.v_dim * self.act_bytes_per_element
        if self.implementation == "naive":
            scores = self.batch * self.heads * self.new_tokens * self.kv_span * self.score_bytes_per_element
            act_read = act_read + 2.0 * scores
            act_write = act_write + 2.0 * scores
        kv_token_bytes = self.kv_elements * self.kv_bytes_per_element
        return {
            "weight_read": 0.0,
            "act_read": act_read,
            "act_write": act_write,
            "kv_read": self.batch * self.kv_span * kv_token_bytes,
            "kv_write": tokens * kv_token_bytes,
        }


#: Tokens per chunk of the chunked Gated DeltaNet kernels (flash-linear-attention's ``chunk_size``).
DELTA_RULE_CHUNK = 64.0


@dataclass(frozen=True)
class RecurrentState(Attention):
    """A linear-attention layer's state update (Gated DeltaNet), as attention over one "token".

    Each sequence keeps ``kv_elements`` bytes of state (``kv_bytes_per_element`` 1: the
    recurrent matrices at their format and the convolution's taps, split with the heads);
    ``heads`` value heads of ``qk_dim x v_dim`` matrices, ``kv_heads`` key heads shared by them
    (tensor parallelism splits both, the state with them). The span is one entry (``window`` 1)
    at any length: a step reads each sequence's state once and writes it back once (``stepwise``,
    a decode step or a speculative verify pass: once for each new token). A
    decode token costs ``7 qk v`` FLOPs a head (decay, ``S^T k``, the rank-one update,
    ``q^T S``); a prompt runs in chunks of :data:`DELTA_RULE_CHUNK` tokens at ``4 qk v + 2 C
    (2 qk + v)`` a token and head (the chunk's state applied and updated, its own
    triangular attention), writing each chunk's starting state (16-bit) and reading it back.

    References
    ----------
    .. [1] Yang, Kautz, Hatamizadeh, "Gated Delta Networks", ICLR 2025, sec. 3 (chunkwise form).
    """

    window: float = 1.0
    kv_bytes_per_element: float = 1.0
    stepwise: bool = False

    @property
    def chunked(self) -> ArrayLike:
        """Where the new tokens run in the chunked form: a prompt's (more than one new token, not
        ``stepwise``); a decode step's, and a speculative verify pass's, run token by token."""
        return np.logical_and(not self.stepwise, np.asarray(self.new_tokens) > 1)

    @property
    def flops_per_pair(self) -> ArrayLike:
        """FLOPs of one new token over the op's heads (the span is one entry: a pair is a token)."""
        k, v = self.qk_dim, self.v_dim
        return self.heads * np.where(self.chunked, 4.0 * k * v + 2.0 * DELTA_RULE_CHUNK * (2.0 * k + v), 7.0 * k * v)

    @property
    def kv_bytes_per_token(self) -> ArrayLike:
        """Bytes a sequence's state moves in a step: read once, written back once."""
        return 2.0 * self.kv_elements * self.kv_bytes_per_element

    @property
    def act_bytes_per_query(self) -> ArrayLike:
        """Per new token: its queries and keys (``kv_heads`` key heads) and values in, its output
        out; in chunks also the chunk-boundary states (16-bit, a matrix per head), written and
        read again: ``1/C`` of them a token."""
        own = 2.0 * (self.kv_heads * self.qk_dim + self.heads * self.v_dim) * self.act_bytes_per_element
        boundary = 2.0 * self.heads * self.qk_dim * self.v_dim * 2.0 / DELTA_RULE_CHUNK
        return own + np.where(self.chunked, boundary, 0.0)

    @property
    def sequence_heads(self) -> ArrayLike:
        """No per-(sequence, head) walk beyond the state's bytes."""
        return 0.0

    def byte_parts(self) -> dict[str, ArrayLike]:
        tokens = self.batch * self.new_tokens
        state = self.kv_elements * self.kv_bytes_per_element
        # token by token, each new token's state is kept (a verify pass rolls back to the accepted one)
        writes = self.new_tokens if self.stepwise else 1.0
        return {
            "weight_read": 0.0,
            "act_read": tokens * self.act_bytes_per_query / 2.0,
            "act_write": tokens * self.act_bytes_per_query / 2.0,
            "kv_read": self.batch * state,
            "kv_write": self.batch * state * writes,
        }


@dataclass(frozen=True)
class Elementwise(Op):
    """A memory-bound pass: norms, residual adds, activation functions, embedding lookup.

    ``own_kernel``: the pass is a kernel of its own in every engine (MoE routing, token
    permutation, MLA's latent norms and rotary embedding), paying a whole kernel's floor;
    otherwise engines fuse it into its neighbours and it pays the share of the floor the
    profile's ``elementwise_floor_fraction`` says.
    """

    elements_read: ArrayLike = 0.0
    elements_written: ArrayLike = 0.0
    bytes_per_element: float = 2.0
    flops_per_element: float = 0.0
    weight_bytes: ArrayLike = 0.0
    own_kernel: bool = False
    kind: OpKind = field(init=False, default="elementwise")

    @memoized
    def flops(self) -> ArrayLike:
        return self.flops_per_element * self.elements_written

    def byte_parts(self) -> dict[str, ArrayLike]:
        return {
            "weight_read": self.weight_bytes,
            "act_read": self.elements_read * self.bytes_per_element,
            "act_write": self.elements_written * self.bytes_per_element,
            "kv_read": 0.0,
            "kv_write": 0.0,
        }


@dataclass(frozen=True)
class Collective(Op):
    """Communication among ``group_size`` GPUs.

    ``message_bytes`` is, per kind: the buffer each GPU reduces (``all_reduce``), the whole
    gathered buffer (``all_gather``), what each GPU scatters to the others (``all_to_all``),
    or what one stage sends the next (``p2p``; ``crosses_nodes`` when the stages are on
    different nodes). ``switch_reducible``: an all-reduce whose elements an NVSwitch can
    reduce in the fabric (16 bits or wider; activations are), see
    :func:`~.interconnect.all_reduce_s`.
    """

    collective: Literal["all_reduce", "all_gather", "all_to_all", "p2p"] = "all_reduce"
    message_bytes: ArrayLike = 0.0
    group_size: int = 1
    crosses_nodes: bool = False
    switch_reducible: bool = True
    kind: OpKind = field(init=False, default="collective")

    @memoized
    def flops(self) -> ArrayLike:
        return 0.0

    def byte_parts(self) -> dict[str, ArrayLike]:
        return dict.fromkeys(BYTE_CATEGORIES, 0.0)

    @property
    def comm_bytes(self) -> ArrayLike:
        """Bytes each GPU sends: ring all-reduce ``2(p-1)/p x S``, all-gather ``(p-1)/p x S``,
        all-to-all ``(p-1)/p x S``, point-to-point ``S``."""
        p = self.group_size
        factor = {"all_reduce": 2.0 * (p - 1) / p, "all_gather": (p - 1) / p,
                  "all_to_all": (p - 1) / p, "p2p": 1.0}[self.collective]
        return factor * self.message_bytes


def op_fields(op: Op) -> dict[str, object]:
    """The constructor fields of an op (for ``dataclasses.replace``-style rewrites)."""
    return {f.name: getattr(op, f.name) for f in fields(op) if f.init}
