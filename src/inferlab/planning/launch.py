"""The planner's winner as the launch command of an engine, with the scheduler limits the plan assumed.

The plan sizes one replica (``tp x pp`` GPUs) and a replica count; the command launches
one replica, run ``replicas`` times behind a load balancer. The limits written are the
ones the plan's simulation used: the scenario's ``search.max_num_seqs`` or the engine's
default, and the engine's token budget, chunking, memory share, KV page and attention-DP balancing
(:data:`~inferlab.engines.scheduler.ENGINE_SCHEDULERS`). A scenario whose traffic shares prefixes
relies on the prefix cache, so it is switched on explicitly. A winner the plan simulated without
the engine's overlap scheduling (its drafter's doing: :func:`~inferlab.engines.speculation_limits.for_speculation`)
says so with the engine's switch; at the engine's default nothing is written for it.
"""

from __future__ import annotations

from typing import Any

from ..engines import LAUNCH_ENGINES, EngineLaunch, Rendered, launch_command, launch_from_deployment
from ..errors import SpecError
from .search import chunked_prefill, max_num_seqs


def _asked(best: Any) -> str | None:
    """The winner's formats, or None where they are its checkpoint's own (nothing to ask an engine
    for: DeepSeek-V3 ships block-scaled FP8, which no flag sets)."""
    from ..core.quantization import PrecisionConfig
    from ..specs.catalog import load_model
    from ..techniques.deployed_precision import checkpoint_precision

    if best.precision in (None, "checkpoint"):
        return None
    try:
        same = PrecisionConfig.parse(best.precision) == checkpoint_precision(load_model(best.model))
    except Exception:  # noqa: BLE001 - a label that does not parse is passed on as it is
        same = False
    return None if same else best.precision


def winner_launch(plan: Any) -> EngineLaunch:
    """The :class:`EngineLaunch` of one replica of the plan's cheapest feasible configuration.

    Raises
    ------
    SpecError
        When nothing is feasible, or the winner is disaggregated (two pools: no single
        engine command launches them).
    """
    from ..engines.scheduler import ENGINE_SCHEDULERS, SchedulerConfig, for_hardware
    from ..engines.speculation_limits import for_speculation
    from ..inputs.resolve import resolve_hardware
    from ..techniques.speculative_config import SpeculativeConfig

    best, sc = plan.best, plan.scenario
    if best is None:
        raise SpecError("the plan has no feasible configuration to launch")
    if best.disaggregated:
        raise SpecError(f"the winner {best.label} runs prefill and decode on separate pools; engines launch each pool "
                        "with their own disaggregation setup, which inferlab does not write")
    # the budget the plan's simulation ran: an engine that sizes it for the GPU, sized for the winner's
    limits = for_hardware(ENGINE_SCHEDULERS.get(sc.engine, SchedulerConfig()), resolve_hardware(best.hardware))
    planned = for_speculation(sc.engine, limits, SpeculativeConfig.of(best.speculative).method) \
        if best.speculative is not None else limits
    shared = sc.traffic.prefix is not None or bool(sc.traffic.prefix_hit)
    notes = (f"one replica of {best.replicas}: launch it {best.replicas} times behind a load balancer",) \
        if best.replicas > 1 else ()
    launch = launch_from_deployment(best.model, engine=sc.engine, tp=best.tp, pp=best.pp, ep=best.ep,
                                    attention_dp=best.attention_dp,
                                    precision=_asked(best),
                                    speculative=best.speculative,
                                    max_num_seqs=max_num_seqs(sc) or limits.max_num_seqs,
                                    max_num_batched_tokens=limits.max_num_batched_tokens,
                                    # as planned: chunked where the engine chunks or the plan turned it on;
                                    # else the engine's whole prompts, said by saying nothing
                                    chunked_prefill=chunked_prefill(sc) or (True if limits.chunked_prefill else None),
                                    gpu_memory_utilization=limits.gpu_memory_utilization,
                                    kv_block_size=limits.kv_block_size, prefix_caching=True if shared else None,
                                    reserve_output=limits.reserve_output,
                                    overlap_host=None if planned.overlap_host == limits.overlap_host
                                    else planned.overlap_host)
    from dataclasses import replace

    # attention-DP balancing as simulated: the engine's own (TensorRT-LLM's PyTorch runtime: NVIDIA's
    # recipe's hold; none under SGLang or vLLM, so a TensorRT-LLM command of their winner writes none)
    held = limits.balance_timeout_iters if best.attention_dp else None
    return replace(launch, notes=launch.notes + notes, balance_timeout_iters=held)


def winner_commands(plan: Any, engine: str = "all") -> list[Rendered]:
    """The winner's launch command for ``engine`` (``all``: vLLM, SGLang and TensorRT-LLM)."""
    from dataclasses import replace

    engines = LAUNCH_ENGINES if engine == "all" else (engine,)
    launch = winner_launch(plan)
    planned = plan.scenario.engine
    other = (f"the plan simulated {planned}'s scheduler: this command carries the limits it ran with, not this "
             "engine's own defaults")
    return [_on_other_gpus(e, plan.best.hardware) or
            launch_command(launch if e == planned else replace(launch, notes=launch.notes + (other,)), e)
            for e in engines]


def _on_other_gpus(engine: str, hardware: str) -> Rendered | None:
    """No command, and why, where ``engine`` does not run on the winner's GPUs (TensorRT-LLM on
    an MI300X); None where it does."""
    from ..errors import InfeasibleError
    from ..inputs.resolve import engine_runs_on, resolve_hardware

    try:
        engine_runs_on(engine, resolve_hardware(hardware))
    except InfeasibleError as e:
        why = f"{e}: no {engine} command for the winner"
        return Rendered(engine, f"# inferlab: {why}", (("hardware", why),))
    return None
