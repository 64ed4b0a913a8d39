"""Tensor parallelism: shard the op graph over ``tp`` GPUs of one scale-up domain.

Column-parallel GEMMs split output features, row-parallel ones input features and are
followed by an all-reduce of the residual stream (two per layer, Megatron style);
attention splits heads; KV heads are replicated once ``tp`` exceeds them (an MLA latent
is replicated on every rank); the LM head splits the vocabulary and gathers logits.

References
----------
.. [1] Shoeybi et al., "Megatron-LM", 2019, sec. 3 (column/row parallel MLP and attention).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from ..core.ops import TP_STATISTICS, Attention, Collective, Elementwise, Gemm, Op

_RESIDUAL_BYTES = 2.0  # the residual stream is reduced in 16-bit


def _share(units: float, tp: int) -> float:
    """Fraction of a dimension of ``units`` indivisible parts that one of ``tp`` ranks holds."""
    return max(1.0 / tp, 1.0 / units) if units else 1.0 / tp


def shard_op(op: Op, tp: int) -> Op:
    """One op as one of ``tp`` ranks runs it."""
    if tp == 1 or op.shard == "replicated":
        return op
    if isinstance(op, Gemm):
        if op.shard in ("column", "vocab"):
            return replace(op, n=op.n / tp)
        if op.shard == "row":
            return replace(op, k=op.k / tp)
        if op.shard == "kv_heads":
            return replace(op, n=op.n * _share(op.shard_units, tp))
        if op.shard == "qkv":
            kv = op.kv_n * _share(op.shard_units, tp)
            return replace(op, n=(op.n - op.kv_n) / tp + kv, kv_n=kv)
        if op.shard == "heads":
            return replace(op, m=op.m / tp, weight_copies=op.weight_copies / tp)
    if isinstance(op, Attention):
        kv_share = _share(op.kv_heads, tp)
        return replace(op, heads=op.heads / tp, kv_heads=op.kv_heads * kv_share,
                       kv_elements=op.kv_elements * kv_share)
    if isinstance(op, Elementwise):
        return replace(op, elements_read=op.elements_read / tp, elements_written=op.elements_written / tp)
    return op


def apply_tensor_parallel(ops: tuple[Op, ...], tp: int) -> tuple[Op, ...]:
    """Shard every op and insert the collectives tensor parallelism needs.

    After a run of row-parallel GEMMs, the residual op that consumes them waits for an
    all-reduce of its output (``tokens x hidden`` in 16-bit); the vocabulary-parallel LM
    head is followed by an all-gather of the logits; a collective of statistics the graph
    built for one GPU (:data:`~inferlab.core.ops.TP_STATISTICS`: a norm over all heads) spans
    the ``tp`` ranks.
    """
    if tp == 1:  # nothing to split; a statistics collective has no peers
        return ops if all(op.role != TP_STATISTICS for op in ops) else \
            tuple(op for op in ops if op.role != TP_STATISTICS)
    out: list[Op] = []
    pending_reduce = False
    for op in ops:
        if pending_reduce and isinstance(op, Elementwise) and op.name.endswith("residual"):
            message = np.asarray(op.elements_written, float) * _RESIDUAL_BYTES
            out.append(Collective(f"all_reduce_{op.name.removesuffix('_residual')}", collective="all_reduce",
                                  message_bytes=message, group_size=tp, count=op.count, group=op.group))
            pending_reduce = False
        if isinstance(op, Collective) and op.role == TP_STATISTICS:
            out.append(replace(op, group_size=tp))
            continue
        sharded = shard_op(op, tp)
        out.append(sharded)
        if op.shard in ("row", "reduced"):  # "reduced": split by another technique, still summed over tp
            pending_reduce = True
        if op.shard == "vocab" and isinstance(op, Gemm):
            out.append(Collective("all_gather_logits", collective="all_gather", message_bytes=op.m * op.n * 2.0,
                                  group_size=tp, count=op.count, group=op.group))
    return tuple(out)
