"""``inferlab.estimate``: latency, throughput, memory and cost of one deployment.

Inputs that are arrays (batch size, ISL, OSL) broadcast: one call evaluates a grid.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import numpy as np

from .calibration.profile import Profile, hardware_family, load_profile
from .core.cost import cost_of
from .core.memory import plan_memory, require_weights_fit
from .core.phases import Deployment, mean_decode_step_s
from .errors import InfeasibleError, SpecError
from .results.estimate import Estimate
from .specs.catalog import load_hardware, load_model
from .specs.hardware import HardwareSpec
from .specs.model import ModelSpec
from .techniques.quantization import PrecisionConfig
from .techniques.disaggregation import Disaggregation
from .techniques.parallelism import Parallelism
from .techniques.prefix_cache import PrefixCache, effective_cached_tokens, prefill_with_cache
from .techniques.speculative import SpeculativeConfig, mean_speculative_tpot_s

#: Engines with kernel curves and scheduler defaults of their own. ``trtllm`` is TensorRT-LLM
#: on its compiled-engine (C++) runtime, the 0.x releases; ``trtllm-pytorch`` its PyTorch
#: runtime behind ``trtllm-serve``, the default from 1.0: the same kernels (it inherits the
#: ``trtllm`` curves) with its own scheduler and per-request overheads.
ENGINES = ("generic", "trtllm", "trtllm-pytorch", "vllm", "sglang", "lmdeploy")


def _positive(name: str, value: Any) -> np.ndarray:
    try:
        arr = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        raise SpecError(f"{name} must be a number or an array of numbers, got {value!r}") from None
    if arr.size == 0 or not np.all(np.isfinite(arr)) or np.any(arr < 1):
        raise SpecError(f"{name} must be >= 1 (and finite), got {value!r}")
    return np.round(arr)


def deployment(model: str | ModelSpec, hardware: str | HardwareSpec, *, tp: int = 1, precision: Any = "bf16",
               engine: str = "generic", profile: str | Path | Profile = "default",
               attention: Literal["flash", "naive"] = "flash", cuda_graphs: bool = True,
               pp: int = 1, ep: int = 1, dp: int = 1, attention_dp: bool = False, expert_imbalance: float = 1.0,
               micro_batches: int | None = None) -> Deployment:
    """Resolve names into a :class:`Deployment` and check the parallel layout against the model."""
    m = load_model(model) if isinstance(model, (str, Path)) else model
    hw = load_hardware(hardware) if isinstance(hardware, str) else hardware
    if engine not in ENGINES:
        from .errors import UnknownNameError

        raise UnknownNameError("engine", engine, ENGINES)
    if attention not in ("flash", "naive"):
        raise SpecError(f"attention must be 'flash' or 'naive', got {attention!r}")
    ints = {"tp": tp, "pp": pp, "ep": ep, "dp": dp}
    for name, value in ints.items():
        if not isinstance(value, (int, np.integer)) or isinstance(value, bool):
            raise SpecError(f"{name} must be an integer, got {value!r}")
    par = Parallelism(tp=int(tp), pp=int(pp), ep=int(ep), dp=int(dp), attention_dp=bool(attention_dp),
                      expert_imbalance=float(expert_imbalance), micro_batches=micro_batches)
    par.check(m)
    prec = PrecisionConfig.parse(precision)
    prof = load_profile(profile, engine, hw.id, hardware_family(hw.architecture))
    return Deployment(m, hw, par.tp, prec, prof, attention, cuda_graphs, par)


def estimate(model: str | ModelSpec, hardware: str | HardwareSpec, *, num_gpus: int | None = None, tp: int = 1,
             pp: int = 1, ep: int = 1, dp: int = 1, attention_dp: bool = False, expert_imbalance: float = 1.0,
             micro_batches: int | None = None,
             precision: Any = "bf16", isl: Any = 1024, osl: Any = 128, batch_size: Any = 1,
             engine: str = "generic", profile: str | Path | Profile = "default",
             attention: Literal["flash", "naive"] = "flash", cuda_graphs: bool = True,
             gpu_memory_utilization: float = 0.9, kv_block_size: int = 16, max_num_tokens: int = 8192,
             price_per_gpu_hour: float | None = None, utilization: float = 1.0,
             waves: bool = False, speculative: SpeculativeConfig | str | None = None,
             prefix_cache: PrefixCache | str | float | None = None,
             disaggregation: Disaggregation | str | None = None, prefill_batch: Any = 1) -> Estimate:
    """Predict a static batch: ``batch_size`` requests of ``isl`` prompt and ``osl`` output tokens.

    Parameters
    ----------
    model, hardware : str or spec
        Catalog ids (or a config.json path for the model) or loaded specs.
    num_gpus : int, optional
        GPUs of the deployment; must equal ``tp x pp x dp`` (a check on the layout).
    tp, pp, ep, dp : int
        Tensor-parallel GPUs per pipeline stage, pipeline stages, expert-parallel groups
        within a stage (``ep`` divides ``tp``), and replicas.
    attention_dp : bool
        Attention data-parallel over a stage's GPUs, experts over expert parallelism.
    expert_imbalance : float
        Load of the busiest expert group over the mean (1: balanced).
    micro_batches : int, optional
        Pipeline micro-batches (default ``pp``).
    precision : str or mapping
        ``"fp8"``, ``"int4"``, ``{"weights": "fp8", "activations": "fp8", "kv_cache": "bf16"}``...
    isl, osl, batch_size : int or array [token, token, request]
        Broadcast together into a grid; ``batch_size`` counts all requests (split over replicas).
    engine : str
        Selects the calibrated efficiencies (``generic`` is the datasheet-only fallback).
    profile : str or path
        ``"default"`` (shipped calibration), ``"roofline"`` (speed of light) or a profile YAML.
    attention : {"flash", "naive"}
        ``naive`` writes and reads the score matrix.
    gpu_memory_utilization : float
        Share of device memory the engine may use (vLLM's default 0.9).
    waves : bool
        When the batch's KV cache does not fit, run it in waves as engines do, instead of
        raising :class:`InfeasibleError`.
    speculative : SpeculativeConfig or str, optional
        Speculative decoding, e.g. ``"eagle:k=4,accept=0.7"`` or a preset name (see
        :mod:`inferlab.techniques.speculative`); output quality is unchanged.
    prefix_cache : PrefixCache, str or float, optional
        A cached prompt prefix: a hit rate (``0.5``) or ``"tokens=1500"``.
    disaggregation : Disaggregation or str, optional
        Separate prefill and decode pools, e.g. ``"prefill=h200x4,decode=h200x8"``; the
        result is then a :class:`~inferlab.disaggregated.DisaggEstimate` (``batch_size`` is
        the decode batch, ``prefill_batch`` the prefill one).

    Returns
    -------
    Estimate
        TTFT, TPOT, throughput, memory, cost, per-op tables and ``explain()``.
    """
    cache = _prefix_cache(prefix_cache)
    if disaggregation is not None:
        from .disaggregated import estimate_disaggregated

        return estimate_disaggregated(model, disaggregation, isl=isl, osl=osl, prefill_batch=prefill_batch,
                                      decode_batch=batch_size, engine=engine, profile=profile, prefix_cache=cache,
                                      gpu_memory_utilization=gpu_memory_utilization, kv_block_size=kv_block_size,
                                      max_num_tokens=max_num_tokens, precision=precision)
    spec = SpeculativeConfig.parse(speculative) if isinstance(speculative, str) else speculative
    dep = deployment(model, hardware, tp=tp, precision=precision, engine=engine, profile=profile,
                     attention=attention, cuda_graphs=cuda_graphs, pp=pp, ep=ep, dp=dp, attention_dp=attention_dp,
                     expert_imbalance=expert_imbalance, micro_batches=micro_batches)
    if num_gpus is not None and num_gpus != dep.num_gpus:
        raise SpecError(f"num_gpus={num_gpus} but the layout {dep.parallel} uses tp x pp x dp = {dep.num_gpus} GPUs")
    if not 0.0 < gpu_memory_utilization <= 1.0 or not 0.0 < utilization <= 1.0:
        raise SpecError("gpu_memory_utilization and utilization must be in (0, 1]")
    b, i, o = np.broadcast_arrays(_positive("batch_size", batch_size), _positive("isl", isl), _positive("osl", osl))
    price = price_per_gpu_hour if price_per_gpu_hour is not None else (
        dep.hardware.price.si if dep.hardware.price is not None else None)
    return static_batch(dep, engine, b, i, o, gpu_memory_utilization=gpu_memory_utilization,
                        kv_block_size=kv_block_size, max_num_tokens=max_num_tokens, price_per_gpu_hour=price,
                        utilization=utilization, waves=waves, speculative=spec, prefix_cache=cache)


def _prefix_cache(value: Any) -> PrefixCache | None:
    if value is None or isinstance(value, PrefixCache):
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return PrefixCache(hit_rate=float(value))
    if isinstance(value, str):
        return PrefixCache.parse(value)
    raise SpecError(f"prefix_cache must be a hit rate, a text like 'tokens=1500' or a PrefixCache, got {value!r}")


def static_batch(dep: Deployment, engine: str, b: np.ndarray, i: np.ndarray, o: np.ndarray, *,
                 gpu_memory_utilization: float, kv_block_size: int, max_num_tokens: int,
                 price_per_gpu_hour: float | None, utilization: float, waves: bool,
                 speculative: SpeculativeConfig | None = None, prefix_cache: PrefixCache | None = None) -> Estimate:
    """The static-batch model on already-validated arrays (shared by :func:`estimate` and sweeps).

    The ``b`` requests split evenly over the ``dp`` replicas, which run side by side.
    """
    par = dep.parallel
    replica = np.ceil(b / par.dp)
    plan = plan_memory(dep.model, dep.hardware, dep.precision, parallel=par, batch=replica, context=i + o,
                       step_tokens=np.minimum(replica * i, max_num_tokens), gpu_memory_utilization=gpu_memory_utilization,
                       kv_block_size=kv_block_size)
    require_weights_fit(plan, dep.model, dep.hardware, par)
    n_waves = np.ceil(replica / np.maximum(plan.max_sequences, 1.0))
    if np.any(n_waves > 1) and not waves:
        largest = int(np.min(plan.max_sequences))
        raise InfeasibleError(
            f"the KV cache of {int(np.max(replica))} sequences of {int(np.max(i + o))} tokens needs "
            f"{float(np.max(plan.kv_batch)) / 1e9:.1f} GB per GPU but {float(np.min(plan.kv_budget)) / 1e9:.1f} GB is free "
            f"after weights; the largest batch that fits is {largest * par.dp} (or pass waves=True)",
            needed_bytes=float(np.max(plan.kv_batch)), available_bytes=float(np.min(plan.kv_budget)),
            suggestion={"batch_size": largest * par.dp})
    wave_batch = np.ceil(replica / n_waves)
    if np.any(n_waves > 1):  # the memory in use is one wave's
        plan = plan_memory(dep.model, dep.hardware, dep.precision, parallel=par, batch=wave_batch, context=i + o,
                           step_tokens=np.minimum(wave_batch * i, max_num_tokens),
                           gpu_memory_utilization=gpu_memory_utilization, kv_block_size=kv_block_size)
    cached = 0.0 if prefix_cache is None else effective_cached_tokens(i, prefix_cache, block_size=kv_block_size)
    pre = prefill_with_cache(dep, wave_batch, i, prefix_cache, block_size=kv_block_size)
    chunks = np.ceil(wave_batch * (i - cached) / max_num_tokens)
    ttft_wave = pre.time_s + (chunks - 1.0) * dep.profile.step_overhead_s
    step_s = (mean_decode_step_s(dep, wave_batch, i, o) if speculative is None
              else mean_speculative_tpot_s(dep, wave_batch, i, o, speculative))
    tpot = np.where(o > 1, step_s, 0.0)
    wave_s = ttft_wave + (o - 1.0) * tpot
    total = n_waves * wave_s
    cost = cost_of(price_per_gpu_hour, dep.num_gpus, utilization, batch=b, isl=i, osl=o,
                   prefill_s=n_waves * ttft_wave, total_s=total)
    return Estimate(deployment=dep, engine=engine, batch_size=b, isl=i, osl=o, waves=n_waves,
                    ttft_s=ttft_wave + wave_s * (n_waves - 1.0) / 2.0, tpot_s=tpot, total_s=total,
                    memory=plan, cost=cost, prefill_step=pre, wave_batch=wave_batch, speculative=speculative,
                    prefix_cache=prefix_cache)
