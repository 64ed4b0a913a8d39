"""Failures: replicas and nodes that fail at given rates, are noticed after a detection
delay and come back after a restart; and the replicas a target availability needs.

A replica fails on its own (an engine crash, a GPU fault, a bad CUDA state: exponential
times at ``1 / replica_mtbf_h``) or with its node (``replicas_per_node`` replicas share one
failure domain, failing together at ``1 / node_mtbf_h``). Until the failure is detected
(``detection_s``: a health check that does not run inference misses a replica that still
answers it) the router keeps sending it requests, which fail; then it is out of rotation
for ``restart_s`` and comes back with an empty cache.

With independent failures each replica is up a share ``a = MTBF / (MTBF + MTTR)`` of the
time; ``N`` replicas keep at least ``m`` up with probability

.. math:: A(N, m) = \\sum_{j=m}^{N} \\binom{N}{j} a^j (1 - a)^{N - j}

References
----------
.. [1] Meta, "The Llama 3 Herd of Models" (2024), table 5: 419 unexpected interruptions in
   54 days of pre-training on 16,384 H100s, 78% hardware (GPU 58.7%): one per GPU every
   ~50,000 h; a replica of 8 GPUs fails about every 6,000 h, a faster clock with software
   faults in serving.
.. [2] Kubernetes documentation, "Configure liveness, readiness and startup probes":
   ``periodSeconds`` 10 and ``failureThreshold`` 3 by default (30 s to notice).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..checks import integer, real
from ..core.interconnect import node_size
from ..errors import SpecError

#: One failure per replica every this many hours. An assumption from [1] (hardware alone:
#: ~6,000 h for 8 GPUs) lowered for software faults of a serving stack.
DEFAULT_REPLICA_MTBF_H = 1000.0
#: Probe period x failure threshold [2].
DEFAULT_DETECTION_S = 30.0
#: A failure only an inference probe finds: a synthetic request every minute, noticed after
#: three misses. An assumption in the spirit of [2]'s failureThreshold.
DEFAULT_SILENT_DETECTION_S = 180.0
#: Engine restart after a crash, with weights cached on the node: weight load and warm-up of
#: ``inferlab.economics.cold_start`` (an assumption: about 2 minutes).
DEFAULT_RESTART_S = 120.0


@dataclass(frozen=True)
class Failures:
    """Failure rates, detection and restart.

    Parameters
    ----------
    replica_mtbf_h : float [h]
        Mean time between failures of one replica; ``inf``: never.
    node_mtbf_h : float [h]
        Of one node (taking down its replicas together); ``inf``: never.
    replicas_per_node : int
    detection_s, restart_s : float [s]
    silent_share : float
        Share of replica failures a liveness probe does not see (the engine still answers
        ``/health`` while its CUDA context is broken); found only by a probe that runs
        inference, after ``silent_detection_s``.
    silent_detection_s : float [s]
    """

    replica_mtbf_h: float = DEFAULT_REPLICA_MTBF_H
    node_mtbf_h: float = math.inf
    replicas_per_node: int = 1
    detection_s: float = DEFAULT_DETECTION_S
    restart_s: float = DEFAULT_RESTART_S
    silent_share: float = 0.0
    silent_detection_s: float = DEFAULT_SILENT_DETECTION_S

    def __post_init__(self) -> None:
        for name in ("replica_mtbf_h", "node_mtbf_h"):
            if getattr(self, name) != math.inf:
                object.__setattr__(self, name, real(f"failures.{name}", getattr(self, name), minimum=1e-6,
                                                    unit="h"))
        object.__setattr__(self, "silent_share", real("failures.silent_share", self.silent_share, minimum=0.0,
                                                      maximum=1.0))
        for name in ("detection_s", "restart_s", "silent_detection_s"):
            object.__setattr__(self, name, real(f"failures.{name}", getattr(self, name), minimum=0.0, maximum=1e9,
                                                unit="s"))
        object.__setattr__(self, "replicas_per_node", integer("failures.replicas_per_node", self.replicas_per_node,
                                                              maximum=1024))
        if not (self.replica_mtbf_h > 0 and self.node_mtbf_h > 0):
            raise SpecError("failures: replica_mtbf_h and node_mtbf_h must be > 0 hours (inf: never)")
        if not (self.detection_s >= 0 and self.restart_s >= 0 and self.replicas_per_node >= 1):
            raise SpecError("failures: detection_s and restart_s must be >= 0 s, replicas_per_node >= 1")

    @property
    def replica_availability(self) -> float:
        """Share of time one replica serves (replica faults only) [-]."""
        detect = (1.0 - self.silent_share) * self.detection_s + self.silent_share * self.silent_detection_s
        mttr_h = (detect + self.restart_s) / 3600.0
        return self.replica_mtbf_h / (self.replica_mtbf_h + mttr_h) if math.isfinite(self.replica_mtbf_h) else 1.0


def availability(replicas: int, need: int, a: float) -> float:
    """Probability that at least ``need`` of ``replicas`` independent replicas, each up a
    share ``a`` of the time, are up [-] (the binomial tail, exact for any fleet size).

    Raises
    ------
    SpecError
        ``replicas`` or ``need`` not a whole number >= 0, or ``a`` not in [0, 1].
    """
    from scipy.stats import binom

    replicas = integer("replicas", replicas, minimum=0, maximum=10**9)
    need = integer("need", need, minimum=0, maximum=10**9)
    a = real("a (the share of time one replica is up)", a, minimum=0.0, maximum=1.0)
    if need > replicas:
        return 0.0
    return float(binom.sf(need - 1, replicas, a))


def replicas_for(target: float, need: int, a: float, *, limit: int = 10_000) -> int:
    """Fewest replicas keeping ``need`` up with probability ``target`` (N + k).

    Raises
    ------
    SpecError
        ``target`` not in (0, 1), ``a`` not in (0, 1], or no fleet of up to ``limit`` replicas reaches it.
    """
    if not 0 < target < 1:
        raise SpecError(f"target availability must be in (0, 1), e.g. 0.999, got {target}")
    a = real("a (the share of time one replica is up)", a, minimum=0.0, maximum=1.0, include_minimum=False)
    n = max(integer("need", need, minimum=0, maximum=10**9), 1)
    while availability(n, need, a) < target:
        n += 1
        if n > limit:
            raise SpecError(f"no fleet of up to {limit} replicas reaches availability {target} at a={a}")
    return n


def check_nodes(failures: Failures, deployments: list) -> None:
    """Refuse ``replicas_per_node`` replicas that do not fit one node of a pool's GPU: a node
    holds ``replicas_per_node x`` a replica's GPUs (eight-GPU HGX servers, a 72-GPU NVL72 rack).

    Raises
    ------
    SpecError
        A pool whose replicas are too wide for that many on one node.
    """
    if failures.replicas_per_node == 1 or not math.isfinite(failures.node_mtbf_h):
        return
    for dep in deployments:
        if dep is None:
            continue
        gpus, node = dep.parallel.tp * dep.parallel.pp, node_size(dep.hardware)
        if failures.replicas_per_node * gpus > node:
            raise SpecError(f"failures: replicas_per_node {failures.replicas_per_node} replicas of {gpus} GPU(s) "
                            f"need {failures.replicas_per_node * gpus} GPUs on one node; a {dep.hardware.id} node has "
                            f"{node}: at most {max(node // gpus, 1)} a node")
