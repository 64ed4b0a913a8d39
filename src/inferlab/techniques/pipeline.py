"""Pipeline parallelism: layers split into ``pp`` stages, micro-batches flow through them.

One GPU runs ``1/pp`` of every layer group (layers split evenly) and hands its activations
to the next stage (``tokens x hidden`` in 16-bit, point to point, across nodes when the
stages do not share one). The embedding and the LM head sit on the first and last stage,
and the host schedules a micro-batch once: a stage time ``s`` holds them (the slowest
stage's cadence), but a micro-batch crossing all ``pp`` stages pays them once,
``pp s - (pp - 1) e`` with ``e`` their time. With ``M`` micro-batches a prefill takes that
crossing and ``M - 1`` stage times more (the bubble is ``(pp - 1) / (M + pp - 1)`` of the
stage slots); a decode round takes the crossing or ``M`` stage times, whichever is longer
(a micro-batch's next token waits for its last), so one stream gains no speed from stages
while a full pipeline multiplies throughput.

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
    """The micro-batch step one stage runs, and the number ``M`` of micro-batches."""
    if par.pp == 1:
        return step, np.ones(())
    wanted = par.micro_batches or par.pp
    m = np.minimum(np.asarray(step.batch, float), wanted)
    return Step(step.phase, step.batch / m, step.new_tokens, step.context), m


def pipeline_step_s(stage_s: np.ndarray, once_s: np.ndarray, micro_batches: np.ndarray, phase: str,
                    par: Parallelism) -> np.ndarray:
    """A whole step over the pipeline [s] from one stage's time ``stage_s`` for a micro-batch,
    of which ``once_s`` is what a micro-batch pays once however many stages it crosses (the
    embedding, the LM head, the host's step): see the module docstring."""
    if par.pp == 1:
        return np.asarray(stage_s, float)
    stage_s, m = np.asarray(stage_s, float), np.asarray(micro_batches, float)
    crossing = par.pp * stage_s - (par.pp - 1.0) * np.asarray(once_s, float)
    if phase == "prefill":
        return crossing + (m - 1.0) * stage_s
    return np.maximum(crossing, m * stage_s)


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



