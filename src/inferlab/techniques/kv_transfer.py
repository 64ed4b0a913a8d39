"""The KV cache's trip from a prefill replica to a decode replica (:mod:`.disaggregation`).

The prompt's KV cache (``model.kv_cache_bytes(isl)`` per request, in the prefill pool's KV
format) leaves the prefill replica's ``tp`` GPUs in parallel, each over its own link, and
reaches the decode replica's ``tp`` GPUs. Pools that fit in one scale-up domain together
use the scale-up fabric; otherwise each GPU's scale-out NIC (per GPU, per direction).
Layer by layer, the transfer overlaps the prefill.

References
----------
.. [1] Patel et al., "Splitwise: Efficient Generative LLM Inference Using Phase
       Splitting", ISCA 2024, sec. IV-C (layer-wise KV transfer overlapped with prefill).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..core.interconnect import scale_up_bandwidth
from ..core.memory import kv_share
from ..core.parallelism import state_share
from ..errors import CombinationError, InfeasibleError
from ..specs.hardware import HardwareSpec
from .disaggregation import NETWORK_LATENCY_S, Disaggregation
from .step import ResolvedDeployment


@dataclass(frozen=True)
class KvLink:
    """The path a KV cache takes: per-GPU bandwidths [B/s per direction] and latency [s]."""

    name: str
    send_bandwidth: float
    receive_bandwidth: float
    latency_s: float


def kv_link(disagg: Disaggregation, prefill: ResolvedDeployment, decode_dep: ResolvedDeployment) -> KvLink:
    """The link between the pools (see :class:`Disaggregation` ``link``).

    Raises
    ------
    InfeasibleError
        ``link="nvlink"`` for pools that do not share a scale-up domain, or a network link
        on hardware without a NIC in its spec (pass ``link_bandwidth``).
    """
    hw_p, hw_d = prefill.hardware, decode_dep.hardware
    gpus = disagg.prefill.num_gpus + disagg.decode.num_gpus
    domain = int(hw_p.scale_up.domain_size.si)
    one_node = hw_p.id == hw_d.id and gpus <= domain
    kind = ("nvlink" if one_node else "network") if disagg.link == "auto" else disagg.link
    if kind == "nvlink":
        if not one_node:
            raise InfeasibleError(f"link=nvlink needs both pools on one scale-up domain, but {gpus} GPUs "
                                  f"({hw_p.id} + {hw_d.id}) exceed the {domain}-GPU domain of {hw_p.id}; use "
                                  "link=network or smaller pools")
        send = scale_up_bandwidth(hw_p, 1 + decode_dep.tp)
        receive = scale_up_bandwidth(hw_p, 1 + prefill.tp)
        name, latency = hw_p.scale_up.kind, prefill.profile.collective.latency_s
    else:
        send, receive = (_nic(hw, disagg.link_bandwidth) for hw in (hw_p, hw_d))
        name, latency = "network", NETWORK_LATENCY_S
    if disagg.link_bandwidth is not None:
        send = receive = float(disagg.link_bandwidth)
    return KvLink(name, send, receive, latency if disagg.link_latency_s is None else disagg.link_latency_s)


def _nic(hw: HardwareSpec, override: Any) -> float:
    if hw.scale_out is not None:
        return hw.scale_out.bandwidth.si
    if override is not None:
        return float(override)
    # a missing input, not a deployment that cannot run: bad input (exit 2), a grid's row still says why
    raise CombinationError(f"{hw.id} has no scale-out NIC in its spec to send the KV cache over: give the link's "
                           "bandwidth (--disagg ...,bw=400Gb/s; link_bandwidth= in Python)")


def exposed_transfer_s(transfer_s: Any, prefill_s: Any, num_layers: int, *, overlap: bool = True,
                       latency_s: float = 0.0) -> np.ndarray:
    """Part of a KV transfer that the prefill cannot hide [s].

    Parameters
    ----------
    transfer_s : array [s]
        Wire time of the whole KV cache (bytes / bandwidth).
    prefill_s : array [s]
        Prefill time.
    num_layers : int
        Layers, each sent as soon as it is computed.
    overlap : bool
        False: the transfer starts after the prefill and all of it is exposed.
    latency_s : float [s]
        Fixed cost, exposed once.

    Notes
    -----
    With ``L`` layers of prefill time ``c = P / L`` and transfer time ``x = X / L`` each,
    layer ``l`` is ready at ``l c``; the link sends layers in order, so the last one
    arrives at ``max(L c + x, c + L x)`` (compute-bound: the last layer's transfer follows
    the prefill; link-bound: the link is busy from the first layer on). Subtracting the
    prefill ``P = L c``::

        exposed = latency + max(X / L, X - P (L - 1) / L)

    When ``x < c`` only the last layer's transfer ``X / L`` shows.
    """
    transfer_s = np.asarray(transfer_s, float)
    if not overlap:
        return latency_s + transfer_s
    last_layer = transfer_s / num_layers
    return latency_s + np.maximum(last_layer, transfer_s - np.asarray(prefill_s, float) * (num_layers - 1) / num_layers)


@dataclass(frozen=True)
class KvTransfer:
    """The KV cache of one prefill batch sent to the decode pool: a row beside the step's ops.

    ``bytes`` cross the link in all; ``time_s`` is latency plus wire time, ``exposed_s`` the
    part added to TTFT.
    """

    link: KvLink
    bytes: np.ndarray
    bandwidth: float
    time_s: np.ndarray
    exposed_s: np.ndarray
    name: str = "kv_transfer"
    kind: str = "transfer"

    def row(self, point: int = 0, total_s: float | None = None) -> dict[str, Any]:
        """The row at one grid point, with the keys of ``Estimate.op_table`` rows (plus
        ``exposed_s``); ``share`` is of ``total_s`` when given (the TTFT, say)."""
        at = lambda x: float(np.ravel(x)[point] if np.size(x) > 1 else np.ravel(x)[0])
        return {"op": self.name, "group": self.link.name, "count": 1, "kind": self.kind, "precision": "-",
                "flops": 0.0, "bytes": 0.0, "weight_read_bytes": 0.0, "act_read_bytes": 0.0,
                "act_write_bytes": 0.0, "kv_read_bytes": 0.0, "kv_write_bytes": 0.0,
                "comm_bytes": at(self.bytes), "intensity": 0.0, "bound": "communication",
                "time_s": at(self.time_s), "exposed_s": at(self.exposed_s),
                "share": at(self.exposed_s) / total_s if total_s else float("nan")}


def kv_transfer(disagg: Disaggregation, prefill: ResolvedDeployment, decode_dep: ResolvedDeployment, batch: Any, isl: Any,
                prefill_s: Any, freed: tuple[str, ...] = ("sliding", "chunked")) -> KvTransfer:
    """KV transfer of ``batch`` prompts of ``isl`` tokens after a ``prefill_s`` prefill.

    Notes
    -----
    ``K = batch x (kv_cache_bytes(isl) + recurrent_state_bytes())`` unique bytes. Each of the decode replica's ``tp_d``
    GPUs receives its share ``K x s_d`` (``s_d = kv_share``: ``1 / tp_d``, or more where KV
    heads or an MLA latent are replicated), so ``tp_d K s_d`` bytes cross the link, sent by
    the ``tp_p`` prefill GPUs in parallel::

        wire = max(tp_d K s_d / (tp_p B_send), K s_d / B_receive)

    which is ``K / (min(tp_p, tp_d) B)`` when nothing is replicated. A windowed layer sends its
    window's tokens where the engine frees the rest (``freed``: the kinds it frees for the model,
    :func:`~inferlab.engines.window_pool.held_windows`), every token where it keeps them. With
    attention data parallelism a prompt is prefilled on one rank and its KV cache kept whole by one decode
    rank: one GPU sends (``tp_p`` = 1 above) and one receives all of it (``tp_d s_d`` = 1);
    a batch of prompts is spread over ``min(batch, tp)`` ranks, which send (or receive)
    their own prompts in parallel.
    """
    model, link = prefill.model, kv_link(disagg, prefill, decode_dep)
    b = np.asarray(batch, float)
    # a hybrid model's linear-attention state goes with its prompt's KV cache, split as its heads
    kv, state = b * model.kv_cache_bytes(isl, prefill.precision.kv_cache, freed=freed), b * model.recurrent_state_bytes()
    unique = kv + state
    adp_p, adp_d = prefill.parallel.attention_dp, decode_dep.parallel.attention_dp
    if adp_d:  # a request's KV cache lives whole on the one rank that holds it
        # the busiest rank's prompts
        moved, received = unique, unique / np.clip(b, 1.0, decode_dep.parallel.attention_groups)
    else:
        received = kv * kv_share(model, decode_dep.tp) + state * state_share(model, decode_dep.tp)
        moved = received * decode_dep.tp
    sending = np.clip(b, 1.0, prefill.parallel.attention_groups) if adp_p else prefill.tp
    wire = np.maximum(moved / (sending * link.send_bandwidth), received / link.receive_bandwidth)
    senders, receivers = (1 if adp_p else prefill.tp), (1 if adp_d else decode_dep.tp)
    exposed = exposed_transfer_s(wire, prefill_s, model.num_hidden_layers, overlap=disagg.overlap,
                                 latency_s=link.latency_s)
    bandwidth = min(senders * link.send_bandwidth, receivers * link.receive_bandwidth)  # = moved / wire for one prompt
    return KvTransfer(link, np.asarray(moved, float), bandwidth, link.latency_s + wire, np.asarray(exposed, float))
