"""One configuration of a plan and what carrying the scenario's traffic takes of it.

Column glossary (the table of :class:`~inferlab.planning.result.Plan`, its ``to_dict()``
and ``explain()`` use these names):

``replicas``
    The plan's replica count: the fewest the request-level simulation shows meeting the
    SLOs when ``sized_by`` is ``"simulation"``, else the fluid model's (``seed_replicas``).
``seed_replicas``
    The fluid model's count, ``ceil(rate / (target_utilization x replica_rate))``: where
    the simulated search starts.
``simulated_ttft_s``, ``simulated_tpot_s`` [s]
    The SLO percentile of TTFT and TPOT in the simulation at ``replicas`` (NaN when not
    simulated).
``simulated_ttft_se_s``, ``simulated_tpot_se_s`` [s]
    Their standard errors over the simulated requests (how sure the simulation is of them;
    NaN when not simulated or too few requests were read).
``simulated_job_s`` [s]
    An offline job's simulated duration on ``replicas``.
``fluid_job_s`` [s]
    The same by the fluid model: the job's requests over ``replicas x replica_rate`` (NaN online).
``fluid_ttft_s``, ``fluid_tpot_s`` [s]
    The fluid model's estimate of the same percentiles at the same load (each replica
    carrying ``rate / replicas``); infinite (``inf`` in the table, null in JSON) where that
    load is beyond what the fluid model thinks a replica carries, which the simulation,
    the count's authority, may still show meeting the SLOs.
``headroom``
    Traffic growth the plan's replicas absorb before an SLO is missed: the simulation's
    when ``headroom_by`` is ``"simulation"`` (a lower bound, found by bisection on the
    rate), else the fluid model's ``replicas x replica_rate / rate - 1``.
``binding``
    What stops more traffic: the SLO the simulation misses first as traffic grows, or in
    the fluid model the limit met at the next concurrency (an SLO, KV memory, the engine's
    sequence limit).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass(frozen=True)
class Probe:
    """One request-level simulation of a candidate at a replica count.

    Attributes
    ----------
    replicas : int
        Replicas the scenario's traffic is split over (both pools of a disaggregated one).
    growth : float
        Traffic simulated, as a multiple of the scenario's rate minus one (0: the planned load).
    ttft_s, tpot_s : float [s]
        The SLO percentile of TTFT and TPOT (an offline job: its duration in ``ttft_s``).
    meets : bool
        Both within their objectives (an offline job: done before the deadline).
    missed : str
        ``"TTFT"``, ``"TPOT"``, ``"TTFT+TPOT"``, ``"deadline"``, ``"throughput"`` (a replica
        receives more than it completes; ``"prefill throughput"``, ``"decode throughput"`` or
        ``"prefill and decode throughput"`` of a disaggregated pool) or ``""``.
    pd : str
        ``P<n>:D<m>`` of a disaggregated candidate.
    job_s : float [s]
        An offline job's duration on ``replicas`` (NaN online).
    requests : int
        Requests simulated, every seed's (0 where not recorded).
    seeds : int
        Seeds pooled (0, 1, 2, ...: each a run of ``requests / seeds``).
    lifetime_s : float [s]
        The warm-up: the percentiles read the requests that arrived more than this after the
        first arrival and before the last (0: all of them; :func:`~.probes.steady_run`).
    ttft_se_s, tpot_se_s : float [s]
        Standard errors of ``ttft_s`` and ``tpot_s`` over the sections of the seeds' read
        windows (:func:`~.probes.percentile_se`); NaN where too few requests were read.
    """

    replicas: int
    growth: float
    ttft_s: float
    tpot_s: float
    meets: bool
    missed: str = ""
    pd: str = ""
    job_s: float = float("nan")
    requests: int = 0
    lifetime_s: float = 0.0
    seeds: int = 1
    ttft_se_s: float = float("nan")
    tpot_se_s: float = float("nan")


@dataclass(frozen=True)
class Candidate:
    """One configuration and what it needs to carry the scenario's traffic (see the module
    docstring for the columns)."""

    model: str
    hardware: str
    precision: str
    tp: int
    ep: int
    speculative: str | None
    feasible: bool
    disaggregated: bool = False
    pp: int = 1
    attention_dp: bool = False
    reason: str = ""
    batch: float = float("nan")
    replica_rate: float = float("nan")
    replicas: int = 0
    seed_replicas: int = 0
    gpus: int = 0
    usd_per_hour: float = float("nan")
    usd_per_million_output: float = float("nan")
    fluid_ttft_s: float = float("nan")
    fluid_tpot_s: float = float("nan")
    simulated_ttft_s: float = float("nan")
    simulated_tpot_s: float = float("nan")
    simulated_ttft_se_s: float = float("nan")
    simulated_tpot_se_s: float = float("nan")
    simulated_job_s: float = float("nan")
    fluid_job_s: float = float("nan")
    tokens_per_s_per_user: float = float("nan")
    tokens_per_s_per_gpu: float = float("nan")
    headroom: float = float("nan")
    headroom_by: str = ""
    binding: str = ""
    sized_by: str = ""
    simulated_without: tuple[str, ...] = ()
    probes: tuple[Probe, ...] = ()
    curve: dict[str, np.ndarray] = field(default_factory=dict, repr=False)
    pd: str = ""  # prefill:decode replicas of a disaggregated candidate
    #: A disaggregated candidate's prefill replicas as ``(tp, ep, attention_dp)`` where they are
    #: not of the candidate's own kind (``tp``, ``ep`` and ``attention_dp`` are then the decode
    #: pool's): a narrow prefill pool beside a wide expert-parallel decode pool. None: both alike.
    prefill_kind: tuple[int, int, bool] | None = None
    #: Ruled out by ``max_gpus`` or the budget at the fluid model's count, which the simulation
    #: may bring within them (the planner then sizes it).
    over_limits: bool = False
    #: Ruled out because the weights do not fit its layout: the smallest layout that would hold
    #: them (``{"tp": 8}``, ``{"tp": 8, "pp": 2}``), where one does; empty otherwise.
    fits_as: dict[str, int] = field(default_factory=dict)
    #: Ruled out by the scenario's own values, not by the physics: a layout or precision the
    #: model cannot take (search.tp, search.precisions), or hardware without a price.
    ruled_by_input: bool = False

    @property
    def label(self) -> str:
        """Short description, e.g. ``llama-3.1-70b h200-sxm fp8 tp4``."""
        text = f"{self.model} {self.hardware} {self.precision} tp{self.tp}"
        text += f" pp{self.pp}" if self.pp > 1 else ""
        text += f" ep{self.ep}" if self.ep > 1 else ""
        text += " adp" if self.attention_dp else ""
        if self.disaggregated and self.prefill_kind is not None:  # two kinds: each pool's
            sides = (f"P{self.pools[0]}", f"D{self.pools[1]}") if self.pd else ("prefill", "decode")
            text = (f"{self.model} {self.hardware} {self.precision} disagg {sides[0]} {_kind(*self.prefill_kind)} "
                    f": {sides[1]} {_kind(self.tp, self.ep, self.attention_dp)}")
        else:
            text += f" disagg {self.pd}" if self.disaggregated else ""
        return text + (f" +{self.speculative}" if self.speculative else "")

    @property
    def prefill_layout(self) -> tuple[int, int, bool]:
        """``(tp, ep, attention_dp)`` of a prefill replica (of a disaggregated candidate)."""
        return self.prefill_kind if self.prefill_kind is not None else (self.tp, self.ep, self.attention_dp)

    @property
    def pool_gpus_per_replica(self) -> tuple[int, int]:
        """GPUs of one prefill and of one decode replica (a disaggregated candidate's pools)."""
        return self.prefill_layout[0], self.tp

    def pool_gpus(self, pd: str | None = None) -> int:
        """GPUs of a disaggregated candidate's pools at ``pd`` (default its own ``P<n>:D<m>``)."""
        n_p, n_d = _replicas_of(pd or self.pd)
        g_p, g_d = self.pool_gpus_per_replica
        return n_p * g_p + n_d * g_d

    @property
    def pools(self) -> tuple[int, int]:
        """Prefill and decode replicas of a disaggregated candidate (``pd`` = ``P<n>:D<m>``)."""
        return _replicas_of(self.pd)

    def deployment(self, engine: str = "generic", profile: str = "default", max_num_seqs: int | None = None,
                   allow_long_context: bool = False, chunked_prefill: bool | None = None) -> Any:
        """This configuration as a :class:`~inferlab.Deployment`: one replica, or with a
        disaggregated candidate's ``P:D`` both pools; ``engine``, ``profile``, the sequence
        limit and chunked prefill (None: the engine's default) are the scenario's
        (:func:`~inferlab.planning.search.scenario_deployment`)."""
        from ..inputs.deployment import Deployment

        limits = {"max_num_seqs": max_num_seqs, "chunked_prefill": chunked_prefill}
        eng = {"name": engine, **{k: v for k, v in limits.items() if v is not None}}
        precision = None if self.precision == "checkpoint" else self.precision
        if self.disaggregated:
            n_p, n_d = self.pools if self.pd else (1, 1)
            kinds = {"prefill": self.prefill_layout, "decode": (self.tp, self.ep, self.attention_dp)}
            pools = {side: {"hardware": self.hardware, "num_gpus": n * kinds[side][0], "tp": kinds[side][0],
                            "ep": kinds[side][1], "attention_dp": kinds[side][2], "precision": precision}
                     for side, n in (("prefill", n_p), ("decode", n_d))}
            from ..specs.catalog import load_hardware

            link = pool_link_bandwidth(load_hardware(self.hardware))
            if link is not None:  # no NIC in the GPU's spec: the PCIe link the plan priced
                pools["link_bandwidth"] = link
            return Deployment(model=self.model, disaggregation=pools, precision=precision, engine=eng,
                              profile=profile, allow_long_context=allow_long_context)
        layout = {"tp": self.tp, "pp": self.pp, "ep": self.ep, "attention_dp": self.attention_dp}
        return Deployment(model=self.model, hardware=self.hardware, layout=layout, precision=precision, engine=eng,
                          profile=profile, speculative=self.speculative, allow_long_context=allow_long_context)

    @property
    def simulated(self) -> bool:
        """The replica count is the simulation's."""
        return self.sized_by == "simulation"

    @property
    def gpus_per_replica(self) -> int:
        """GPUs of one replica (tensor x pipeline parallel; of a disaggregated candidate, a
        decode replica: :attr:`pool_gpus_per_replica` has both pools')."""
        return self.tp * self.pp

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready, with the label and every probe (no operating curve), and for separate
        pools each pool's GPUs per replica; a number that is not finite (a latency not simulated,
        a fluid queue that does not settle) is None."""
        out = {k: _json_number(v) for k, v in self.__dict__.items() if k not in ("curve", "probes")}
        out["probes"] = [{k: _json_number(v) for k, v in p.__dict__.items()} for p in self.probes]
        out["simulated_without"] = list(self.simulated_without)
        if self.disaggregated:  # tp, ep and attention_dp are the decode pool's; each pool's replica size
            out["pool_gpus_per_replica"] = list(self.pool_gpus_per_replica)
        return dict(out, label=self.label)

    def ttft_for_rank(self) -> float:
        """The TTFT that breaks a cost tie: simulated when there is one [s]."""
        if not self.feasible:
            return math.inf
        return self.simulated_ttft_s if self.simulated else self.fluid_ttft_s


def _replicas_of(pd: str) -> tuple[int, int]:
    """Prefill and decode replicas of ``P<n>:D<m>``."""
    n_p, n_d = (int(x) for x in pd.removeprefix("P").split(":D"))
    return n_p, n_d


def _kind(tp: int, ep: int, attention_dp: bool) -> str:
    """A replica kind as labels write it: ``tp8``, ``tp8 ep8``, ``tp8 ep8 adp``."""
    return f"tp{tp}" + (f" ep{ep}" if ep > 1 else "") + (" adp" if attention_dp else "")


def pool_link_bandwidth(hw: Any) -> float | None:
    """The KV link [B/s per GPU] the plan gives separate pools on a GPU whose spec names no NIC
    (MI300X, H20, PCIe cards): its PCIe link, as the fluid seed and the simulation both take it;
    None where the spec names a NIC (the pools' own link, NVLink within a domain)."""
    if hw.scale_out is not None:
        return None
    return hw.pcie.bandwidth.si if hw.pcie is not None else 1e9


def _json_number(value: Any) -> Any:
    """``value``, or None for a float that JSON cannot hold (NaN, infinity)."""
    return None if isinstance(value, float) and not math.isfinite(value) else value
