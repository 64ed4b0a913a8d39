"""The boundary of :func:`inferlab.estimate`, :func:`inferlab.deployment` and :func:`inferlab.sweep`.

Every argument is checked here, before any physics runs: types (a count is a whole
number, a switch is true or false), ranges (finite, bounded), and combinations that mean
nothing (an expert imbalance on a dense model, micro-batches without pipeline stages, a
prefill batch without disaggregation). Each refusal is a :class:`~inferlab.errors.SpecError`
that says what was given, what is allowed and what to do instead.
"""

from __future__ import annotations


from pathlib import Path
from typing import Any, Literal

import numpy as np

from .. import checks
from ..calibration.profile import Profile, hardware_family, load_profile
from ..core.parallelism import Parallelism, check_experts, expert_layout
from ..engines.state_pool import ENGINE_STATE_FORMATS
from ..errors import InfeasibleError, SpecError, UnknownNameError, option, option_name
from ..specs.catalog import load_hardware, load_model
from ..specs.hardware import HardwareSpec
from ..specs.model import ModelSpec
from ..techniques.deployed_precision import resolve_precision
from ..techniques.step import ResolvedDeployment

#: Engines with kernel curves and scheduler defaults of their own. ``trtllm`` is TensorRT-LLM
#: on its compiled-engine (C++) runtime, the 0.x releases; ``trtllm-pytorch`` its PyTorch
#: runtime behind ``trtllm-serve``, the default from 1.0: the same kernels (it inherits the
#: ``trtllm`` curves) with its own scheduler and per-request overheads.
ENGINES = ("generic", "trtllm", "trtllm-pytorch", "vllm", "sglang", "lmdeploy")

#: Most GPUs along one parallel axis (tp, pp, ep, dp), and in one deployment (tp x pp x dp); past every
#: deployment built so far.
MAX_GPUS_PER_AXIS = 1 << 20
#: Longest prompt or output [token]: engines index positions with 32-bit integers.
MAX_TOKENS = 2**31 - 1
#: Most requests in one static batch [request].
MAX_BATCH = 10**9
#: Largest KV page [token]; engines use 16 to 256.
MAX_KV_BLOCK = 1 << 20


def resolve_model(model: Any) -> ModelSpec:
    """A :class:`ModelSpec` from a spec, a catalog id or alias, or a config.json path."""
    if isinstance(model, ModelSpec):
        return model
    if isinstance(model, (str, Path)):
        return load_model(model)  # a catalog id or alias, a Hugging Face repository name, a config.json
    raise SpecError(f"model must be a catalog id such as 'llama-3.1-8b', a config.json path or a ModelSpec, "
                    f"got {type(model).__name__} {model!r:.60}")


def resolve_hardware(hardware: Any) -> HardwareSpec:
    """A :class:`HardwareSpec` from a spec or a catalog id."""
    if isinstance(hardware, HardwareSpec):
        return hardware
    if isinstance(hardware, str):
        return load_hardware(hardware)
    raise SpecError(f"hardware must be a catalog id such as 'h100-sxm' or a HardwareSpec, "
                    f"got {type(hardware).__name__} {hardware!r:.60}")


def engine_name(engine: Any) -> str:
    """One of :data:`ENGINES`, with did-you-mean otherwise."""
    if not isinstance(engine, str):
        raise SpecError(f"engine must be a name ({', '.join(ENGINES)}), got {engine!r:.60}")
    if engine not in ENGINES:
        raise UnknownNameError("engine", engine, ENGINES)
    return engine


#: Engines that run only on some vendors' GPUs: TensorRT-LLM builds on CUDA and NVIDIA's
#: kernels (its support matrix lists NVIDIA GPUs only); LMDeploy's TurboMind engine is CUDA
#: (its PyTorch engine adds Huawei Ascend, not in the catalog). vLLM and SGLang run on NVIDIA
#: and AMD GPUs, TPUs and CPUs; ``generic`` stands for any.
ENGINE_VENDORS = {"trtllm": ("NVIDIA",), "trtllm-pytorch": ("NVIDIA",), "lmdeploy": ("NVIDIA",)}


#: Devices the server engines do not run on: neither vLLM nor SGLang runs on a phone's SoC, and
#: SGLang has no macOS build (its platforms: NVIDIA and AMD GPUs, TPUs, Intel XPUs, Ascend, x86
#: CPUs); vLLM on Apple silicon runs on its CPU cores (experimental), which a Mac's catalog entry
#: (its GPU) does not describe. By ``kind`` or ``vendor``.
ENGINES_NOT_ON = {"vllm": ("phone-soc",), "sglang": ("phone-soc", "Apple")}


def _device(hw: HardwareSpec) -> str:
    """``an NVIDIA GPU``, ``a Google TPU``, ``a Qualcomm phone SoC``."""
    kind = {"gpu": "TPU" if hw.vendor == "Google" else "GPU", "cpu": "CPU", "phone-soc": "phone SoC"}.get(hw.kind,
                                                                                                      hw.kind)
    return f"{'an' if hw.vendor[:1].upper() in 'AEIOU' else 'a'} {hw.vendor} {kind}"


def _runs(engine: str, hw: HardwareSpec) -> bool:
    """Whether ``engine`` runs on ``hw`` (:data:`ENGINE_VENDORS`, :data:`ENGINES_NOT_ON`)."""
    barred = ENGINES_NOT_ON.get(engine, ())
    vendors = ENGINE_VENDORS.get(engine)
    return not (hw.kind in barred or hw.vendor in barred) and (
        vendors is None or (hw.vendor in vendors and hw.kind == "gpu"))


def engine_runs_on(engine: str, hw: HardwareSpec) -> None:
    """Refuse an engine on hardware it does not run on (TensorRT-LLM on an MI300X, SGLang on a
    phone), saying which engines run there."""
    if _runs(engine, hw):
        return
    vendors = ENGINE_VENDORS.get(engine)
    where = f"runs on {' and '.join(vendors)} GPUs only, not on" if vendors else "does not run on"
    others = [e for e in ENGINES if e != engine and _runs(e, hw)]
    raise InfeasibleError(f"engine {engine} {where} {hw.id} ({_device(hw)}); the engines that do: {', '.join(others)}")


#: Engines that load llama.cpp's GGUF files: vLLM (a single-file GGUF checkpoint, "highly
#: experimental", docs.vllm.ai quantization/gguf) and SGLang (a ``.gguf`` path loads with
#: ``--load-format gguf``, docs.sglang.io model loading); TensorRT-LLM and LMDeploy load Hugging
#: Face checkpoints in their own quantizations (AWQ, GPTQ, FP8, NVFP4), not GGUF.
GGUF_ENGINES = ("generic", "vllm", "sglang")


def engine_takes_formats(engine: str, config: Any) -> None:
    """Refuse GGUF weight types with an engine that does not load GGUF files (a configuration
    that does not run, as an engine on another vendor's GPU: a grid keeps its other points)."""
    from ..precision import number_format

    gguf = sorted({w for w in (config.weights, config.moe_weights, config.attention_weights)
                   if w is not None and number_format(w).gguf})
    if gguf and engine not in GGUF_ENGINES:
        raise InfeasibleError(f"engine {engine} does not load GGUF files ({', '.join(gguf)}: llama.cpp's types); "
                        f"GGUF runs on {', '.join(e for e in GGUF_ENGINES if e != 'generic')} (or generic); with "
                        f"{engine} use int4 (AWQ/GPTQ), fp8 or its own formats")


def attention_kind(attention: Any) -> str:
    """``flash`` or ``naive``."""
    if attention not in ("flash", "naive") or not isinstance(attention, str):
        raise SpecError(f"attention must be 'flash' or 'naive', got {attention!r:.60}")
    return attention


def layout(model: ModelSpec, *, tp: Any, pp: Any, ep: Any, dp: Any, attention_dp: Any, expert_imbalance: Any,
           micro_batches: Any, attention_tp: Any = 1) -> Parallelism:
    """The parallel layout, checked for types and for what the model can take.

    Raises
    ------
    SpecError
        A count that is not an integer in ``[1, 2^20]``; ``expert_imbalance`` other than 1
        on a dense model (it has no experts to route to) or without expert parallelism (one
        group holds every expert); ``micro_batches`` without ``pp > 1``
        (micro-batches fill pipeline stages; one stage has nothing to fill).
    InfeasibleError
        A layout the model cannot take (``tp`` not dividing the heads, more stages than layers).

    Notes
    -----
    vLLM's data-parallel expert parallelism (``dp=N, ep=N`` with ``tp=1``: attention on each
    of N GPUs, the experts spread over the same N) is one engine of N GPUs, written here as
    ``tp=N, ep=N, attention_dp=True``, which is what it becomes; with ``tp=T`` GPUs a rank
    (``dp=N, ep=T x N``) it is ``tp=T x N, ep=T x N, attention_dp=True, attention_tp=T``.
    """
    counts = {name: checks.integer(option_name(name), value, maximum=MAX_GPUS_PER_AXIS, what=what, whole_floats=True)
              for name, value, what in (("tp", tp, "GPUs"), ("pp", pp, "stages"), ("ep", ep, "groups"),
                                        ("dp", dp, "replicas"), ("attention_tp", attention_tp, "GPUs"))}
    imbalance = checks.real(option_name("expert_imbalance"), expert_imbalance, minimum=1.0, maximum=1e6)
    if counts["tp"] * counts["pp"] * counts["dp"] > MAX_GPUS_PER_AXIS:  # each axis alone within it, not their product
        raise SpecError(f"tp={counts['tp']} x pp={counts['pp']} x dp={counts['dp']} is "
                        f"{counts['tp'] * counts['pp'] * counts['dp']:,} GPUs, more than {MAX_GPUS_PER_AXIS:,}: no "
                        "deployment is that large; give fewer replicas (dp) or GPUs a replica")
    name = model.id or model.name
    if model.moe is None and imbalance != 1.0:
        raise SpecError(f"{option('expert_imbalance', imbalance)} but {name} is dense (no experts to route to); it "
                        "applies only to mixture-of-experts models: drop it")
    if model.moe is not None and imbalance != 1.0 and counts["ep"] == 1:
        raise SpecError(f"{option('expert_imbalance', imbalance)} is the busiest expert-parallel group's load over "
                        f"the mean, but with {option('ep', 1)} one group holds every expert; give expert parallelism "
                        f"({option('ep', 2)} or more) or drop it")
    groups = counts["ep"]
    if model.moe is not None and imbalance > groups:
        raise SpecError(f"{option('expert_imbalance', imbalance)}: the busiest of {groups} expert-parallel groups "
                        f"carries at most all the routed tokens, {groups}x the mean load; give 1 to {groups}")
    if micro_batches is not None:
        micro_batches = checks.integer(option_name("micro_batches"), micro_batches, maximum=MAX_BATCH,
                                       what="micro-batches", whole_floats=True)
        if counts["pp"] == 1:
            raise SpecError(f"{option('micro_batches', micro_batches)} splits a batch over pipeline stages, but there "
                            f"is one stage; drop it, or give pipeline stages ({option('pp', 2)} or more)")
    attention_dp = checks.boolean(option_name("attention_dp"), attention_dp)
    if model.moe is None:  # no experts: said before any advice on the layout's arithmetic
        check_experts(model, counts["ep"], attention_dp)
    if model.moe is not None and counts["attention_tp"] == 1:
        # vLLM's -tp T --data-parallel-size N --enable-expert-parallel: N attention ranks of T GPUs
        # and the experts over all T x N, one engine: tp=ep=T x N with attention DP here
        stage, _, replicas, attention_dp, ranks_tp = expert_layout(counts["tp"], counts["ep"], counts["dp"],
                                                                   attention_dp)
        counts = {**counts, "tp": stage, "dp": replicas, "attention_tp": ranks_tp}
    if counts["attention_tp"] > 1 and not attention_dp:
        raise SpecError(f"{option('attention_tp', counts['attention_tp'])} sets the GPUs of each attention "
                        f"data-parallel rank, but attention DP is off: give {option_name('attention_dp')}, or drop it")
    par = Parallelism(**counts, attention_dp=attention_dp, expert_imbalance=imbalance, micro_batches=micro_batches)
    par.check(model)
    return par


def memory_options(gpu_memory_utilization: Any, kv_block_size: Any, max_num_tokens: Any) -> dict[str, Any]:
    """The engine's memory settings: a share in ``(0, 1]`` (None: the engine's), a page size and a
    token budget per step (None: the engine's for the GPU, :func:`~inferlab.engines.scheduler.token_budget`)."""
    return {"gpu_memory_utilization": None if gpu_memory_utilization is None else checks.fraction(
                option_name("gpu_memory_utilization"), gpu_memory_utilization),
            "kv_block_size": checks.integer(option_name("kv_block_size"), kv_block_size, maximum=MAX_KV_BLOCK,
                                            what="tokens", whole_floats=True),
            "max_num_tokens": None if max_num_tokens is None else checks.integer(
                option_name("max_num_tokens"), max_num_tokens, maximum=MAX_TOKENS, what="tokens", whole_floats=True)}


def unit_price(price_per_gpu_hour: Any, hw: HardwareSpec) -> float | None:
    """USD per GPU-hour: the one given (finite, >= 0) or the catalog's (None when it has none)."""
    if price_per_gpu_hour is not None:
        return checks.price(option_name("price_per_gpu_hour"), price_per_gpu_hour)
    return hw.price.si if hw.price is not None else None


def workload(batch_size: Any, isl: Any, osl: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Batch, prompt and output lengths as whole numbers broadcast into one grid [request, token, token]."""
    return checks.grid(batch_size=checks.count_array(option_name("batch_size"), batch_size, maximum=MAX_BATCH, unit="request"),
                       isl=checks.count_array(option_name("isl"), isl, maximum=MAX_TOKENS, unit="token"),
                       osl=checks.count_array(option_name("osl"), osl, maximum=MAX_TOKENS, unit="token"))


def refuse_with_disaggregation(hardware: Any, pools: tuple[str, str], ignored: dict[str, bool]) -> None:
    """Refuse what a disaggregated estimate would silently drop.

    ``pools`` are the prefill and decode pools' hardware ids; ``ignored`` maps each
    aggregated-only argument to whether the user set it.
    """
    given = [name for name, was_set in ignored.items() if was_set]
    if given:
        names = [option_name(n).rpartition(": ") for n in given]  # ('FILE', ': ', 'key') for a file's keys
        heads = {head for head, _, _ in names}
        named = (f"{heads.pop()}: " if len(heads) == 1 and "" not in heads else "") + \
            ", ".join(tail if len(heads) <= 1 else head + sep + tail for head, sep, tail in names)
        raise SpecError(f"with a disaggregation the pools set the layout and techniques and {named} would be "
                        "ignored: drop it (a pool's GPUs and tp go in the pools, e.g. "
                        "'prefill=h200x4,decode=h200x8:tp4'), or estimate one aggregated deployment without the "
                        "disaggregation")
    if hardware is None:
        return
    from ..techniques.disaggregation import resolve_hardware as pool_hardware

    if not isinstance(hardware, (str, HardwareSpec)):
        resolve_hardware(hardware)  # the type error, worded as for an aggregated deployment
    hw_id = pool_hardware(hardware)
    if any(hw_id != p for p in pools):
        raise SpecError(f"hardware {hw_id!r} disagrees with the pools (prefill on {pools[0]}, decode on "
                        f"{pools[1]}); the pools name their GPUs: drop the hardware argument")


def deployment(model: str | ModelSpec, hardware: str | HardwareSpec, *, tp: int = 1, precision: Any = None,
               engine: str = "generic", profile: str | Path | Profile = "default",
               attention: Literal["flash", "naive"] = "flash", cuda_graphs: bool = True,
               pp: int = 1, ep: int = 1, dp: int = 1, attention_dp: bool = False, expert_imbalance: float = 1.0,
               micro_batches: int | None = None, attention_tp: int = 1) -> ResolvedDeployment:
    """Resolve names into a :class:`ResolvedDeployment` and check the parallel layout against the model.

    Raises
    ------
    SpecError
        An argument of the wrong type or out of range, or a combination that means nothing
        (see the checks above).
    InfeasibleError
        A layout the model cannot take.
    """
    m = resolve_model(model)
    hw = resolve_hardware(hardware)
    engine = engine_name(engine)
    engine_runs_on(engine, hw)
    configured = m.linear_attention is not None and m.linear_attention.state_format is not None  # mamba_ssm_dtype
    m = with_engine_state_format(m, engine)
    attention = attention_kind(attention)  # type: ignore[assignment]
    par = layout(m, tp=tp, pp=pp, ep=ep, dp=dp, attention_dp=attention_dp, expert_imbalance=expert_imbalance,
                 micro_batches=micro_batches, attention_tp=attention_tp)
    alone(hw, par)
    prec = resolve_precision(precision, m, hw)
    notes = prec.notes
    if prec.config.state is not None:  # the user's state format (--mamba-ssm-dtype), over the config's and the engine's
        m = m.model_copy(update={"linear_attention": m.linear_attention.model_copy(
            update={"state_format": prec.config.state})})
        notes += (f"linear-attention state {prec.config.state}: as given (state:{prec.config.state})",)
    elif m.linear_attention is not None:  # where the state's format comes from
        source = ("the config's mamba_ssm_dtype" if configured else
                  f"{engine}'s default, the config naming none" if engine in ENGINE_STATE_FORMATS else
                  "the model's dtype, the config naming none")
        notes += (f"linear-attention state {m.linear_attention.state_format or 'bf16'}: {source} (state: or "
                  "--state-dtype sets it)",)
    engine_takes_formats(engine, prec.config)
    prof = load_profile(profile, engine, hw.id, hardware_family(hw.architecture))
    return ResolvedDeployment(m, hw, par.tp, prec.config, prof, attention, checks.boolean("cuda_graphs", cuda_graphs), par,
                      notes)


def with_engine_state_format(model: ModelSpec, engine: str) -> ModelSpec:
    """``model`` with its linear-attention state in ``engine``'s format where its config names none."""
    lin = model.linear_attention
    if lin is None or lin.state_format is not None or engine not in ENGINE_STATE_FORMATS:
        return model
    return model.model_copy(update={"linear_attention": lin.model_copy(update={"state_format":
                                                                                ENGINE_STATE_FORMATS[engine]})})


def alone(hw: HardwareSpec, par: Parallelism) -> None:
    """Refuse a replica spanning devices that have no link between them: a MIG slice (no
    NVLink or peer-to-peer between slices) or a single-device machine (Apple M-series).
    Replicas (``dp``) each on their own device are fine.

    Raises
    ------
    InfeasibleError
        ``tp x pp > 1`` on such a device, saying what to use instead.
    """
    if hw.scale_up.kind != "none" or par.tp * par.pp == 1:
        return
    base, _, profile = hw.id.partition(":")
    why = (f"{hw.id} is a MIG slice, and slices have no NVLink or peer-to-peer between them" if profile
           else f"{hw.id} has no link to another device")
    instead = (f"a larger slice ({base}:<profile>; `inferlab hardware show {base}` lists them) or the whole GPU"
               if profile else "a device with more memory or a narrower weight format")
    raise InfeasibleError(f"tp={par.tp} x pp={par.pp} cannot span devices here: {why}; use tp=1, pp=1 with "
                          f"{instead}")
