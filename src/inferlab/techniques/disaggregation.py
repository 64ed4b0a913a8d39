"""Disaggregated serving: prefill and decode on separate pools of GPUs.

A prompt is prefilled on a replica of the *prefill pool*; its KV cache then travels to a
replica of the *decode pool*, which generates the output tokens. The technique wraps the
step model: each pool is an ordinary :class:`~inferlab.core.phases.Deployment` timed by
the core; this module adds the KV transfer between the pools and sizes them.

- **KV transfer.** The prompt's KV cache (``model.kv_cache_bytes(isl)`` per request, in the
  prefill pool's KV format) leaves the prefill replica's ``tp`` GPUs in parallel, each
  over its own link, and reaches the decode replica's ``tp`` GPUs. Pools that fit in one
  scale-up domain together use the scale-up fabric; otherwise each GPU's scale-out NIC
  (per GPU, per direction). Layer by layer, the transfer overlaps the prefill.
- **TTFT** = prefill + the exposed part of the transfer + the decode step that emits the
  first token (``first_token="decode"``: vLLM's P/D connectors recompute the last prompt
  token on the decode instance, whose first step produces the token the user sees; with
  ``"prefill"`` the prefill's token is forwarded as in SGLang and DistServe).
- **TPOT** comes from the decode pool alone: plain decode steps at the decode batch, no
  prefill interleaved.
- **Sizing.** A request costs ``tp_p x cycle / prefill_batch`` prefill GPU-seconds and
  ``tp_d x decode time / decode_batch`` decode GPU-seconds; their ratio balances the pools.

Queueing is not modelled here: TTFT holds no wait for a free replica or for the step the
decode replica is running when the KV arrives (on average half a step under load).

References
----------
.. [1] Zhong et al., "DistServe: Disaggregating Prefill and Decoding for Goodput-optimized
       Large Language Model Serving", OSDI 2024, sec. 3-4 (pool sizing, KV transfer).
.. [2] Patel et al., "Splitwise: Efficient Generative LLM Inference Using Phase
       Splitting", ISCA 2024, sec. IV-C (layer-wise KV transfer overlapped with prefill).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any, Literal

import numpy as np

from ..calibration.profile import Profile
from ..core.graph import Step
from ..core.interconnect import scale_up_bandwidth
from ..core.memory import MemoryPlan, kv_share, plan_memory, require_weights_fit
from ..core.phases import Deployment, StepResult, decode, mean_decode_step_s, run_step
from ..errors import InfeasibleError, InferlabError, SpecError, UnknownNameError
from ..specs.catalog import hardware_ids, load_model
from ..specs.hardware import HardwareSpec
from ..specs.model import ModelSpec
from ..results.estimate import Estimate
from ..results.render import text_table
from ..units import Q, to_si, to_si_array
from .prefix_cache import PrefixCache, effective_cached_tokens
from .quantization import PrecisionConfig

LinkKind = Literal["auto", "nvlink", "network"]
FirstToken = Literal["decode", "prefill"]

#: One KV transfer's fixed cost over the network [s]: an RDMA write completes in about
#: 2 us on NDR InfiniBand; the connector's completion notice to the decode side adds a
#: message of its own. An order of magnitude, not calibrated; ``link_latency_s`` overrides.
NETWORK_LATENCY_S = 20e-6

_POOL = re.compile(r"^(?P<hw>[a-z0-9][a-z0-9.\-]*?)(?:[x*](?P<n>\d+))?$")
_ON_OFF = {"on": True, "true": True, "yes": True, "off": False, "false": False, "no": False}


def resolve_hardware(name: str | HardwareSpec) -> str:
    """Catalog id for ``name``: an id, or the unique id that starts with ``name-``
    (``h200`` -> ``h200-sxm``; ``h100`` is ambiguous)."""
    if isinstance(name, HardwareSpec):
        return name.id
    ids = hardware_ids()
    key = str(name).strip().lower()
    if key in ids:
        return key
    matches = [h for h in ids if h.startswith(key + "-")]
    if len(matches) == 1:
        return matches[0]
    if matches:
        raise SpecError(f"hardware {name!r} is ambiguous: it could be {', '.join(matches)}; write the full id")
    raise UnknownNameError("hardware", str(name), ids)


@dataclass(frozen=True)
class Pool:
    """GPUs of one phase: ``num_gpus`` GPUs of one kind as ``num_gpus / tp`` replicas.

    ``tp`` defaults to ``num_gpus`` (one replica); ``engine`` and ``profile`` default to
    those given to :func:`estimate_disaggregated`.
    """

    hardware: str | HardwareSpec
    num_gpus: int = 1
    tp: int | None = None
    precision: Any = "bf16"
    engine: str | None = None
    profile: str | Path | Profile | None = None

    def __post_init__(self) -> None:
        for name in ("num_gpus", "tp"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1):
                raise SpecError(f"pool: {name} must be an integer >= 1, got {value!r}")
        tp = self.num_gpus if self.tp is None else int(self.tp)
        if self.num_gpus % tp:
            raise SpecError(f"pool: tp={tp} does not divide num_gpus={self.num_gpus}; a pool is num_gpus / tp "
                            "replicas of tp GPUs each")
        object.__setattr__(self, "tp", tp)
        if isinstance(self.hardware, str):
            object.__setattr__(self, "hardware", resolve_hardware(self.hardware))

    @property
    def replicas(self) -> int:
        """Tensor-parallel replicas in the pool."""
        return self.num_gpus // int(self.tp or 1)

    @property
    def hardware_id(self) -> str:
        """Catalog id of the pool's GPU."""
        return self.hardware if isinstance(self.hardware, str) else self.hardware.id

    @classmethod
    def parse(cls, text: str) -> Pool:
        """``HARDWARE[xCOUNT][:tpN][:PRECISION]``, e.g. ``h200x8:tp4:fp8`` (see :meth:`Disaggregation.parse`)."""
        head, *attrs = [part.strip() for part in text.strip().lower().split(":")]
        match = _POOL.match(head)
        if not match:
            raise SpecError(f"pool {text!r}: expected HARDWARE[xCOUNT][:tpN][:PRECISION], e.g. 'h200x4' or "
                            "'h100-sxmx8:tp4:fp8'")
        kw: dict[str, Any] = {"hardware": match["hw"], "num_gpus": int(match["n"] or 1)}
        for attr in attrs:
            if re.fullmatch(r"tp\d+", attr):
                kw["tp"] = int(attr[2:])
            else:
                try:
                    kw["precision"] = str(PrecisionConfig.parse(attr))
                except InferlabError as err:
                    raise SpecError(f"pool {text!r}: {attr!r} is neither tpN nor a precision ({err})") from None
        try:
            return cls(**kw)
        except UnknownNameError as err:
            raise SpecError(f"pool {text!r}: {err}") from None

    def __str__(self) -> str:
        text = f"{self.hardware_id}x{self.num_gpus}" + (f":tp{self.tp}" if self.tp != self.num_gpus else "")
        return text + (f":{self.precision}" if isinstance(self.precision, str) and self.precision != "bf16" else "")


@dataclass(frozen=True)
class Disaggregation:
    """Prefill and decode pools and the link between them.

    Parameters
    ----------
    prefill, decode : Pool
    link : {"auto", "nvlink", "network"}
        ``nvlink``: the scale-up fabric of one node (NVLink, Infinity Fabric, or PCIe on
        cards without one); ``network``: the scale-out NICs. ``auto`` takes the fabric when
        both pools are the same GPU and fit in one scale-up domain together.
    link_bandwidth : float or str, optional [B/s per GPU, per direction]
        Replaces the hardware figure (``"200 Gb/s"``, or a number in B/s).
    link_latency_s : float, optional [s]
        Fixed cost of one transfer; default :data:`NETWORK_LATENCY_S` over the network,
        the profile's collective step latency over the fabric.
    overlap : bool
        Send each layer's KV while later layers are prefilled.
    first_token : {"decode", "prefill"}
        Which pool emits the first token (see the module notes).
    """

    prefill: Pool
    decode: Pool
    link: LinkKind = "auto"
    link_bandwidth: float | str | None = None
    link_latency_s: float | None = None
    overlap: bool = True
    first_token: FirstToken = "decode"

    def __post_init__(self) -> None:
        if self.link not in ("auto", "nvlink", "network"):
            raise SpecError(f"disaggregation: link must be auto, nvlink or network, got {self.link!r}")
        if self.first_token not in ("decode", "prefill"):
            raise SpecError(f"disaggregation: first_token must be decode or prefill, got {self.first_token!r}")
        if self.link_bandwidth is not None:
            bw = to_si(self.link_bandwidth, "byte/second") if isinstance(self.link_bandwidth, str) else \
                float(self.link_bandwidth)
            if not bw > 0 or not np.isfinite(bw):
                raise SpecError(f"disaggregation: link_bandwidth must be > 0, got {self.link_bandwidth!r}")
            object.__setattr__(self, "link_bandwidth", bw)
        if self.link_latency_s is not None and not self.link_latency_s >= 0:
            raise SpecError(f"disaggregation: link_latency_s must be >= 0, got {self.link_latency_s!r}")

    @classmethod
    def parse(cls, text: str) -> Disaggregation:
        """Read a command-line value.

        Grammar (comma-separated items, any order; ``prefill`` and ``decode`` required)::

            SPEC  := ITEM ("," ITEM)*
            ITEM  := "prefill=" POOL | "decode=" POOL | "link=" ("auto" | "nvlink" | "network")
                   | "bw=" RATE | "latency=" TIME | "overlap=" ("on" | "off")
                   | "first_token=" ("decode" | "prefill")
            POOL  := HARDWARE ["x" COUNT] (":tp" N | ":" PRECISION)*
            RATE  := a bandwidth per GPU and direction with its unit, e.g. 400Gb/s or 50GB/s
            TIME  := a duration with its unit, e.g. 20us

        ``HARDWARE`` is a catalog id or the unique id it starts (``h200`` = ``h200-sxm``);
        ``COUNT`` GPUs (default 1) form ``COUNT / N`` replicas of tensor-parallel size ``N``
        (default ``COUNT``).

        Examples
        --------
        >>> d = Disaggregation.parse("prefill=h200x4,decode=h200x8:tp4,link=network")
        >>> str(d.prefill), d.decode.replicas, d.link
        ('h200-sxmx4', 2, 'network')
        """
        if not isinstance(text, str) or not text.strip():
            raise SpecError("disaggregation: expected e.g. 'prefill=h200x4,decode=h200x8', got " + repr(text))
        kw: dict[str, Any] = {}
        keys = {"prefill": "prefill", "decode": "decode", "link": "link", "bw": "link_bandwidth",
                "link_bandwidth": "link_bandwidth", "latency": "link_latency_s", "overlap": "overlap",
                "first_token": "first_token"}
        for item in (part.strip() for part in text.split(",")):
            key, sep, value = (s.strip() for s in item.partition("="))
            field = keys.get(key.lower())
            if not sep or field is None or not value:
                raise SpecError(f"disaggregation {text!r}: cannot read {item!r}; items are prefill=POOL, decode=POOL, "
                                "link=auto|nvlink|network, bw=RATE, latency=TIME, overlap=on|off, "
                                "first_token=decode|prefill (POOL like h200x4:tp4:fp8)")
            if field in kw:
                raise SpecError(f"disaggregation {text!r}: {key} is given twice")
            kw[field] = _parse_value(field, value, text)
        missing = [p for p in ("prefill", "decode") if p not in kw]
        if missing:
            raise SpecError(f"disaggregation {text!r}: {' and '.join(missing)}=POOL missing, e.g. "
                            "'prefill=h200x4,decode=h200x8'")
        return cls(**kw)

    def __str__(self) -> str:
        text = f"prefill={self.prefill},decode={self.decode},link={self.link}"
        if self.link_bandwidth is not None:
            text += f",bw={float(self.link_bandwidth) / 1e9:g}GB/s"
        if self.link_latency_s is not None:
            text += f",latency={self.link_latency_s * 1e6:g}us"
        return text + f",overlap={'on' if self.overlap else 'off'},first_token={self.first_token}"


def _parse_value(field: str, value: str, text: str) -> Any:
    low = value.lower()
    if field in ("prefill", "decode"):
        return Pool.parse(value)
    if field == "link":
        if low not in ("auto", "nvlink", "network"):
            raise SpecError(f"disaggregation {text!r}: link must be auto, nvlink or network, got {value!r}")
        return low
    if field in ("link_bandwidth", "link_latency_s"):
        unit, example = ("byte/second", "400Gb/s") if field == "link_bandwidth" else ("second", "20us")
        try:
            return to_si(value, unit)
        except InferlabError as err:
            raise SpecError(f"disaggregation {text!r}: {value!r} is not a {'bandwidth' if 'band' in field else 'time'}"
                            f" ({err}); write e.g. {example}") from None
    if field == "overlap":
        if low not in _ON_OFF:
            raise SpecError(f"disaggregation {text!r}: overlap must be on or off, got {value!r}")
        return _ON_OFF[low]
    if low not in ("decode", "prefill"):
        raise SpecError(f"disaggregation {text!r}: first_token must be decode or prefill, got {value!r}")
    return low


@dataclass(frozen=True)
class KvLink:
    """The path a KV cache takes: per-GPU bandwidths [B/s per direction] and latency [s]."""

    name: str
    send_bandwidth: float
    receive_bandwidth: float
    latency_s: float


def kv_link(disagg: Disaggregation, prefill: Deployment, decode_dep: Deployment) -> KvLink:
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
    raise InfeasibleError(f"{hw.id} has no scale-out NIC in its spec; pass link_bandwidth (bw=400Gb/s)")


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
        at = lambda x: float(np.ravel(x)[point] if np.size(x) > 1 else np.ravel(x)[0])  # noqa: E731
        return {"op": self.name, "group": self.link.name, "count": 1, "kind": self.kind, "precision": "-",
                "flops": 0.0, "bytes": 0.0, "weight_read_bytes": 0.0, "act_read_bytes": 0.0,
                "act_write_bytes": 0.0, "kv_read_bytes": 0.0, "kv_write_bytes": 0.0,
                "comm_bytes": at(self.bytes), "intensity": 0.0, "bound": "communication",
                "time_s": at(self.time_s), "exposed_s": at(self.exposed_s),
                "share": at(self.exposed_s) / total_s if total_s else float("nan")}


def kv_transfer(disagg: Disaggregation, prefill: Deployment, decode_dep: Deployment, batch: Any, isl: Any,
                prefill_s: Any) -> KvTransfer:
    """KV transfer of ``batch`` prompts of ``isl`` tokens after a ``prefill_s`` prefill.

    Notes
    -----
    ``K = batch x kv_cache_bytes(isl)`` unique bytes. Each of the decode replica's ``tp_d``
    GPUs receives its share ``K x s_d`` (``s_d = kv_share``: ``1 / tp_d``, or more where KV
    heads or an MLA latent are replicated), so ``tp_d K s_d`` bytes cross the link, sent by
    the ``tp_p`` prefill GPUs in parallel::

        wire = max(tp_d K s_d / (tp_p B_send), K s_d / B_receive)

    which is ``K / (min(tp_p, tp_d) B)`` when nothing is replicated.
    """
    model, link = prefill.model, kv_link(disagg, prefill, decode_dep)
    unique = np.asarray(batch, float) * model.kv_cache_bytes(isl, prefill.precision.kv_cache)
    received = unique * kv_share(model, decode_dep.tp)
    moved = received * decode_dep.tp
    wire = np.maximum(moved / (prefill.tp * link.send_bandwidth), received / link.receive_bandwidth)
    exposed = exposed_transfer_s(wire, prefill_s, model.num_hidden_layers, overlap=disagg.overlap,
                                 latency_s=link.latency_s)
    bandwidth = min(prefill.tp * link.send_bandwidth, decode_dep.tp * link.receive_bandwidth)  # = moved / wire
    return KvTransfer(link, np.asarray(moved, float), bandwidth, link.latency_s + wire, np.asarray(exposed, float))


@dataclass(frozen=True)
class DisaggEstimate:
    """Predicted disaggregated serving; arrays when inputs were grids, times in seconds.

    Notes
    -----
    A prefill replica turns out ``prefill_batch`` requests every ``cycle = max(prefill,
    transfer)`` (compute and the link run concurrently, so the slower one paces it); a
    decode replica holds ``decode_batch`` requests for ``first step + (osl - 1) x tpot``.
    The pools as given serve ``min`` of the two request rates; the balanced ratio sizes
    them so that neither waits.
    """

    disaggregation: Disaggregation
    prefill_deployment: Deployment
    decode_deployment: Deployment
    isl: np.ndarray
    osl: np.ndarray
    prefill_batch: np.ndarray
    decode_batch: np.ndarray
    prefill_step: StepResult
    transfer: KvTransfer
    prefill_s: np.ndarray
    first_token_step_s: np.ndarray
    tpot_s: np.ndarray
    prefill_memory: MemoryPlan
    decode_memory: MemoryPlan
    request_rate: np.ndarray | None = None

    @property
    def ttft_s(self) -> np.ndarray:
        """Prefill + exposed KV transfer + the decode step that emits the first token [s]."""
        return self.prefill_s + self.transfer.exposed_s + self.first_token_step_s

    @property
    def ttft(self):
        """Time to first token (pint, ms)."""
        return Q(_scalar(self.ttft_s), "s").to("ms")

    @property
    def tpot(self):
        """Time per output token after the first, on the decode pool (pint, ms)."""
        return Q(_scalar(self.tpot_s), "s").to("ms")

    @property
    def throughput(self):
        """Output tokens/s of the pools as given, per GPU of both pools, and per user (pint)."""
        with np.errstate(divide="ignore"):
            per_user = np.where(self.tpot_s > 0, 1.0 / self.tpot_s, np.nan)
        return {"system": Q(_scalar(self.output_tokens_per_s), "tok/s"),
                "per_gpu": Q(_scalar(self.output_tokens_per_s_per_gpu), "tok/s"),
                "per_user": Q(_scalar(per_user), "tok/s")}

    @property
    def num_gpus(self) -> int:
        return self.disaggregation.prefill.num_gpus + self.disaggregation.decode.num_gpus

    @cached_property
    def prefill_cycle_s(self) -> np.ndarray:
        """Time a prefill replica spends per batch: ``max(prefill, transfer)`` [s]."""
        return np.maximum(self.prefill_s, self.transfer.time_s)

    @cached_property
    def decode_s(self) -> np.ndarray:
        """Time a request occupies a decode slot: first step + ``(osl - 1) x tpot`` [s]."""
        return self.first_token_step_s + (self.osl - 1.0) * self.tpot_s

    @property
    def prefill_gpu_s_per_request(self) -> np.ndarray:
        """``tp_p x cycle / prefill_batch`` [GPU s]."""
        return self.disaggregation.prefill.tp * self.prefill_cycle_s / self.prefill_batch

    @property
    def decode_gpu_s_per_request(self) -> np.ndarray:
        """``tp_d x decode_s / decode_batch`` [GPU s]."""
        return self.disaggregation.decode.tp * self.decode_s / self.decode_batch

    @property
    def pd_ratio(self) -> np.ndarray:
        """Prefill GPUs per decode GPU that balance the pools [1]."""
        with np.errstate(divide="ignore"):
            return self.prefill_gpu_s_per_request / self.decode_gpu_s_per_request

    @property
    def prefill_requests_per_s(self) -> np.ndarray:
        return self.disaggregation.prefill.replicas * self.prefill_batch / self.prefill_cycle_s

    @property
    def decode_requests_per_s(self) -> np.ndarray:
        with np.errstate(divide="ignore"):
            return self.disaggregation.decode.replicas * self.decode_batch / self.decode_s

    @property
    def bottleneck(self) -> np.ndarray:
        """``prefill`` or ``decode``: the pool that limits the given pools' request rate."""
        return np.where(self.prefill_requests_per_s < self.decode_requests_per_s, "prefill", "decode")

    @property
    def output_tokens_per_s(self) -> np.ndarray:
        """Output tokens per second of the pools as given [tok/s]."""
        return self.osl * np.minimum(self.prefill_requests_per_s, self.decode_requests_per_s)

    @property
    def output_tokens_per_s_per_gpu(self) -> np.ndarray:
        return self.output_tokens_per_s / self.num_gpus

    @property
    def balanced_output_tokens_per_s_per_gpu(self) -> np.ndarray:
        """Per GPU with the pools in the balanced ratio: ``osl / (prefill + decode GPU s)``."""
        return self.osl / (self.prefill_gpu_s_per_request + self.decode_gpu_s_per_request)

    @property
    def gpus_needed(self) -> dict[str, np.ndarray] | None:
        """Whole replicas each pool needs for ``request_rate`` [GPU], or None without a rate."""
        if self.request_rate is None:
            return None
        p, d = self.disaggregation.prefill, self.disaggregation.decode
        return {"prefill": np.ceil(self.request_rate * self.prefill_cycle_s / self.prefill_batch) * p.tp,
                "decode": np.ceil(self.request_rate * self.decode_s / self.decode_batch) * d.tp}

    def to_dict(self) -> dict[str, Any]:
        """Plain floats (lists for grids), seconds and tokens/s."""
        val = lambda x: (lambda s: s.tolist() if isinstance(s, np.ndarray) else s)(_scalar(x))  # noqa: E731
        need = self.gpus_needed
        return {
            "model": self.prefill_deployment.model.id or self.prefill_deployment.model.name,
            "disaggregation": str(self.disaggregation), "num_gpus": self.num_gpus,
            "isl": val(self.isl), "osl": val(self.osl), "prefill_batch": val(self.prefill_batch),
            "decode_batch": val(self.decode_batch), "ttft_s": val(self.ttft_s), "prefill_s": val(self.prefill_s),
            "kv_transfer_s": val(self.transfer.time_s), "kv_transfer_exposed_s": val(self.transfer.exposed_s),
            "kv_transfer_bytes": val(self.transfer.bytes), "kv_link": self.transfer.link.name,
            "kv_link_bytes_per_s": self.transfer.bandwidth, "first_token_step_s": val(self.first_token_step_s),
            "tpot_s": val(self.tpot_s), "output_tokens_per_s": val(self.output_tokens_per_s),
            "output_tokens_per_s_per_gpu": val(self.output_tokens_per_s_per_gpu),
            "balanced_output_tokens_per_s_per_gpu": val(self.balanced_output_tokens_per_s_per_gpu),
            "pd_ratio": val(self.pd_ratio), "bottleneck": val(self.bottleneck),
            "request_rate": None if self.request_rate is None else val(self.request_rate),
            "gpus_needed": None if need is None else {k: val(v) for k, v in need.items()},
        }

    HEADERS = ["P batch", "D batch", "isl", "osl", "TTFT ms", "prefill ms", "KV ms", "TPOT ms", "tok/s",
               "tok/s/GPU", "P:D", "bound"]

    def __str__(self) -> str:
        d, t = self.disaggregation, self.transfer
        head = (f"{self.prefill_deployment.model.id or self.prefill_deployment.model.name} disaggregated: prefill "
                f"{d.prefill}, decode {d.decode}, {self.prefill_deployment.precision}; KV over {t.link.name} at "
                f"{t.bandwidth / 1e9:.0f} GB/s, overlap {'on' if d.overlap else 'off'} (KV ms: exposed / total)")
        shape = np.shape(self.ttft_s)
        flat = lambda x: np.ravel(np.broadcast_to(np.asarray(x), shape))  # noqa: E731
        cols = [self.prefill_batch, self.decode_batch, self.isl, self.osl, self.ttft_s * 1e3, self.prefill_s * 1e3,
                t.exposed_s * 1e3, t.time_s * 1e3, self.tpot_s * 1e3, self.output_tokens_per_s,
                self.output_tokens_per_s_per_gpu, self.pd_ratio, self.bottleneck]
        c = [flat(col) for col in cols]
        rows = [[f"{c[0][j]:.0f}", f"{c[1][j]:.0f}", f"{c[2][j]:.0f}", f"{c[3][j]:.0f}", f"{c[4][j]:.1f}",
                 f"{c[5][j]:.1f}", f"{c[6][j]:.2f} / {c[7][j]:.2f}", f"{c[8][j]:.2f}", f"{c[9][j]:.0f}",
                 f"{c[10][j]:.0f}", f"{c[11][j]:.2f}", str(c[12][j])] for j in range(int(np.prod(shape)))]
        return head + "\n" + text_table(self.HEADERS, rows, right=set(range(len(self.HEADERS) - 1)))

    def __repr__(self) -> str:
        return f"<DisaggEstimate {str(self).splitlines()[0]}>"


def _scalar(x: Any) -> Any:
    arr = np.asarray(x)
    return arr.item() if arr.size == 1 else arr


def _plan(dep: Deployment, batch: np.ndarray, context: np.ndarray, step_tokens: np.ndarray, what: str,
          **kw: Any) -> MemoryPlan:
    """Memory of one pool's replica; raises when its batch does not fit."""
    plan = plan_memory(dep.model, dep.hardware, dep.precision, tp=dep.tp, batch=batch, context=context,
                       step_tokens=step_tokens, **kw)
    require_weights_fit(plan, dep.model, dep.hardware, dep.tp)
    if not np.all(plan.fits):
        largest = int(np.min(plan.max_sequences))
        need, free = float(np.max(plan.kv_batch)), float(np.min(plan.kv_budget))
        raise InfeasibleError(
            f"the {what} pool's batch of {int(np.max(batch))} sequences of {int(np.max(context))} tokens needs "
            f"{need / 1e9:.1f} GB of KV cache per GPU but {free / 1e9:.1f} GB is free after weights on "
            f"{dep.hardware.id} at tp={dep.tp}; the largest {what} batch that fits is {largest}",
            needed_bytes=need, available_bytes=free, suggestion={f"{what}_batch": largest})
    return plan


def estimate_disaggregated(model: str | ModelSpec, disagg: Disaggregation | str, *, isl: Any = 1024, osl: Any = 128,
                           prefill_batch: Any = 1, decode_batch: Any = 1, request_rate: Any = None,
                           engine: str = "generic", profile: str | Path | Profile = "default",
                           prefix_cache: PrefixCache | str | None = None, gpu_memory_utilization: float = 0.9,
                           kv_block_size: int = 16, max_num_tokens: int = 8192) -> DisaggEstimate:
    """Predict serving with prefill and decode on separate pools.

    Parameters
    ----------
    model : str or ModelSpec
    disagg : Disaggregation or str
        Pools and link, or their text (:meth:`Disaggregation.parse`).
    isl, osl : int or array [token]
    prefill_batch : int or array [request]
        Prompts prefilled together on one prefill replica.
    decode_batch : int or array [request]
        Sequences decoded together on one decode replica.
    request_rate : float, str or array, optional [request/s]
        Arrival rate to size the pools for (:attr:`DisaggEstimate.gpus_needed`).
    engine, profile
        Defaults for pools that name neither.
    prefix_cache : PrefixCache or str, optional
        Cached prefixes shorten the prefill; the whole prompt's KV is still sent (the
        decode pool is assumed not to hold the prefix).
    gpu_memory_utilization, kv_block_size, max_num_tokens
        As in :func:`inferlab.estimate`; ``max_num_tokens`` chunks the prefill.

    Raises
    ------
    InfeasibleError
        A pool's weights or batch does not fit, or the link is impossible.
    """
    from ..estimate import _positive, deployment  # estimate.py builds on this module; import at call time

    d = disagg if isinstance(disagg, Disaggregation) else Disaggregation.parse(disagg)
    m = load_model(model) if isinstance(model, (str, Path)) else model
    dep_p, dep_d = (deployment(m, pool.hardware, tp=int(pool.tp or 1), precision=pool.precision,
                               engine=pool.engine or engine, profile=profile if pool.profile is None else pool.profile)
                    for pool in (d.prefill, d.decode))
    bp, bd, i, o = np.broadcast_arrays(*(_positive(name, v) for name, v in (
        ("prefill_batch", prefill_batch), ("decode_batch", decode_batch), ("isl", isl), ("osl", osl))))
    mem = {"gpu_memory_utilization": gpu_memory_utilization, "kv_block_size": kv_block_size}
    plan_p = _plan(dep_p, bp, i, np.minimum(bp * i, max_num_tokens), "prefill", **mem)
    plan_d = _plan(dep_d, bd, i + o, bd, "decode", **mem)
    cache = PrefixCache.parse(prefix_cache) if isinstance(prefix_cache, str) else prefix_cache
    cached = 0.0 if cache is None else effective_cached_tokens(i, cache, block_size=kv_block_size)
    pre = run_step(dep_p, Step.prefill(bp, i, cached))
    chunks = np.ceil(bp * (i - cached) / max_num_tokens)
    prefill_s = pre.time_s + (chunks - 1.0) * dep_p.profile.step_overhead_s
    transfer = kv_transfer(d, dep_p, dep_d, bp, i, prefill_s)
    tpot = np.where(o > 1, mean_decode_step_s(dep_d, bd, i, o), 0.0)
    first = decode(dep_d, bd, i - 1.0).time_s if d.first_token == "decode" else np.zeros(np.shape(i))
    rate = None if request_rate is None else (
        to_si_array(Q(request_rate) if isinstance(request_rate, str) else request_rate, "request/second",
                    "request_rate"))
    if rate is not None and (np.any(rate <= 0) or not np.all(np.isfinite(rate))):
        raise SpecError(f"request_rate must be > 0 requests/s, got {request_rate!r}")
    return DisaggEstimate(d, dep_p, dep_d, i, o, bp, bd, pre, transfer, np.asarray(prefill_s, float),
                          np.asarray(first, float), np.asarray(tpot, float), plan_p, plan_d, rate)


@dataclass(frozen=True)
class DisaggComparison:
    """A disaggregated deployment next to an aggregated one serving the same requests."""

    disaggregated: DisaggEstimate
    aggregated: Estimate

    @property
    def ttft_delta_s(self) -> np.ndarray:
        """Disaggregated minus aggregated TTFT [s]."""
        return self.disaggregated.ttft_s - self.aggregated.ttft_s

    @property
    def per_gpu_throughput_ratio(self) -> np.ndarray:
        """Disaggregated over aggregated output tokens/s per GPU [1]."""
        return self.disaggregated.output_tokens_per_s_per_gpu / self.aggregated.throughput["per_gpu"].magnitude

    def __str__(self) -> str:
        dis, agg = self.disaggregated, self.aggregated
        at = lambda x: float(np.ravel(x)[0])  # noqa: E731
        rows = [[f"aggregated {agg.deployment.hardware.id}x{agg.deployment.tp} (batch {at(agg.batch_size):.0f})",
                 str(agg.deployment.tp), f"{at(agg.ttft_s) * 1e3:.1f}", f"{at(agg.tpot_s) * 1e3:.2f}",
                 f"{at(agg.throughput['per_gpu'].magnitude):.0f}"],
                [f"disaggregated {dis.disaggregation.prefill} + {dis.disaggregation.decode} (batch "
                 f"{at(dis.prefill_batch):.0f}/{at(dis.decode_batch):.0f})", str(dis.num_gpus),
                 f"{at(dis.ttft_s) * 1e3:.1f}", f"{at(dis.tpot_s) * 1e3:.2f}",
                 f"{at(dis.output_tokens_per_s_per_gpu):.0f}"]]
        table = text_table(["setup", "GPUs", "TTFT ms", "TPOT ms", "tok/s/GPU"], rows, right={1, 2, 3, 4})
        return (f"isl {at(dis.isl):.0f}, osl {at(dis.osl):.0f}\n{table}\n"
                f"disaggregation: TTFT {at(self.ttft_delta_s) * 1e3:+.1f} ms (KV transfer exposed "
                f"{at(dis.transfer.exposed_s) * 1e3:.2f} ms, first decode step "
                f"{at(dis.first_token_step_s) * 1e3:.2f} ms), tok/s/GPU x{at(self.per_gpu_throughput_ratio):.2f} ({dis.bottleneck.flat[0]}-bound pools, "
                f"balanced P:D {at(dis.pd_ratio):.2f})")


def compare_with_aggregated(model: str | ModelSpec, disagg: Disaggregation | str, *, isl: Any = 1024,
                            osl: Any = 128, prefill_batch: Any = 1, decode_batch: Any = 1,
                            aggregated: Pool | str | None = None, engine: str = "generic",
                            profile: str | Path | Profile = "default", **memory: Any) -> DisaggComparison:
    """The disaggregated estimate and a static batch of ``decode_batch`` on one aggregated replica.

    ``aggregated`` defaults to a replica like the decode pool's (same GPU, ``tp``,
    precision). At small scale disaggregation loses: the transfer and the decode pool's
    first step lengthen TTFT, and two pools hold GPUs that a single replica would share
    between the phases. ``memory`` passes ``gpu_memory_utilization``, ``kv_block_size``
    and ``max_num_tokens`` to both.

    The aggregated side is :func:`inferlab.estimate`'s static batch: at ``decode_batch > 1``
    its TTFT is the prefill of all the batch's prompts together, the disaggregated TTFT that
    of ``prefill_batch`` prompts; compare TTFT at equal batches (or with the serving
    simulation), throughput per GPU at any.
    """
    from ..estimate import estimate

    d = disagg if isinstance(disagg, Disaggregation) else Disaggregation.parse(disagg)
    pool = Pool.parse(aggregated) if isinstance(aggregated, str) else aggregated or Pool(
        d.decode.hardware, d.decode.tp or 1, precision=d.decode.precision, engine=d.decode.engine,
        profile=d.decode.profile)
    dis = estimate_disaggregated(model, d, isl=isl, osl=osl, prefill_batch=prefill_batch, decode_batch=decode_batch,
                                 engine=engine, profile=profile, **memory)
    agg = estimate(model, pool.hardware, tp=int(pool.tp or 1), precision=pool.precision, isl=isl, osl=osl,
                   batch_size=decode_batch, engine=pool.engine or engine,
                   profile=profile if pool.profile is None else pool.profile, **memory)
    return DisaggComparison(dis, agg)
