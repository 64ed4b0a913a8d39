"""Scenario files: what to serve, on what, under which SLOs and prices.

A scenario is YAML::

    name: chat service
    models: [llama-3.1-70b]            # candidates
    hardware: [h100-sxm, h200-sxm, b200]
    engine: vllm
    traffic: {rate: 20, isl: 1500, osl: 300, prefix_hit: 0.3}
    slo: {ttft_ms: 1000, tpot_ms: 40, percentile: 99}
    search: {precisions: [bf16, fp8], tp: [1, 2, 4, 8], speculative: [null, eagle3-llama-3.3-70b],
             disaggregation: true, max_gpus: 64}
    prices: {h100-sxm: 2.50}           # USD per GPU-hour; default: the catalog's
    budget_usd_per_hour: 500
    api_price: {input_per_million: 0.6, output_per_million: 2.4}   # compare with a per-token API
    verify: 3                          # best configurations re-checked by the serving simulation

``traffic.isl``/``osl`` take a token count or a distribution mapping (``{kind: lognormal,
mean: 1500, sigma: 0.6}``); ``offline: true`` in ``traffic`` plans a batch job (throughput
per dollar, no latency SLO) with ``tokens`` to process and a ``deadline_h``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from ..errors import SpecError
from ..serving.workload import Lengths
from ..specs.validation import format_validation_error, read_yaml_mapping

_STRICT = ConfigDict(frozen=True, extra="forbid")


class Traffic(BaseModel):
    """The load to serve."""

    model_config = _STRICT
    rate: float | None = Field(default=None, gt=0, description="Requests per second (online).")
    isl: Any = 1024
    osl: Any = 256
    prefix_hit: float = Field(default=0.0, ge=0.0, lt=1.0)
    offline: bool = False
    requests: int | None = Field(default=None, ge=1, description="Requests of an offline job.")
    deadline_h: float | None = Field(default=None, gt=0, description="Hours an offline job may take.")

    @field_validator("isl", "osl")
    @classmethod
    def _lengths(cls, value: Any) -> Lengths:
        if isinstance(value, dict):
            return Lengths(**value)
        return Lengths.of(value)

    @model_validator(mode="after")
    def _mode(self) -> Traffic:
        if self.offline:
            if self.requests is None or self.deadline_h is None:
                raise ValueError("an offline job needs 'requests' and 'deadline_h'")
        elif self.rate is None:
            raise ValueError("online traffic needs 'rate' (requests/s); or set offline: true")
        return self

    @property
    def request_rate(self) -> float:
        """Requests per second the deployment must sustain."""
        if self.offline:
            return float(self.requests) / (float(self.deadline_h) * 3600.0)  # type: ignore[arg-type]
        return float(self.rate)  # type: ignore[arg-type]


class SLO(BaseModel):
    """Latency objectives at a percentile (none for offline jobs)."""

    model_config = _STRICT
    ttft_ms: float | None = Field(default=None, gt=0)
    tpot_ms: float | None = Field(default=None, gt=0)
    percentile: float = Field(default=99.0, gt=0, lt=100)


class Search(BaseModel):
    """The configuration space."""

    model_config = _STRICT
    precisions: tuple[str, ...] = ("bf16", "fp8")
    tp: tuple[int, ...] = (1, 2, 4, 8)
    pp: tuple[int, ...] = Field(default=(1,), description="Pipeline stages per replica (across nodes too).")
    expert_parallel: bool = True
    speculative: tuple[str | None, ...] = (None,)
    disaggregation: bool = False
    max_gpus: int = Field(default=256, ge=1)
    max_num_seqs: int | None = Field(default=None, ge=1, description="Default: the engine's.")
    target_utilization: float = Field(default=0.8, gt=0, le=1.0,
                                      description="Share of a replica's capacity the plan may use.")

    @field_validator("tp", "pp")
    @classmethod
    def _counts(cls, value: tuple[int, ...]) -> tuple[int, ...]:
        if not value or any(v < 1 for v in value):
            raise ValueError(f"GPU counts of at least 1, e.g. [1, 2, 4, 8]; got {list(value)}")
        return value


class ApiPrice(BaseModel):
    """A per-token API to compare the dedicated deployment with [USD per 1M tokens]."""

    model_config = _STRICT
    input_per_million: float = Field(ge=0)
    output_per_million: float = Field(ge=0)


class Operations(BaseModel):
    """Running the winner through a day: what capacity to buy, and how fast it can grow.

    ``daily_profile`` gives the traffic of each period (an hour by default) as a share of
    the scenario's rate (the peak): the replicas each period needs, bought as the cheapest
    mix of reserved (``1 - reserved_discount`` of the on-demand price, paid every period),
    on-demand and, with ``spot_discount``, spot capacity. The cold start of a replica
    (provisioning, image pull, weights at ``storage_gb_per_s``, warm-up) plus the
    autoscaler's ``reaction_s`` is how long a traffic rise of ``ramp_rps_per_min`` must be
    carried by warm headroom.
    """

    model_config = _STRICT
    daily_profile: tuple[float, ...] | None = Field(default=None, min_length=1)
    period_h: float = Field(default=1.0, gt=0)
    reserved_discount: float = Field(default=0.4, ge=0, lt=1)
    spot_discount: float | None = Field(default=None, gt=0, lt=1)
    spot_availability: float = Field(default=0.9, ge=0, le=1)
    storage_gb_per_s: float = Field(default=2.0, gt=0)
    image_gb: float = Field(default=10.0, ge=0)
    provisioning_s: float = Field(default=180.0, ge=0)
    warmup_s: float = Field(default=60.0, ge=0)
    reaction_s: float = Field(default=60.0, ge=0)
    ramp_rps_per_min: float = Field(default=0.0, ge=0)

    @model_validator(mode="after")
    def _shares(self) -> Operations:
        if self.daily_profile is not None and not all(0 <= x <= 1 for x in self.daily_profile):
            raise ValueError("daily_profile: shares of the peak rate, each in [0, 1]")
        return self


class Scenario(BaseModel):
    """Everything the planner needs."""

    model_config = _STRICT
    name: str = "scenario"
    models: tuple[str, ...] = Field(min_length=1)
    hardware: tuple[str, ...] = Field(min_length=1)
    engine: str = "generic"
    profile: str = "default"
    traffic: Traffic
    slo: SLO = SLO()
    search: Search = Search()
    prices: dict[str, float] = Field(default_factory=dict)
    budget_usd_per_hour: float | None = Field(default=None, gt=0)
    api_price: ApiPrice | None = Field(default=None, description="Compare the winner with a per-token API.")
    operations: Operations | None = Field(default=None, description="Capacity mix and cold start of the winner.")
    verify: int = Field(default=3, ge=0)


def load_scenario(source: str | Path | dict) -> Scenario:
    """Read a scenario from a YAML path or a mapping.

    Raises
    ------
    SpecError
        Naming every wrong field and what is allowed.
    """
    label = "scenario"
    if not isinstance(source, dict):
        label = str(source)
        source = read_yaml_mapping(Path(source), f"scenario {label}")
    try:
        return Scenario.model_validate(source)
    except ValidationError as exc:
        raise SpecError(f"{label}: {format_validation_error(exc)}") from None
    except SpecError as exc:
        raise SpecError(f"{label}: {exc}") from None
