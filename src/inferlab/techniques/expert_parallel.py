"""Expert parallelism: routed experts spread over ``ep`` groups of ``moe_tp`` GPUs.

With tensor-parallel attention every GPU of the stage holds every token, so each expert
group computes the tokens routed to its experts and the groups' outputs are summed by
the all-reduce that closes the MoE block. With attention data parallelism each GPU holds
only its own tokens: an all-to-all *dispatch* sends each token's hidden state to the
groups owning its top-k experts and a *combine* brings the results back. The busiest
group sets the time: ``expert_imbalance`` scales its share of the tokens.

References
----------
.. [1] Lepikhin et al., "GShard", ICLR 2021 (expert parallelism with all-to-all).
.. [2] DeepSeek-AI, "DeepSeek-V3 Technical Report", 2024, sec. 3.4 (EP with attention DP).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from ..core.graph import experts_touched
from ..core.ops import Collective, Elementwise, Gemm, Op
from ..core.parallelism import Parallelism
from ..specs.model import ModelSpec


def apply_expert_parallel(ops: tuple[Op, ...], model: ModelSpec, par: Parallelism,
                          dispatch_bytes_per_element: float = 2.0, gather: Any = None) -> tuple[Op, ...]:
    """Place the routed-expert ops of a stage's graph on one GPU of an expert group.

    The graph was built for the tokens one GPU holds (all of the stage's with TP attention,
    a ``1/tp`` share with attention DP); routed-expert ops become the busiest group's share
    of all the stage's routed tokens, split ``moe_tp`` ways, and are no longer touched by
    tensor parallelism (their combine is marked ``reduced``). ``gather``: the stage's tokens per
    token of the graph (the attention-DP ranks by default; fewer when the busiest rank holds more
    than an even share).
    """
    moe = model.moe
    if moe is None or (par.ep == 1 and not par.attention_dp):
        return ops
    gather = par.attention_groups if gather is None else gather  # stage tokens per GPU-held token
    share = par.expert_imbalance / par.ep
    out: list[Op] = []
    for op in ops:
        if op.role != "routed_expert":
            out.append(op)
            continue
        if isinstance(op, Gemm):
            routed = op.m * gather  # token-expert rows of the whole stage
            tokens = routed / moe.num_experts_per_tok
            touched = experts_touched(tokens, moe.num_experts, moe.num_experts_per_tok) / par.ep
            shard = {"n": op.n / par.moe_tp} if op.shard == "column" else {"k": op.k / par.moe_tp}
            if par.attention_dp and op.shard == "column":
                out.append(_all_to_all("moe_dispatch", op, dispatch_bytes_per_element, par))
            # the row GEMM's partial sums are reduced by the TP all-reduce, or, under attention DP,
            # by the combine itself (a rank's GPUs then gather their shares: half the attention's)
            reduced = op.shard == "row" and not par.attention_dp
            out.append(replace(op, m=routed * share, weight_copies=np.maximum(touched, 1e-9), **shard,
                               shard="reduced" if reduced else "replicated"))
            if par.attention_dp and op.shard == "row":
                out.append(_all_to_all("moe_combine", op, 2.0, par))
        elif isinstance(op, Elementwise):
            # a column-sharded pass (the experts' activation) is split moe_tp ways along the
            # expert width; a replicated one (the token permutation, whole hidden rows) is not
            scale = gather * share / (par.moe_tp if op.shard == "column" else 1)
            out.append(replace(op, elements_read=op.elements_read * scale, elements_written=op.elements_written * scale,
                               shard="replicated"))
        else:
            out.append(op)
    return tuple(out)


def _all_to_all(name: str, op: Gemm, bytes_per_element: float, par: Parallelism) -> Collective:
    """A dispatch or combine: each GPU sends its token-expert copies. A rank of ``attention_tp``
    GPUs holds its tokens on each of them and sends each once, a ``1/attention_tp`` share from
    each GPU (SGLang and vLLM scatter the rank's tokens before the dispatch and gather them
    after the combine; that scatter and gather is the rank's attention all-reduce split in two)."""
    hidden = op.k if op.shard == "column" else op.n  # the model's hidden size on either side
    message = op.m * hidden * bytes_per_element / par.attention_tp  # token-expert copies this GPU sends
    return Collective(name, collective="all_to_all", message_bytes=message, group_size=par.tp,
                      count=op.count, group=op.group)
