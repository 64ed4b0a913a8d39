"""Pipeline parallelism: layers split into ``pp`` stages, micro-batches flow through them.

One GPU runs ``1/pp`` of every layer group (layers split evenly; the embedding and LM
head are counted on the stage that holds them, conservatively all on the slowest one)
and hands its activations to the next stage (``tokens x hidden`` in 16-bit, point to
point, across nodes when the stages do not share one). With ``M`` micro-batches a
prefill takes ``(M + pp - 1)`` stage times (the bubble is ``(pp - 1) / (M + pp - 1)``);
a decode round over all sequences takes ``max(M, pp)`` stage times, so one stream
gains nothing while a full pipeline multiplies throughput.

References
----------
.. [1] Huang et al., "GPipe", NeurIPS 2019 (micro-batches and the pipeline bubble).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from ..core.graph import Step
from ..core.interconnect import node_size
from ..core.ops import Collective, Op
from ..core.parallelism import Parallelism
from ..specs.hardware import HardwareSpec

_ACTIVATION_BYTES = 2.0


def micro_batching(step: Step, par: Parallelism) -> tuple[Step, np.ndarray]:
    """The micro-batch step one stage runs, and how many stage times the whole step takes."""
    if par.pp == 1:
        return step, np.ones(())
    wanted = par.micro_batches or par.pp
    m = np.minimum(np.asarray(step.batch, float), wanted)
    micro = Step(step.phase, step.batch / m, step.new_tokens, step.context)
    factor = m + par.pp - 1.0 if step.phase == "prefill" else np.maximum(m, par.pp)
    return micro, factor


def apply_pipeline(ops: tuple[Op, ...], par: Parallelism, hw: HardwareSpec, hidden_size: int,
                   tokens: np.ndarray) -> tuple[Op, ...]:
    """One stage of the pipeline: ``1/pp`` of each layer group, plus the send to the next stage."""
    if par.pp == 1:
        return ops
    out = [replace(op, count=op.count / par.pp) if op.group != "model" else op for op in ops]
    crosses = par.tp * par.pp > node_size(hw)
    out.append(Collective("pipeline_send", collective="p2p", group_size=2, crosses_nodes=crosses,
                          message_bytes=np.asarray(tokens, float) * hidden_size * _ACTIVATION_BYTES))
    return tuple(out)


def bubble_fraction(batch: np.ndarray, par: Parallelism) -> np.ndarray:
    """Share of a prefill's stage slots that are idle: ``(pp - 1) / (M + pp - 1)``."""
    m = np.minimum(np.asarray(batch, float), par.micro_batches or par.pp)
    return (par.pp - 1.0) / (m + par.pp - 1.0)



