"""Phases of serving a static batch: prefill, decode steps over a growing context.

``ttft`` is the prefill of the prompt (the first token comes with it); each later token
costs one decode step at the current context; the decode time over ``osl - 1`` steps is
integrated with Gauss-Legendre quadrature over the context, not sampled at one point.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from ..calibration.profile import Profile
from ..specs.hardware import HardwareSpec
from ..specs.model import ModelSpec
from ..techniques.quantization import PrecisionConfig, gemm_kernel, matmul_precision
from ..techniques.tensor_parallel import apply_tensor_parallel
from .graph import Step, StepPrecision, build_graph
from .ops import Op
from .timing import OpTime, step_time, time_ops

#: Quadrature nodes for the decode integral: exact for polynomials up to degree 7. Decode
#: time is piecewise linear in the context (kinks where an op changes bound or a window
#: fills), so four nodes stay within a fraction of a percent of summing every step.
_NODES, _WEIGHTS = np.polynomial.legendre.leggauss(4)


@dataclass(frozen=True)
class Deployment:
    """One model served by ``tp`` GPUs of one kind, with formats and an efficiency profile."""

    model: ModelSpec
    hardware: HardwareSpec
    tp: int
    precision: PrecisionConfig
    profile: Profile
    attention: Literal["flash", "naive"] = "flash"
    cuda_graphs: bool = True

    @property
    def step_precision(self) -> StepPrecision:
        """Tensor precision of GEMMs, attention and the 16-bit head on this hardware."""
        cfg, hw = self.precision, self.hardware
        gemm = matmul_precision(cfg.weights, cfg.activations, hw)
        return StepPrecision(
            config=cfg,
            gemm=gemm,
            attention=matmul_precision(cfg.activations, cfg.kv_cache, hw),
            head=matmul_precision("bf16", "bf16", hw),
            kernel=gemm_kernel(cfg, gemm),
        )


@dataclass(frozen=True)
class StepResult:
    """Ops of one step on one GPU with their timing."""

    step: Step
    ops: tuple[Op, ...]
    times: tuple[OpTime, ...]
    time_s: np.ndarray


def run_step(dep: Deployment, step: Step) -> StepResult:
    """Build, shard and time one step."""
    ops = apply_tensor_parallel(build_graph(dep.model, step, dep.step_precision, dep.attention), dep.tp)
    times = time_ops(ops, dep.hardware, dep.profile, step.phase)
    return StepResult(step, ops, times, step_time(times, dep.profile, cuda_graphs=dep.cuda_graphs))


def prefill(dep: Deployment, batch: np.ndarray, isl: np.ndarray) -> StepResult:
    """The prefill of ``batch`` prompts of ``isl`` tokens, as one step."""
    return run_step(dep, Step.prefill(batch, isl))


def decode(dep: Deployment, batch: np.ndarray, context: np.ndarray) -> StepResult:
    """One decode step of ``batch`` sequences at ``context`` tokens."""
    return run_step(dep, Step.decode(batch, context))


def mean_decode_step_s(dep: Deployment, batch: np.ndarray, isl: np.ndarray, osl: np.ndarray) -> np.ndarray:
    """Mean decode-step time over contexts ``isl .. isl + osl - 2`` [s].

    Notes
    -----
    ``(1 / (b - a)) * integral_a^b t(L) dL`` with ``a = isl``, ``b = isl + osl - 1``, by
    8-point Gauss-Legendre on a trailing axis of the grid.
    """
    batch, isl, osl = (np.asarray(x, float) for x in (batch, isl, osl))
    a = isl[..., None]
    b = (isl + np.maximum(osl - 1.0, 0.0))[..., None]
    contexts = a + (b - a) * (_NODES + 1.0) / 2.0
    step = decode(dep, batch[..., None], contexts)
    times = np.broadcast_to(step.time_s, np.broadcast_shapes(step.time_s.shape, contexts.shape))
    return np.asarray(times @ _WEIGHTS / 2.0, float)
