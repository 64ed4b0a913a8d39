"""What each iteration of an in-flight-batching engine costs beyond a static step's.

A serving engine pays, every iteration, host work a static batch does not (scheduling,
building the mixed batch, updating request state: the profile's ``serving_step_overhead_s``)
and, where it fuses less than the op graph assumes, the extra kernels of its forward pass
(``serving_kernel_overhead_s`` per kernel of the graph): a cost that grows with the model's
layers and the ops in them, so a 61-layer MoE model with MLA pays several times what an
8-billion-parameter dense model does. The serving simulation
(:class:`~inferlab.serving.stepmodel.StepModel`) and the planner's curves read it from here.
"""

from __future__ import annotations

import numpy as np

from ..core.graph import Step
from ..core.timing import eager_floor
from .step import ResolvedDeployment, StepResult, run_step


def forward_kernels(dep: ResolvedDeployment) -> float:
    """Kernels of one forward pass of ``dep``'s model on one GPU: a one-sequence decode step's,
    every pipeline stage's."""
    return run_step(dep, Step.decode(np.ones(1), np.full(1, 16.0))).kernels * dep.parallel.pp


def serving_iteration_s(dep: ResolvedDeployment) -> float:
    """Time each serving iteration of ``dep`` costs beyond a static step's [s]:
    ``serving_step_overhead_s + serving_kernel_overhead_s x`` :func:`forward_kernels`."""
    prof = dep.profile
    if not prof.serving_kernel_overhead_s:
        return prof.serving_step_overhead_s
    return prof.serving_step_overhead_s + prof.serving_kernel_overhead_s * forward_kernels(dep)


def eager_prefill_s(dep: ResolvedDeployment, prefill: StepResult | None = None) -> float:
    """Least time of an iteration with prompt tokens where the engine runs it eagerly, its host
    issuing the prefill graph's kernels one by one (:func:`~inferlab.core.timing.eager_floor`),
    every pipeline stage's [s]; 0 where the profile gives no eager issue time (prefill in CUDA
    graphs). ``prefill``: a one-sequence prefill step of ``dep`` already run (the serving
    simulation's step model has one). The step model and the planner's curves both read it here."""
    prof = dep.profile
    if not prof.eager_host_per_kernel_s:
        return 0.0
    if prefill is None:
        prefill = run_step(dep, Step.prefill(np.ones(1), np.full(1, 16.0)))
    return eager_floor(prefill.kernels, prof) * dep.parallel.pp
