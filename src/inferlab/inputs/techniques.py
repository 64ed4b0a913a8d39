"""The techniques of a :class:`~inferlab.inputs.deployment.Deployment` in their one YAML/JSON form.

Each is a frozen pydantic model of plain values (numbers, names, text) that round-trips
through ``to_dict()``; ``of(value)`` reads what the entry points accept (the technique's
object, its command-line text or a mapping of its fields) and ``technique()`` gives the
object :func:`inferlab.estimate` and :func:`inferlab.serve` take, equal to the one they
would build from the text.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from ..errors import SpecError
from ..specs.model import ModelSpec
from ..techniques.disaggregation import Disaggregation, Pool
from ..techniques.prefix_cache import PrefixCache
from ..techniques.speculative_config import SpeculativeConfig

FROZEN = ConfigDict(frozen=True, extra="forbid")


def _fields(obj: Any, names: Any) -> dict[str, Any]:
    return {name: getattr(obj, name) for name in names}


def _mapping(value: Any, key: str, allowed: Any) -> dict[str, Any]:
    """``value`` as a mapping whose keys are all in ``allowed``, or a SpecError naming the others."""
    unknown = sorted(str(k) for k in set(value) - set(allowed))
    if unknown:
        raise SpecError(f"{key}: unknown field(s) {', '.join(unknown)}; allowed: {', '.join(allowed)}")
    return dict(value)


class Speculative(BaseModel):
    """Speculative decoding (:class:`~inferlab.techniques.speculative.SpeculativeConfig`).

    Parameters
    ----------
    method : str
        ``draft``, ``eagle``, ``medusa``, ``mtp`` or ``ngram``.
    k : int [token]
        Draft tokens per step.
    acceptance : float, optional [1]
        Per-token acceptance rate.
    acceptance_length : float, optional [token]
        Mean tokens emitted per target step.
    draft_model : str, optional
        Catalog id or config.json path of the drafter (method ``draft``).
    draft_vocab_size : int, optional [token]
        Width of the drafter's LM head.
    host_s : float [s]
        Host work per speculative step.
    source : str
        Where the acceptance figure comes from.
    target : str, optional
        Catalog id of the model the acceptance was measured with (a preset's).
    """

    model_config = FROZEN
    method: str
    k: int
    acceptance: float | None = None
    acceptance_length: float | None = None
    draft_model: str | None = None
    draft_vocab_size: int | None = None
    host_s: float = 0.0
    source: str = "stated by the user"
    target: str | None = None

    @classmethod
    def of(cls, value: Any) -> Speculative:
        """From a SpeculativeConfig, its text (``"eagle:k=4,accept=0.7"``, a preset) or a mapping."""
        if isinstance(value, Speculative):
            return value
        value = SpeculativeConfig.of(value)
        fields = _fields(value, cls.model_fields)
        draft = fields["draft_model"]
        if isinstance(draft, ModelSpec):
            if not draft.id:
                raise SpecError("speculative: a Deployment names its draft model by catalog id or config.json path; "
                                "this ModelSpec has no id")
            fields["draft_model"] = draft.id
        return cls(**fields)

    def technique(self) -> SpeculativeConfig:
        """The :class:`SpeculativeConfig` the entry points take."""
        return SpeculativeConfig(**self.model_dump())


class PrefixCacheSpec(BaseModel):
    """A cached prompt prefix (:class:`~inferlab.techniques.prefix_cache.PrefixCache`).

    Parameters
    ----------
    cached_tokens : float, optional [token]
        Length of the stable prefix every prompt starts with.
    hit_rate : float, optional [1]
        Share of prompt tokens found in the cache.
    stable_prefix_first : bool
        Whether the stable part comes first in the prompt.
    replicas : int
        Engine instances behind the router.
    cache_aware_routing : bool
        Whether the router sends a request to the replica holding its prefix.
    """

    model_config = FROZEN
    cached_tokens: float | None = None
    hit_rate: float | None = None
    stable_prefix_first: bool = True
    replicas: int = 1
    cache_aware_routing: bool = True

    @classmethod
    def of(cls, value: Any) -> PrefixCacheSpec:
        """From a PrefixCache, a hit rate, its text (``"tokens=1500"``) or a mapping."""
        if isinstance(value, PrefixCacheSpec):
            return value
        value = PrefixCache.of(value)
        return cls(**_fields(value, cls.model_fields))

    def technique(self) -> PrefixCache:
        """The :class:`PrefixCache` the entry points take."""
        return PrefixCache(**self.model_dump())


class PoolSpec(BaseModel):
    """One pool of a disaggregated deployment (:class:`~inferlab.techniques.disaggregation.Pool`).

    Parameters
    ----------
    hardware : str
        Catalog id of the pool's GPU.
    num_gpus : int [GPU]
        GPUs in the pool.
    tp : int [GPU]
        GPUs per tensor-parallel replica.
    ep : int [GPU]
        GPUs a replica spreads a MoE model's experts over.
    attention_dp : bool
        Attention data-parallel over the replica's GPUs.
    precision : str or mapping, optional
        The pool's formats; None: the deployment's.
    engine, profile : str, optional
        The pool's engine and calibration profile; None: the deployment's.
    """

    model_config = FROZEN
    hardware: str
    num_gpus: int
    tp: int
    precision: str | dict[str, str] | None = None
    engine: str | None = None
    profile: str | None = None
    ep: int = 1
    attention_dp: bool = False

    @classmethod
    def of(cls, value: Any, side: str) -> PoolSpec:
        """From a Pool, its text (``"h200x8:tp4"``) or a mapping of its fields."""
        if isinstance(value, str):
            value = Pool.parse(value)
        elif isinstance(value, Mapping):
            value = Pool(**_mapping(value, f"disaggregation.{side}", Pool.__dataclass_fields__))
        if not isinstance(value, Pool):
            raise SpecError(f"disaggregation.{side} must be a pool like 'h200x8:tp4' or a mapping, got {value!r:.60}")
        if value.profile is not None and not isinstance(value.profile, str):
            raise SpecError(f"disaggregation.{side}: a Deployment names a pool's profile by name or path")
        precision = value.precision if value.precision is None or isinstance(value.precision, str) \
            else dict(value.precision)
        return cls(hardware=value.hardware_id, num_gpus=value.num_gpus, tp=int(value.tp or value.num_gpus),
                   precision=precision, engine=value.engine, profile=value.profile, ep=int(value.ep),
                   attention_dp=bool(value.attention_dp))

    def technique(self) -> Pool:
        """The :class:`Pool` the entry points take."""
        return Pool(**self.model_dump())


class Pools(BaseModel):
    """Separate prefill and decode pools (:class:`~inferlab.techniques.disaggregation.Disaggregation`).

    Parameters
    ----------
    prefill, decode : PoolSpec
    link : {"auto", "nvlink", "network"}
    link_bandwidth : float, optional [B/s]
        Per GPU and direction; None: the hardware's.
    link_latency_s : float, optional [s]
    overlap : bool
        Send each layer's KV while later layers are prefilled.
    first_token : {"decode", "prefill"}, optional
        Default: the decode pool's engine's (vLLM: decode; SGLang, TensorRT-LLM: prefill).
    """

    model_config = FROZEN
    prefill: PoolSpec
    decode: PoolSpec
    link: Literal["auto", "nvlink", "network"] = "auto"
    link_bandwidth: float | None = None
    link_latency_s: float | None = None
    overlap: bool = True
    first_token: Literal["decode", "prefill"] | None = None

    @classmethod
    def of(cls, value: Any) -> Pools:
        """From a Disaggregation, its text (``"prefill=h200x4,decode=h200x8:tp4"``) or a mapping."""
        if isinstance(value, Pools):
            return value
        if isinstance(value, str):
            value = Disaggregation.parse(value)
        elif isinstance(value, Mapping):
            fields = _mapping(value, "disaggregation", Disaggregation.__dataclass_fields__)
            missing = [side for side in ("prefill", "decode") if side not in fields]
            if missing:
                raise SpecError(f"disaggregation: needs both 'prefill' and 'decode' pools; missing {missing[0]}")
            for side in ("prefill", "decode"):
                fields[side] = PoolSpec.of(fields[side], side).technique()
            try:
                value = Disaggregation(**fields)
            except TypeError as exc:
                raise SpecError(f"disaggregation: {exc}") from None
        if not isinstance(value, Disaggregation):
            raise SpecError(f"disaggregation must be a text like 'prefill=h200x4,decode=h200x8' or a Disaggregation, "
                            f"got {value!r:.60}")
        return cls(prefill=PoolSpec.of(value.prefill, "prefill"), decode=PoolSpec.of(value.decode, "decode"),
                   link=value.link, link_bandwidth=value.link_bandwidth, link_latency_s=value.link_latency_s,
                   overlap=value.overlap, first_token=value.first_token)

    @property
    def num_gpus(self) -> int:
        """GPUs of both pools [GPU]."""
        return self.prefill.num_gpus + self.decode.num_gpus

    def technique(self) -> Disaggregation:
        """The :class:`Disaggregation` the entry points take."""
        fields = self.model_dump()
        fields.update(prefill=self.prefill.technique(), decode=self.decode.technique())
        return Disaggregation(**fields)

