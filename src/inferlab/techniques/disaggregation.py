"""Disaggregated serving: prefill and decode on separate pools of GPUs.

A prompt is prefilled on a replica of the *prefill pool*; its KV cache then travels to a
replica of the *decode pool*, which generates the output tokens. The technique wraps the
step model: each pool is an ordinary :class:`~inferlab.techniques.step.ResolvedDeployment` timed by
the core; this module describes the pools (:class:`Pool`, :class:`Disaggregation`),
:mod:`.kv_transfer` times the KV cache's trip between them, and the two faces of the
technique compose them: :mod:`inferlab.phases.disaggregated` (a static batch per pool) and
:mod:`inferlab.serving.disaggregated` (both pools simulated).

- **KV transfer.** The prompt's KV cache (``model.kv_cache_bytes(isl)`` per request, in the
  prefill pool's KV format) leaves the prefill replica's ``tp`` GPUs in parallel, each
  over its own link, and reaches the decode replica's ``tp`` GPUs. Pools that fit in one
  scale-up domain together use the scale-up fabric; otherwise each GPU's scale-out NIC
  (per GPU, per direction). Layer by layer, the transfer overlaps the prefill.
- **TTFT** = prefill + the exposed part of the transfer + the decode step that emits the
  first token (``first_token="decode"``: vLLM's P/D connectors recompute the last prompt
  token on the decode instance, whose first step produces the token the user sees; with
  ``"prefill"`` the prefill's token is forwarded as in SGLang, TensorRT-LLM's context servers
  and DistServe). Unset, the decode pool's engine's way (:data:`FIRST_TOKEN_BY_ENGINE`).
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
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

import numpy as np

from ..calibration.profile import Profile
from ..core.quantization import PrecisionConfig
from ..errors import InferlabError, SpecError, UnknownNameError, did_you_mean
from ..specs.catalog import hardware_id
from ..specs.hardware import HardwareSpec
from ..units import to_si

LinkKind = Literal["auto", "nvlink", "network"]
FirstToken = Literal["decode", "prefill"]
#: The longest KV-transfer link latency taken [s]: past any network's round trip, as the
#: client overheads' ``network_rtt_s`` bound (:mod:`inferlab.serving.overheads`).
MAX_LINK_LATENCY_S = 10.0

#: Which pool emits the first token, by the decode pool's engine: vLLM's P/D connectors have the
#: decode instance recompute the last prompt token (its first step emits the token); SGLang's
#: prefill server and TensorRT-LLM's context server sample it and hand it over with the KV.
FIRST_TOKEN_BY_ENGINE = {"sglang": "prefill", "trtllm": "prefill", "trtllm-pytorch": "prefill"}

#: One KV transfer's fixed cost over the network [s]: an RDMA write completes in about
#: 2 us on NDR InfiniBand; the connector's completion notice to the decode side adds a
#: message of its own. An order of magnitude, not calibrated; ``link_latency_s`` overrides.
NETWORK_LATENCY_S = 20e-6

_POOL = re.compile(r"^(?P<hw>[a-z0-9][a-z0-9.\-]*?)(?:[x*](?P<n>\d+))?$")
_ON_OFF = {"on": True, "true": True, "yes": True, "off": False, "false": False, "no": False}


def resolve_hardware(name: str | HardwareSpec) -> str:
    """Catalog id for ``name``: a spec's id, or :func:`~inferlab.specs.catalog.hardware_id` (an id,
    or the one form factor of a chip's name: ``h200`` -> ``h200-sxm``; ``h100`` is ambiguous)."""
    if isinstance(name, HardwareSpec):
        return name.id
    return hardware_id(name)


@dataclass(frozen=True)
class Pool:
    """GPUs of one phase: ``num_gpus`` GPUs of one kind as ``num_gpus / tp`` replicas.

    ``tp`` defaults to ``num_gpus`` (one replica); ``engine`` and ``profile`` default to
    those given to :func:`estimate_disaggregated`. ``ep`` spreads a MoE model's experts over
    the replica's GPUs and ``attention_dp`` runs attention data-parallel over them
    (TensorRT-LLM's ``tp=8, ep=8, enable_attention_dp``), as in :func:`inferlab.estimate`.
    """

    hardware: str | HardwareSpec
    num_gpus: int = 1
    tp: int | None = None
    precision: Any = None  # None: the precision given to estimate_disaggregated
    engine: str | None = None
    profile: str | Path | Profile | None = None
    ep: int = 1
    attention_dp: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.attention_dp, (bool, np.bool_)):
            raise SpecError(f"pool: attention_dp must be true or false, got {self.attention_dp!r}")
        for name in ("num_gpus", "tp", "ep"):
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
        """``HARDWARE[xCOUNT][:tpN][:epN][:adp][:PRECISION]``, e.g. ``h200x8:tp4:fp8`` or
        ``b200x16:tp8:ep8:adp`` (see :meth:`Disaggregation.parse`)."""
        head, *attrs = [part.strip() for part in text.strip().lower().split(":")]
        match = _POOL.match(head)
        if not match:
            raise SpecError(f"pool {text!r}: expected HARDWARE[xCOUNT][:tpN][:epN][:adp][:PRECISION], e.g. 'h200x4' or "
                            "'h100-sxmx8:tp4:fp8'")
        hw = match["hw"]
        if match["n"]:  # an id ending in x (mi300x) before its count: 'mi300x8' is mi300x times 8
            try:
                hardware_id(hw)
            except UnknownNameError:
                try:
                    hw = hardware_id(hw + "x")
                except UnknownNameError:
                    pass  # (the error names the first reading)
        kw: dict[str, Any] = {"hardware": hw, "num_gpus": int(match["n"] or 1)}
        for attr in attrs:
            key = attr[:2] if re.fullmatch(r"(tp|ep)\d+", attr) else "attention_dp" if attr == "adp" else "precision"
            if key in kw:  # (the last would win silently)
                raise SpecError(f"pool {text!r}: {attr!r} sets {key} a second time; give it once")
            if re.fullmatch(r"\d+g\.\d+gb", attr):
                raise SpecError(f"pool {text!r}: {attr!r} is a MIG slice; a pool runs whole GPUs (tpN over them), "
                                "not slices of one")
            if key in ("tp", "ep"):
                kw[key] = int(attr[2:])
            elif key == "attention_dp":
                kw["attention_dp"] = True
            else:
                try:
                    PrecisionConfig.parse(attr)  # checked here; resolved for the model and GPU later
                    kw["precision"] = attr
                except InferlabError as err:
                    raise SpecError(f"pool {text!r}: {attr!r} is neither tpN, epN, adp nor a precision ({err})") from None
        try:
            return cls(**kw)
        except UnknownNameError as err:
            raise SpecError(f"pool {text!r}: {err}") from None

    def __str__(self) -> str:
        text = f"{self.hardware_id}x{self.num_gpus}" + (f":tp{self.tp}" if self.tp != self.num_gpus else "")
        text += (f":ep{self.ep}" if self.ep != 1 else "") + (":adp" if self.attention_dp else "")
        return text + (f":{self.precision}" if isinstance(self.precision, str) else "")


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
    first_token : {"decode", "prefill"}, optional
        Which pool emits the first token (see the module notes); default the decode pool's
        engine's (:meth:`for_engine`).
    """

    prefill: Pool
    decode: Pool
    link: LinkKind = "auto"
    link_bandwidth: float | str | None = None
    link_latency_s: float | None = None
    overlap: bool = True
    first_token: FirstToken | None = None

    def for_engine(self, engine: str) -> Disaggregation:
        """This split with its first token's pool set: as given, else ``engine``'s (the decode
        pool's engine) way."""
        if self.first_token is not None:
            return self
        return replace(self, first_token=FIRST_TOKEN_BY_ENGINE.get(engine, "decode"))

    def __post_init__(self) -> None:
        if self.link not in ("auto", "nvlink", "network"):
            raise SpecError(f"disaggregation: link must be auto, nvlink or network, got {self.link!r}")
        if self.first_token is not None and self.first_token not in ("decode", "prefill"):
            raise SpecError(f"disaggregation: first_token must be decode or prefill, got {self.first_token!r}")
        if self.link_bandwidth is not None:
            bw = to_si(self.link_bandwidth, "byte/second") if isinstance(self.link_bandwidth, str) else \
                float(self.link_bandwidth)
            if not bw > 0 or not np.isfinite(bw):
                raise SpecError(f"disaggregation: link_bandwidth must be > 0, got {self.link_bandwidth!r}")
            object.__setattr__(self, "link_bandwidth", bw)
        if self.link_latency_s is not None and not 0 <= self.link_latency_s <= MAX_LINK_LATENCY_S:
            raise SpecError(f"disaggregation: link_latency_s must be >= 0 and at most {MAX_LINK_LATENCY_S:g} s (past "
                            f"any network's round trip), got {self.link_latency_s!r}")

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

        ``HARDWARE`` is a catalog id or the unique id it starts (``h200`` = ``h200-sxm``; an id
        ending in x takes its count directly, ``mi300x8``, or after a second x, ``mi300xx8``);
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
                hint = did_you_mean(key.lower(), keys) if sep and field is None else ""
                raise SpecError(f"disaggregation {text!r}: cannot read {item!r}{hint}; items are prefill=POOL, decode=POOL, "
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
        text += f",overlap={'on' if self.overlap else 'off'}"
        return text + (f",first_token={self.first_token}" if self.first_token is not None else "")


def _parse_value(field: str, value: str, text: str) -> Any:
    low = value.lower()
    if field in ("prefill", "decode"):
        return Pool.parse(value)
    if field == "link":
        if low not in ("auto", "nvlink", "network"):
            raise SpecError(f"disaggregation {text!r}: link must be auto, nvlink or network, got {value!r}"
                            f"{did_you_mean(value, ('auto', 'nvlink', 'network'))}")
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
