"""How long a new replica takes to serve, and the warm capacity that delay forces.

A replica comes up in four sequential stages: the machine is provisioned, the engine's
container image is pulled, the weights are read into GPU memory, and the engine warms up
(compilation, CUDA graph capture). Traffic that rises faster than that must meet replicas
already warm.

References
----------
.. [1] Tensorfuse, "Snapshotter graphs" blog (2025): vLLM, SGLang and TensorRT-LLM images
   typically exceed 10 GB; a 10 GB pull with overlayfs takes 7-10 minutes.
.. [2] BentoML, "Cold-starting LLMs on Kubernetes in under 30 seconds" (2025-04-11): a
   Llama 3.1 8B image of 20.2 GB (CUDA 2.8, torch 1.4, other libraries 1, weights 15 GB)
   pulls in 5-6 min and extracts in 3-4 min.
.. [3] Spheron, "GPU cold start on serverless LLM inference" (2026): weight load ~40-45 s
   for a 70B model from local NVMe at 3+ GB/s; CUDA context and graph capture ~12 s (8B),
   ~30 s (70B).
.. [4] vLLM documentation, "torch.compile integration" (v0.11): compilation runs at start
   and is cached in ``~/.cache/vllm/torch_compile_cache`` to shorten later starts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..core.parallelism import weights_per_gpu
from ..errors import SpecError
from ._common import _shown, jsonable, non_negative, positive, scalar_or_array, table, whole, shapes_agree

#: A new GPU machine (VM or node) from request to ready, drivers included. An assumption:
#: node scale-up is commonly quoted at 3 minutes or more; 0 when a node is already up.
DEFAULT_PROVISIONING_S = 180.0
#: Inference engine image (vLLM, SGLang, TensorRT-LLM) without weights: "typically
#: exceeding 10 GB" [1]; [2] counts 5.2 GB of CUDA, torch and libraries alone.
DEFAULT_IMAGE_BYTES = 10e9
#: Effective pull rate, download and layer extraction together: derived from [2],
#: 20.2 GB in 8-10 min = 34-42 MB/s ([1]: 10 GB in 7-10 min = 17-24 MB/s).
DEFAULT_REGISTRY_BYTES_PER_S = 40e6
#: Read rate of the weights' storage per node. An assumption between a network volume
#: (about 1 GB/s) and local NVMe (about 3 GB/s, [3]).
DEFAULT_STORAGE_BYTES_PER_S = 2e9
#: Engine warm-up: compilation without a cache [4] and CUDA graph capture (~12-30 s, [3]).
#: An assumption; a few seconds with a warm compile cache and graphs disabled.
DEFAULT_WARMUP_S = 60.0
#: GPUs of one server sharing its storage link (HGX-style 8-GPU servers). An assumption.
DEFAULT_GPUS_PER_NODE = 8


@dataclass(frozen=True)
class ColdStart:
    """Time to bring one replica up, by stage [s]; arrays broadcast.

    Attributes
    ----------
    provisioning_s, image_pull_s, weight_load_s, warmup_s : float or numpy.ndarray
        The four sequential stages [s].
    weight_bytes_per_gpu : float or numpy.ndarray
        Weights each GPU loads [B].
    gpus_per_storage_link : float or numpy.ndarray
        GPUs of the replica that share one node's storage bandwidth [-].
    """

    provisioning_s: np.ndarray | float
    image_pull_s: np.ndarray | float
    weight_load_s: np.ndarray | float
    warmup_s: np.ndarray | float
    weight_bytes_per_gpu: np.ndarray | float
    gpus_per_storage_link: np.ndarray | float

    @property
    def total_s(self) -> np.ndarray | float:
        """Request to first servable token [s]."""
        return self.provisioning_s + self.image_pull_s + self.weight_load_s + self.warmup_s

    def to_dict(self) -> dict[str, Any]:
        """Every stage and the total, JSON-ready."""
        keys = ("provisioning_s", "image_pull_s", "weight_load_s", "warmup_s", "total_s",
                "weight_bytes_per_gpu", "gpus_per_storage_link")
        return {k: jsonable(np.asarray(getattr(self, k), dtype=float)) for k in keys}

    def __str__(self) -> str:
        return table("cold start of one replica [s]", {
            "provision": self.provisioning_s, "image pull": self.image_pull_s,
            "weight load": self.weight_load_s, "warm-up": self.warmup_s, "total": self.total_s,
            "GB/GPU": np.asarray(self.weight_bytes_per_gpu) / 1e9})


def _resolved(deployment: Any) -> Any:
    """The resolved deployment of a :class:`~inferlab.Deployment`, an estimate's, or itself."""
    from ..inputs.deployment import Deployment

    if isinstance(deployment, Deployment):
        from ..inputs.resolve import deployment as resolve

        kw = deployment.estimate_kwargs()
        if "hardware" not in kw or deployment.disaggregation is not None:
            raise SpecError("cold_start: the deployment must name one replica's hardware (not separate pools)")
        keep = ("tp", "pp", "ep", "dp", "attention_dp", "attention_tp", "precision", "engine", "profile")
        return resolve(kw["model"], kw["hardware"], **{k: kw[k] for k in keep if k in kw})
    inner = getattr(deployment, "deployment", None)  # an Estimate or a ServeResult
    if hasattr(inner, "parallel"):
        return inner
    if not hasattr(deployment, "parallel"):
        raise SpecError(f"cold_start: deployment must be an inferlab.Deployment, an estimate() result or its "
                        f".deployment, got {type(deployment).__name__} {deployment!r:.60}")
    return deployment


@shapes_agree
def cold_start(deployment: Any = None, *, weight_bytes_per_gpu: Any = None, num_gpus: Any = None,
               gpus_per_node: Any = DEFAULT_GPUS_PER_NODE, provisioning_s: Any = DEFAULT_PROVISIONING_S,
               image_bytes: Any = DEFAULT_IMAGE_BYTES, registry_bytes_per_s: Any = DEFAULT_REGISTRY_BYTES_PER_S,
               storage_bytes_per_s: Any = DEFAULT_STORAGE_BYTES_PER_S,
               warmup_s: Any = DEFAULT_WARMUP_S) -> ColdStart:
    r"""Time to bring one replica up: provisioning, image pull, weight load and warm-up.

    Parameters
    ----------
    deployment : inferlab.Deployment, an estimate() or serve() result, or its ``.deployment``, optional
        Takes the weights per GPU from its model, precision and layout, and ``num_gpus``
        from one replica (``tp x pp``). Give it or ``weight_bytes_per_gpu``.
    weight_bytes_per_gpu : float or array_like or pint.Quantity, optional
        Weights each GPU loads [B].
    num_gpus : int or array_like, optional
        GPUs of one replica [-] (default 1 with ``weight_bytes_per_gpu``).
    gpus_per_node : int or array_like
        GPUs of one server sharing its storage link [-]; 1 when each GPU reads alone.
    provisioning_s : float or array_like or pint.Quantity
        Machine provisioning [s]; 0 on a node already up.
    image_bytes : float or array_like or pint.Quantity
        Container image [B]; 0 when cached on the node.
    registry_bytes_per_s : float or array_like or pint.Quantity
        Effective image pull rate, extraction included [B/s].
    storage_bytes_per_s : float or array_like or pint.Quantity
        Read rate of the weights' storage, per node [B/s].
    warmup_s : float or array_like or pint.Quantity
        Engine warm-up: compilation and CUDA graph capture [s].

    Returns
    -------
    ColdStart

    Notes
    -----
    .. math:: T = T_{prov} + \frac{B_{image}}{R_{registry}}
              + \frac{W_{gpu} \min(N, N_{node})}{R_{storage}} + T_{warmup}

    Nodes load in parallel; the GPUs of one node share its storage bandwidth, so a node
    reads ``W_gpu`` times its GPUs of the replica. Defaults and their sources are the
    module's ``DEFAULT_*`` constants.

    Examples
    --------
    >>> cs = cold_start(weight_bytes_per_gpu=141e9 / 4, num_gpus=4, storage_bytes_per_s=2e9)
    >>> cs.weight_load_s, cs.image_pull_s, cs.total_s   # 141 GB / 2 GB/s; 10 GB / 40 MB/s
    (70.5, 250.0, 560.5)
    """
    if (deployment is None) == (weight_bytes_per_gpu is None):
        raise SpecError("give either a deployment or weight_bytes_per_gpu [B] (with num_gpus), not both or neither")
    if deployment is not None:
        if num_gpus is not None:
            raise SpecError("num_gpus comes from the deployment (tp x pp); do not give both")
        deployment = _resolved(deployment)
        par = deployment.parallel
        w = np.asarray(weights_per_gpu(deployment.model, deployment.precision, par), dtype=float)
        gpus = np.asarray(float(par.tp * par.pp))
    else:
        w = non_negative(weight_bytes_per_gpu, "byte", "weight_bytes_per_gpu", "weights each GPU loads")
        gpus = positive(1 if num_gpus is None else num_gpus, "dimensionless", "num_gpus", "GPUs of one replica")
    node = positive(gpus_per_node, "dimensionless", "gpus_per_node", "GPUs sharing one storage link")
    for name, count in (("num_gpus", gpus), ("gpus_per_node", node)):
        if np.any(count != np.round(count)):
            raise SpecError(f"{name} must be a whole number of GPUs, got {_shown(count)}")
    sharing = np.minimum(gpus, node)
    prov = non_negative(provisioning_s, "second", "provisioning_s", "machine provisioning time")
    image = non_negative(image_bytes, "byte", "image_bytes", "container image size; 0 when cached")
    registry = positive(registry_bytes_per_s, "byte/second", "registry_bytes_per_s", "effective image pull rate")
    storage = positive(storage_bytes_per_s, "byte/second", "storage_bytes_per_s", "weight storage read rate per node")
    warm = non_negative(warmup_s, "second", "warmup_s", "engine warm-up time")
    return ColdStart(
        provisioning_s=scalar_or_array(prov), image_pull_s=scalar_or_array(image / registry),
        weight_load_s=scalar_or_array(w * sharing / storage), warmup_s=scalar_or_array(warm),
        weight_bytes_per_gpu=scalar_or_array(w), gpus_per_storage_link=scalar_or_array(sharing),
    )


@dataclass(frozen=True)
class Headroom:
    """Warm replicas kept beyond current demand so that a rise is served while new ones start.

    Attributes
    ----------
    lead_time_s : float or numpy.ndarray
        Reaction plus cold start: how long new capacity takes to arrive [s].
    demand_rise : float or numpy.ndarray
        Traffic added during the lead time [request/s].
    requests_per_s_per_replica : float or numpy.ndarray
        Capacity of one replica [request/s].
    backlog_requests : float or numpy.ndarray
        Requests beyond capacity during the lead time with no headroom [request].
    usd_per_replica_hour : float or numpy.ndarray
        Price of one replica [USD/hour] (NaN when not given).
    """

    lead_time_s: np.ndarray | float
    demand_rise: np.ndarray | float
    requests_per_s_per_replica: np.ndarray | float
    backlog_requests: np.ndarray | float
    usd_per_replica_hour: np.ndarray | float

    @property
    def extra_replicas(self) -> np.ndarray | float:
        """Headroom as a fraction of replicas [-]."""
        return scalar_or_array(np.asarray(self.demand_rise) / self.requests_per_s_per_replica)

    @property
    def extra_replicas_whole(self) -> np.ndarray | float:
        """Whole replicas to keep warm [-]."""
        return scalar_or_array(whole(np.asarray(self.extra_replicas)))

    @property
    def usd_per_hour(self) -> np.ndarray | float:
        """What the warm replicas cost [USD/hour] (NaN without a price)."""
        return scalar_or_array(np.asarray(self.extra_replicas_whole) * self.usd_per_replica_hour)

    def to_dict(self) -> dict[str, Any]:
        """Inputs and headroom, JSON-ready."""
        keys = ("lead_time_s", "demand_rise", "requests_per_s_per_replica", "extra_replicas",
                "extra_replicas_whole", "backlog_requests", "usd_per_replica_hour", "usd_per_hour")
        return {k: jsonable(np.asarray(getattr(self, k), dtype=float)) for k in keys}

    def __str__(self) -> str:
        return table("warm headroom for a traffic rise", {
            "lead s": self.lead_time_s, "rise req/s": self.demand_rise, "extra replicas": self.extra_replicas,
            "keep warm": self.extra_replicas_whole, "backlog req": self.backlog_requests, "$/h": self.usd_per_hour})


@shapes_agree
def warm_headroom(*, requests_per_s_per_replica: Any, cold_start_s: Any, ramp_requests_per_s2: Any = 0.0,
                  step_requests_per_s: Any = 0.0, reaction_s: Any = 0.0,
                  usd_per_replica_hour: Any = None) -> Headroom:
    r"""Replicas to keep warm for a traffic ramp or step that new replicas cannot follow.

    Parameters
    ----------
    requests_per_s_per_replica : float or array_like or pint.Quantity
        Traffic one replica sustains within its SLOs [request/s].
    cold_start_s : float or array_like or ColdStart
        Time to bring a replica up [s] (a :class:`ColdStart` gives its ``total_s``).
    ramp_requests_per_s2 : float or array_like or pint.Quantity
        Rate at which traffic rises [request/s^2], e.g. ``Q("60 request/s/minute")``.
    step_requests_per_s : float or array_like or pint.Quantity
        Sudden jump of traffic [request/s].
    reaction_s : float or array_like or pint.Quantity
        Time to notice the rise and order new replicas (metrics window, autoscaler period) [s].
    usd_per_replica_hour : float, optional
        Price of one replica [USD/hour], to price the headroom.

    Returns
    -------
    Headroom

    Notes
    -----
    New capacity arrives a lead time ``L = t_react + T_cold`` after the rise starts;
    by then traffic has grown by ``step + ramp L``, which warm replicas must carry:

    .. math:: n_{warm} = \frac{\Delta\lambda_{step} + \dot\lambda \, L}{C}

    Without headroom the requests beyond capacity over ``L`` are
    ``step L + ramp L^2 / 2`` (they queue or are refused).

    Examples
    --------
    >>> h = warm_headroom(requests_per_s_per_replica=2.0, cold_start_s=300.0, ramp_requests_per_s2=0.01)
    >>> h.extra_replicas, h.extra_replicas_whole   # 0.01 x 300 / 2
    (1.5, 2.0)
    """
    cap = positive(requests_per_s_per_replica, "request/second", "requests_per_s_per_replica",
                   "traffic one replica sustains within its SLOs")
    cold_value = cold_start_s.total_s if isinstance(cold_start_s, ColdStart) else cold_start_s
    cold = non_negative(cold_value, "second", "cold_start_s", "time to bring a replica up")
    ramp = non_negative(ramp_requests_per_s2, "request/second**2", "ramp_requests_per_s2",
                        "how fast traffic rises; a fall needs no headroom")
    step = non_negative(step_requests_per_s, "request/second", "step_requests_per_s",
                        "sudden traffic jump; a drop needs no headroom")
    react = non_negative(reaction_s, "second", "reaction_s", "time to notice the rise and order replicas")
    price = np.nan if usd_per_replica_hour is None else non_negative(
        usd_per_replica_hour, "USD/hour", "usd_per_replica_hour", "hourly price of one replica")
    lead = react + cold
    return Headroom(
        lead_time_s=scalar_or_array(lead), demand_rise=scalar_or_array(step + ramp * lead),
        requests_per_s_per_replica=scalar_or_array(cap),
        backlog_requests=scalar_or_array(step * lead + 0.5 * ramp * lead**2),
        usd_per_replica_hour=scalar_or_array(price),
    )
