"""Request-level simulation of disaggregated serving: a prefill pool and a decode pool.

Requests arrive at the prefill pool (spread over its replicas in turn), each replica an
in-flight-batching engine that only prefills: a request leaves it when its prompt's last
chunk is done. Its KV cache then crosses the link to the decode pool (the exposed part
of the transfer, :func:`~inferlab.techniques.kv_transfer.kv_transfer`, overlapped
layer by layer with the prefill), and joins a decode replica (again in turn) with its
prompt already cached: that replica's iterations are decode only. Both pools are the
event-driven simulation of :mod:`.simulator`, so queueing in either pool, the decode
batch each request joins and preemptions under memory pressure all show in the
percentiles, which the fluid model of the planner only estimates.

The first token is the decode pool's first step (``first_token="decode"``) or the
prefill's, forwarded once the prefill ends (``"prefill"``); see
:class:`~inferlab.techniques.disaggregation.Disaggregation`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from ..calibration.profile import Profile
from ..engines.scheduler import SchedulerConfig
from ..engines.window_pool import held_windows
from ..errors import SpecError
from ..inputs.workload import Lengths, Workload
from ..specs.model import ModelSpec
from ..techniques.disaggregation import Disaggregation
from ..techniques.kv_transfer import kv_transfer
from ..techniques.step import ResolvedDeployment
from .client_phase import closed_loop_lines
from .pool_loop import PoolSide, closed_loop_pools
from .result import ServeResult
from .simulator import Trace, simulate
from .stepmodel import StepModel


@dataclass(frozen=True, repr=False)  # ServeResult's short repr, not a dump of every request's arrays
class DisaggServeResult(ServeResult):
    """A :class:`ServeResult` of two pools: ``deployment`` is a decode replica's,
    ``prefill_deployment`` a prefill replica's; ``trace`` holds every request, with
    ``first_scheduled`` its admission to a prefill replica."""

    prefill_deployment: ResolvedDeployment | None = None
    disaggregation: Disaggregation | None = None
    prefill_done: np.ndarray | None = None      # [s] the prompt's last chunk, per request
    decode_arrival: np.ndarray | None = None    # [s] the KV cache reached the decode pool

    @property
    def request_overhead_s(self) -> float:
        """The server's work per request [s]: the prefill pool's, where requests enter."""
        dep = self.prefill_deployment or self.deployment
        return float(dep.profile.request_overhead_s)

    @property
    def num_gpus(self) -> int:
        """GPUs of both pools."""
        d = self.disaggregation
        return d.prefill.num_gpus + d.decode.num_gpus if d is not None else self.deployment.num_gpus

    @property
    def transfer_s(self) -> np.ndarray:
        """Prefill end to arrival at the decode pool: the exposed KV transfer [s]."""
        return self.decode_arrival - self.prefill_done

    def interval(self, level: float = 0.8):
        """No interval: no validation case measures disaggregated serving, so aggregated cases'
        residuals would claim a confidence nothing supports.

        Raises
        ------
        MissingBandError
            Always.
        """
        from ..calibration.error_band import MissingBandError

        raise MissingBandError("no error band for disaggregated serving: no validation case measures it, and the "
                               "residuals of aggregated serving would understate its error")

    def to_dict(self) -> dict[str, Any]:
        """:meth:`ServeResult.to_dict` with the pools."""
        return {**super().to_dict(), "disaggregation": str(self.disaggregation),
                "mean_exposed_transfer_s": float(np.mean(self.transfer_s))}

    def __str__(self) -> str:
        lines = super().__str__().splitlines()
        dep = self.deployment
        head = f"{dep.model.id or dep.model.name} disaggregated ({self.disaggregation}), {dep.precision}, engine {self.engine}"
        lines[0] = head + ";" + lines[0].split(";", 1)[1]
        return "\n".join(lines)

    def explain(self) -> str:
        d, s = self.disaggregation, self.summary()
        wait_p = np.nanmean(self.queue_s)
        wait_d = np.nanmean(self.trace.first_token - self.decode_arrival) if d.first_token == "decode" else 0.0
        lines = [str(self).splitlines()[0],
                 f"TTFT {s['ttft']['mean'] * 1e3:.1f} ms on average: {wait_p * 1e3:.1f} ms waiting for a prefill "
                 f"replica ({d.prefill.replicas} of {_kind(d.prefill)}), the prefill, "
                 f"{np.nanmean(self.transfer_s) * 1e3:.2f} ms of exposed KV transfer"
                 + (f", {wait_d * 1e3:.1f} ms to the decode pool's first step" if d.first_token == "decode" else ""),
                 f"TPOT {s['tpot']['mean'] * 1e3:.2f} ms on average: decode-only iterations on "
                 f"{d.decode.replicas} replica(s) of {_kind(d.decode)}, about "
                 f"{np.nansum(self.trace.finish - self.decode_arrival) / self.duration_s / d.decode.replicas:.1f} "
                 "requests in flight each"]
        return "\n".join(lines + closed_loop_lines(self))


def _kind(pool: Any) -> str:
    """A pool's replica as its layout reads: ``tp8``, ``tp8 ep8 adp`` (eight attention-DP ranks)."""
    return f"tp{pool.tp}" + (f" ep{pool.ep}" if pool.ep > 1 else "") + (" adp" if pool.attention_dp else "")


def serve_disaggregated(model: str | ModelSpec, disagg: Disaggregation | str, *, isl: Any = 1024, osl: Any = 128,
                        rate: float | None = None, trace: Any = None, offline: bool = False,
                        concurrency: int | None = None, stagger: bool = True,
                        num_requests: int = 1000, seed: int = 0, engine: str = "generic",
                        profile: str | Path | Profile = "default", precision: Any = None,
                        scheduler: SchedulerConfig | None = None,
                        limits: dict[str, Any] | None = None,
                        allow_long_context: bool = False) -> DisaggServeResult:
    """Simulate serving with prefill and decode on separate pools.

    Parameters
    ----------
    model : str or ModelSpec
    disagg : Disaggregation or str
        Pools and link, e.g. ``"prefill=h200x4,decode=h200x8:tp4"``.
    isl, osl, rate, trace, offline, concurrency, stagger, num_requests, seed
        The workload, as for :func:`inferlab.serve`. A closed loop of ``concurrency``
        clients runs both pools on one clock (:mod:`.pool_loop`): a client's next prompt
        waits for the decode pool to finish its last answer.
    engine, profile, precision
        Defaults for pools that name none.
    scheduler : SchedulerConfig, optional
        Both pools' limits (default: each pool's engine's).
    limits : dict, optional
        Scheduler fields (``max_num_seqs``, ...) set over both pools' schedulers.
    allow_long_context : bool
        Accept prompts plus outputs (and a ``max_model_len``) beyond the model's trained
        positions, as :func:`inferlab.serve` does.
    """
    from ..phases.disaggregated import pool_deployments
    from .replica import check_context, within_context
    from ..engines.scheduler import ENGINE_SCHEDULERS
    from ..engines.window_options import window_limits

    d, dep_p, dep_d = pool_deployments(model, disagg, engine=engine, profile=profile, precision=precision)
    workload = Workload(isl=Lengths.of(isl), osl=Lengths.of(osl), num_requests=num_requests, rate=rate,
                        trace=trace, offline=offline, concurrency=concurrency, seed=seed, stagger=stagger)
    arrivals, prompts, outputs = workload.draw()
    prompts, outputs = prompts.astype(float), outputs.astype(float)
    n = len(prompts)
    overrides = limits or {}
    raw = {}
    for pool, dep_engine in (("prefill", d.prefill.engine or engine), ("decode", d.decode.engine or engine)):
        base = scheduler or ENGINE_SCHEDULERS.get(dep_engine, SchedulerConfig())
        raw[pool] = replace(base, **window_limits(base, overrides, dep_engine, custom=scheduler is not None))
    # the decode pool runs no prefill: piecewise prefill graphs are the prefill pool's alone (as in the estimate)
    raw["decode"] = replace(raw["decode"], prefill_graph_tokens=None)
    # a request holds its prompt in the prefill pool, prompt and output in the decode pool
    side_p = _side(dep_p, d.prefill.engine or engine, raw["prefill"], d.prefill.replicas,
                   float(np.mean(prompts)) + 1.0 if n else None)
    side_d = _side(dep_d, d.decode.engine or engine, raw["decode"], d.decode.replicas,
                   float(np.mean(prompts + outputs)) if n else None)
    # a drawn request longer than the prefill pool takes is answered with an error, the others served
    arrivals, prompts, outputs, refused = within_context(dep_p.model, side_p.sched, workload, arrivals, prompts, outputs,
                                                         allow_long_context, dep_p.parallel.attention_groups)
    n = len(prompts)
    for side, dep in ((side_p, dep_p), (side_d, dep_d)):  # the decode pool prefills nothing: no prompt cap
        check_context(dep_p.model, side.sched if side is side_p else replace(side.sched, prompt_within_budget=False),
                      prompts, outputs, allow_long_context=allow_long_context, ranks=dep.parallel.attention_groups)
    side_d.model.request_overhead_s = 0.0  # the request entered the server at the prefill pool
    if concurrency is not None:
        return replace(_closed_loop(d, dep_p, dep_d, engine, workload, side_p, side_d, prompts, outputs), refused=refused)
    # prefill pool: each request leaves with its prompt prefilled (one token sampled)
    model_p, kv_p = side_p.model, side_p.kv_capacity_tokens
    ones = np.ones(n)
    first_sched, prefill_done = np.full(n, np.nan), np.full(n, np.nan)
    traces: list[Trace] = []
    for r in range(d.prefill.replicas):
        mine = np.arange(r, n, d.prefill.replicas)
        if not len(mine):  # fewer requests than prefill replicas
            continue
        t = simulate(model_p, side_p.sched, arrivals[mine], prompts[mine], ones[mine], kv_capacity_tokens=kv_p,
                     state_tokens=side_p.state_tokens)
        first_sched[mine], prefill_done[mine] = t.first_scheduled, t.finish
        traces.append(t)
    # the KV cache crosses to the decode pool, overlapped with the prefill layer by layer
    prefill_s = prefill_done - first_sched
    move = kv_transfer(d, dep_p, dep_d, 1.0, prompts, np.maximum(prefill_s, 1e-9),
                       freed=held_windows(dep_d.model, side_d.sched)[0])
    at_decode = prefill_done + move.exposed_s
    # decode pool: requests join in the order they arrive there, each replica in turn
    forwarded = d.first_token == "prefill"
    to_decode = outputs - 1.0 if forwarded else outputs
    model_d, kv_d = side_d.model, side_d.kv_capacity_tokens
    order = np.argsort(at_decode, kind="stable")
    first_tok, finish = np.full(n, np.nan), np.full(n, np.nan)
    decode_traces: list[Trace] = []
    decodes = np.flatnonzero(to_decode[order] >= 1.0)
    for r in range(d.decode.replicas):
        mine = order[decodes[r::d.decode.replicas]]
        if not len(mine):
            continue
        t = simulate(model_d, side_d.sched, at_decode[mine], prompts[mine], to_decode[mine],
                     kv_capacity_tokens=kv_d, prefilled=True, state_tokens=side_d.state_tokens)
        first_tok[mine], finish[mine] = t.first_token, t.finish
        decode_traces.append(t)
    if forwarded:
        first_tok = prefill_done.copy()
        finish = np.where(to_decode >= 1.0, finish, prefill_done)
    if np.isnan(finish).any():
        raise SpecError("disaggregated simulation left requests unfinished")  # pragma: no cover - invariant
    # the token gaps are the decode pool's; the queue over time is the first prefill replica's
    merged = Trace(arrivals, prompts, outputs, first_sched, first_tok, finish,
                   sum(t.preemptions for t in traces + decode_traces), traces[0].queue_times, traces[0].queue_depth,
                   np.concatenate([t.itl_values for t in decode_traces] or [np.zeros(0)]),
                   np.concatenate([t.itl_weights for t in decode_traces] or [np.zeros(0)]))
    return DisaggServeResult(dep_d, d.decode.engine or engine, workload, merged, 1,
                             prefill_deployment=dep_p, disaggregation=d, prefill_done=prefill_done,
                             decode_arrival=at_decode, refused=refused)


def _side(dep: ResolvedDeployment, engine: str, engine_sched: SchedulerConfig, replicas: int,
          context: float | None = None) -> PoolSide:
    """One pool's step model, limits (its stream's, from the engine's ``engine_sched``) and KV pool
    (what a request of ``context`` tokens holds beside its own: :func:`~.replica.state_tokens`)."""
    from .replica import kv_capacity_tokens, replica_limits, state_tokens, unchunked_budget

    engine_sched = unchunked_budget(dep, engine_sched)
    sched = replica_limits(dep, engine, engine_sched)
    model = StepModel(dep, sched.max_num_batched_tokens + sched.max_num_seqs, sched.overlap_host,
                     sched.graph_max_batch, sched.prefill_graph_tokens)
    return PoolSide(model, sched, kv_capacity_tokens(dep, engine_sched, context=context), replicas,
                    state_tokens(dep, engine_sched, context=context))


def _closed_loop(d: Disaggregation, dep_p: ResolvedDeployment, dep_d: ResolvedDeployment, engine: str,
                 workload: Workload, side_p: PoolSide, side_d: PoolSide, prompts: np.ndarray,
                 outputs: np.ndarray) -> DisaggServeResult:
    """Closed-loop clients over both pools on one clock (:func:`.pool_loop.closed_loop_pools`)."""
    from .replica import _request_period_s

    clients = int(workload.concurrency or 1)
    turnaround = workload.turnaround(_request_period_s(side_d.model, clients, prompts, outputs))

    def exposed(prompt: float, prefill_s: float) -> float:
        return float(np.asarray(kv_transfer(d, dep_p, dep_d, 1.0, np.array([prompt]), np.array([prefill_s]),
                                            freed=held_windows(dep_d.model, side_d.sched)[0]).exposed_s)[0])

    times = closed_loop_pools(side_p, side_d, prompts, outputs, clients, turnaround, exposed,
                              d.first_token == "prefill")
    return DisaggServeResult(dep_d, d.decode.engine or engine, workload, times.trace, 1, prefill_deployment=dep_p,
                             disaggregation=d, prefill_done=times.prefill_done, decode_arrival=times.decode_arrival)
