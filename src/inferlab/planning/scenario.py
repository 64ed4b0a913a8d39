"""Scenario files: what to serve, on what, under which SLOs and prices.

A scenario is YAML::

    name: chat service
    models: [llama-3.3-70b]            # candidates
    hardware: [h100-sxm, h200-sxm, b200]
    engine: vllm
    traffic: {rate: 20, isl: 1500, osl: 300, prefix_hit: 0.3}   # prefix: shared:tokens=1000,groups=8
    slo: {ttft_ms: 1000, tpot_ms: 40, percentile: 99}
    search: {precisions: [checkpoint, fp8], tp: [1, 2, 4, 8], speculative: [null, eagle3-llama-3.3-70b],
             disaggregation: true, max_gpus: 64}
    prices: {h100-sxm: 2.50}           # USD per GPU-hour; default: the catalog's
    budget_usd_per_hour: 500
    api_price: {input_per_million: 0.6, output_per_million: 2.4}   # compare with a per-token API
    verify: 3                          # best configurations re-checked by the serving simulation
    allow_long_context: false          # true: prompts beyond the models' positions (RoPE scaling)

``traffic.isl``/``osl`` take a token count or a distribution mapping (``{kind: lognormal, mean: 1500, sigma: 0.6}``)
and default to 1024 and 256 tokens; ``offline: true`` in ``traffic`` plans a batch job (throughput per dollar, no
latency SLO) with ``requests`` to process and a ``deadline_h``. Every number must be finite and given as a number
(``"2.5"`` is refused), counts as integers, prices >= 0 and named after one of the scenario's GPUs; the SLO percentile
is at most 99.9 (the one the verification can simulate enough requests for).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

from pydantic import (AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, StrictBool, StrictInt,
                      ValidationError, field_validator, model_validator)

from ..checks import longest_tokens, nonzero_price, repeated
from ..errors import InferlabError, SpecError, did_you_mean
from ..inputs.prefixes import Prefixes, prefixes
from ..inputs.workload import Lengths
from ..specs.listed_names import hardware_id_or_name, model_id_or_name
from ..specs.validation import format_validation_error, read_yaml_mapping

#: Frozen, no unknown keys, and no NaN or infinity in any number (an infinite budget or a NaN
#: price would rank plans by a number that means nothing).
_STRICT = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)
#: Highest SLO percentile the verification can check: at P99.9 each probe simulates 20,000
#: requests so that 20 of them lie beyond the percentile (``probes.probe_requests``); a higher
#: one would need 200,000+.
MAX_PERCENTILE = 99.9
#: Highest request rate a scenario may ask for [request/s]; far past any service, and small
#: enough that tokens per hour stay finite in float64.
MAX_RATE = 1e9


def _not_text(value: Any) -> Any:
    """A number given as a number: ``"2.5"`` or ``true`` in a YAML file is a typo, not a value."""
    if isinstance(value, (str, bool)):
        raise ValueError(f"expected a number, got {value!r}")
    return value


#: A float field that refuses strings and booleans (pydantic would read ``"2.5"`` as 2.5).
Number = Annotated[float, BeforeValidator(_not_text)]


def _price(value: float) -> float:
    try:
        return nonzero_price("a price", value)
    except InferlabError as exc:
        raise ValueError(str(exc)) from None


#: A price [USD]: a number, 0 (free) or at least :data:`~inferlab.checks.MIN_PRICE`.
Price = Annotated[float, BeforeValidator(_not_text), AfterValidator(_price)]


def _distinct(value: tuple) -> tuple:
    """A list of choices to search, each once (a repeat doubled its rows)."""
    twice = repeated(value)
    if twice is not None:
        raise ValueError(f"{twice!r} is listed twice; each choice once")
    return value


class Traffic(BaseModel):
    """The load to serve."""

    model_config = _STRICT
    rate: Number | None = Field(default=None, gt=0, description="Requests per second (online).")
    isl: Any = Field(default=1024, validate_default=True, description="Prompt tokens (default 1024).")
    osl: Any = Field(default=256, validate_default=True, description="Output tokens (default 256).")
    prefix_hit: Number = Field(default=0.0, ge=0.0, lt=1.0)
    prefix: Any = Field(default=None, description="Prompts sharing a prefix for the serving simulation: "
                                                 "'shared:tokens=1000,groups=8', 'sessions:turns=4,think=5' "
                                                 "or a mapping of inferlab.inputs.prefixes.Prefixes fields.")
    offline: StrictBool = False
    requests: StrictInt | None = Field(default=None, ge=1, le=10**15, description="Requests of an offline job.")
    deadline_h: Number | None = Field(default=None, gt=0, description="Hours an offline job may take.")

    @field_validator("isl", "osl")
    @classmethod
    def _lengths(cls, value: Any) -> Lengths:
        return Lengths.of(value)

    @field_validator("prefix")
    @classmethod
    def _prefix(cls, value: Any) -> Prefixes | None:
        return None if value is None else prefixes(value)

    def workload(self, num_requests: int = 1000) -> Any:
        """The traffic as a :class:`~inferlab.inputs.workload.Workload` of ``num_requests`` requests
        (an offline job: at most its ``requests``). ``prefix_hit`` is not part of it: it is the
        deployment's prefix cache (``Deployment.prefix_cache``)."""
        from ..inputs.workload import Workload

        if self.offline:
            return Workload(isl=self.isl, osl=self.osl, offline=True, num_requests=min(num_requests, self.requests),
                            prefix=self.prefix)
        return Workload(isl=self.isl, osl=self.osl, rate=float(self.rate), num_requests=num_requests,
                        prefix=self.prefix)

    @model_validator(mode="after")
    def _mode(self) -> Traffic:
        if self.offline:
            if self.requests is None or self.deadline_h is None:
                raise ValueError("an offline job needs 'requests' and 'deadline_h'")
            if self.rate is not None:
                raise ValueError(f"an offline job's rate is its requests over its deadline; drop 'rate' "
                                 f"({self.rate:g} requests/s), or drop offline for online traffic")
        elif self.requests is not None or self.deadline_h is not None:
            raise ValueError("'requests' and 'deadline_h' describe an offline job; set offline: true, or drop them")
        elif self.rate is None:
            raise ValueError("online traffic needs 'rate' (requests/s); or set offline: true")
        if self.request_rate > MAX_RATE:
            raise ValueError(f"{self.request_rate:.3g} requests/s is more than {MAX_RATE:g}; no deployment is sized "
                             "for that")
        if self.prefix is not None and self.isl.kind != "lognormal":  # (as serve refuses it; a lognormal has no longest)
            self.prefix.check_held(longest_tokens(self.isl))
        if self.prefix is not None and self.prefix_hit:
            raise ValueError("give 'prefix' (the prompts' shared prefixes, simulated through the prefix cache) or "
                             "'prefix_hit' (a share of each prompt found cached), not both: they can disagree")
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
    ttft_ms: Number | None = Field(default=None, gt=0)
    tpot_ms: Number | None = Field(default=None, gt=0)
    percentile: Number = Field(default=99.0, gt=0, le=MAX_PERCENTILE,
                               description="Percentile the SLOs hold at, up to 99.9 (verified by simulation).")

    @field_validator("percentile")
    @classmethod
    def _out_of_100(cls, value: float) -> float:
        if value <= 1.0:
            raise ValueError(f"{value:g} is the {value:g}th percentile; a percentile is out of 100 (99 for P99)")
        return value


class Search(BaseModel):
    """The configuration space."""

    model_config = _STRICT
    precisions: tuple[str, ...] = Field(
        default=("checkpoint", "fp8"), min_length=1,
        description="Formats to try: names, 'kind:format' text, or 'checkpoint' (null) for the model's shipped ones.")
    tp: tuple[StrictInt, ...] = (1, 2, 4, 8)
    pp: tuple[StrictInt, ...] = Field(default=(1,), description="Pipeline stages per replica (across nodes too).")
    expert_parallel: StrictBool = True
    attention_dp: StrictBool = Field(
        default=True, description="With expert parallelism over a replica's GPUs, also try attention data-parallel "
                                  "over them (each GPU its own sequences, all heads): MoE models only.")
    speculative: tuple[str | None, ...] = Field(default=(None,), min_length=1)
    disaggregation: StrictBool = False
    max_gpus: StrictInt = Field(default=256, ge=1, le=10**6)
    max_num_seqs: StrictInt | None = Field(default=None, ge=1, le=10**6, description="Default: the engine's.")
    target_utilization: Number = Field(default=0.8, gt=0, le=1.0,
                                       description="Share of a replica's capacity the plan may use.")

    @field_validator("precisions", mode="before")
    @classmethod
    def _checkpoint_is_null(cls, value: Any) -> Any:
        if isinstance(value, (list, tuple)):
            return tuple("checkpoint" if v is None else v for v in value)
        return value

    @field_validator("tp", "pp")
    @classmethod
    def _counts(cls, value: tuple[int, ...]) -> tuple[int, ...]:
        if not value or any(not 1 <= v <= 1024 for v in value):
            raise ValueError(f"GPU counts from 1 to 1024, e.g. [1, 2, 4, 8]; got {list(value)}")
        return _distinct(value)

    @field_validator("precisions", "speculative", mode="after")
    @classmethod
    def _once(cls, value: tuple) -> tuple:
        return _distinct(value)

    @field_validator("precisions")
    @classmethod
    def _precisions(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        from ..core.quantization import PrecisionConfig

        for name in value:
            if name == "checkpoint":
                continue
            try:
                PrecisionConfig.parse(name)
            except InferlabError as exc:
                raise ValueError(str(exc)) from None
        return value

    @field_validator("speculative")
    @classmethod
    def _speculative(cls, value: tuple[str | None, ...]) -> tuple[str | None, ...]:
        from ..techniques.speculative import SpeculativeConfig

        for name in value:
            try:
                if name is not None:
                    SpeculativeConfig.parse(name)
            except InferlabError as exc:
                raise ValueError(str(exc)) from None
        return value


class ApiPrice(BaseModel):
    """A per-token API to compare the dedicated deployment with [USD per 1M tokens]."""

    model_config = _STRICT
    input_per_million: Price = Field(ge=0)
    output_per_million: Price = Field(ge=0)


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
    daily_profile: tuple[Number, ...] | None = Field(default=None, min_length=1)
    period_h: Number = Field(default=1.0, gt=0, le=24)
    reserved_discount: Number = Field(default=0.4, ge=0, lt=1)
    spot_discount: Number | None = Field(default=None, gt=0, lt=1)
    spot_availability: Number = Field(default=0.9, ge=0, le=1)
    storage_gb_per_s: Number = Field(default=2.0, gt=0, le=1e4)
    image_gb: Number = Field(default=10.0, ge=0, le=1e5)
    provisioning_s: Number = Field(default=180.0, ge=0, le=86400)
    warmup_s: Number = Field(default=60.0, ge=0, le=86400)
    reaction_s: Number = Field(default=60.0, ge=0, le=86400)
    ramp_rps_per_min: Number = Field(default=0.0, ge=0, le=1e6)

    @model_validator(mode="after")
    def _shares(self) -> Operations:
        if self.daily_profile is not None and not all(0 <= x <= 1 for x in self.daily_profile):
            raise ValueError("daily_profile: shares of the peak rate, each in [0, 1]")
        if self.daily_profile is not None and not any(self.daily_profile):
            raise ValueError("daily_profile: shares of the peak rate, at least one above 0 (all 0: no traffic to plan)")
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
    prices: dict[str, Price] = Field(default_factory=dict, description="USD per GPU-hour, each finite and >= 0.")
    budget_usd_per_hour: Price | None = Field(default=None, gt=0)
    api_price: ApiPrice | None = Field(default=None, description="Compare the winner with a per-token API.")
    operations: Operations | None = Field(default=None, description="Capacity mix and cold start of the winner.")
    verify: StrictInt = Field(default=3, ge=0, le=100)
    allow_long_context: StrictBool = Field(default=False, description="Accept prompts plus outputs beyond the "
                                           "models' max_position_embeddings (a deployment with RoPE scaling).")
    fleet: dict[str, Any] | None = Field(default=None, description="Policies for `inferlab fleet` (see "
                                         "inferlab.fleet.scenario); the planner does not read them.")

    @field_validator("name", mode="before")
    @classmethod
    def _name(cls, value: Any) -> Any:
        if isinstance(value, bool):  # YAML 1.1 reads off, on, no, yes, false, true unquoted as booleans
            raise ValueError(f"read as the boolean {value} (YAML takes off, on, no, yes unquoted as booleans); "
                             "quote the name")
        return value

    @field_validator("models", "hardware")
    @classmethod
    def _listed_once(cls, value: tuple[str, ...], info: Any) -> tuple[str, ...]:
        return _distinct(tuple(map(hardware_id_or_name if info.field_name == "hardware" else model_id_or_name, value)))

    @field_validator("prices")
    @classmethod
    def _priced_ids(cls, value: dict) -> dict:
        ids = {k: hardware_id_or_name(k) for k in value}
        if len(set(ids.values())) < len(ids):  # h200 and h200-sxm: one GPU priced twice
            both = sorted(k for k in ids if list(ids.values()).count(ids[k]) > 1)
            raise ValueError(f"{' and '.join(both)} are the same GPU ({ids[both[0]]}); price it once")
        return {ids[k]: v for k, v in value.items()}

    @field_validator("engine", mode="before")
    @classmethod
    def _engine(cls, value: Any) -> str:
        from ..inputs.resolve import ENGINES

        if not isinstance(value, str) or value not in ENGINES:  # a list: a plan is one engine's
            what = (f"unknown engine {value!r}{_did_you_mean(value, ENGINES)}" if isinstance(value, str) else
                    f"expected one engine (a plan is for one; plan several apart), got {value!r:.60}")
            raise ValueError(f"{what}; allowed: {', '.join(ENGINES)}")
        return value

    @field_validator("profile")
    @classmethod
    def _profile(cls, value: str) -> str:
        """An unknown profile is bad input, read once (it had ruled out every configuration: exit 1)."""
        from ..calibration.profile import load_profile

        load_profile(value, "generic", "h100-sxm")
        return value

    @model_validator(mode="after")
    def _offline_pools(self) -> Scenario:
        if self.traffic.offline and self.search.disaggregation:
            raise ValueError("search.disaggregation with offline traffic: an offline job's separate pools are not "
                             "sized (a job on aggregated replicas is); drop disaggregation, or plan online traffic")
        return self

    @model_validator(mode="after")
    def _prices(self) -> Scenario:
        for hardware, usd in self.prices.items():
            if not usd >= 0:
                raise ValueError(f"prices: {hardware} at {usd:g} USD/h; a price is >= 0 (a negative one would rank "
                                 "the plan as earning money)")
            if hardware not in self.hardware:
                _known_hardware(self.hardware)  # a typo in the list is the error to show, not in the price
                raise ValueError(f"prices: {hardware!r} is not one of the scenario's hardware"
                                 f"{_did_you_mean(hardware, self.hardware)}; allowed: {', '.join(self.hardware)}")
        return self


def _known_hardware(names: Any) -> None:
    """Raise the catalog's unknown-name error (with its did-you-mean) for the first GPU it does not know."""
    from ..errors import InferlabError
    from ..specs.catalog import load_hardware

    for name in names:
        try:
            load_hardware(name)
        except InferlabError as exc:
            raise ValueError(f"hardware: {exc}") from None


def _did_you_mean(name: str, allowed: Any) -> str:
    return did_you_mean(name, allowed, n=2, cutoff=0.5)


def load_scenario(source: str | Path | dict) -> Scenario:
    """Read a scenario from a YAML path or a mapping.

    Raises
    ------
    SpecError
        Naming every wrong field and what is allowed.
    """
    if isinstance(source, Scenario):
        return source
    label = "scenario"
    if not isinstance(source, (dict, str, Path)):
        raise SpecError(f"a scenario is a YAML path, a mapping of its fields or a Scenario, got "
                        f"{type(source).__name__} {source!r:.60}")
    if not isinstance(source, dict):
        label, source = str(source), read_yaml_mapping(Path(source), f"scenario {source}")
    if "fleet" in source and "models" not in source:  # inferlab fleet's format: one deployment and its fleet
        raise SpecError(f"{label} is a fleet scenario (one deployment and a fleet: section): `inferlab fleet {label}` "
                        "runs it; a plan searches models: [...] on hardware: [...] for its traffic and slo")
    try:
        return Scenario.model_validate(source)
    except ValidationError as exc:
        raise SpecError(f"{label}: {format_validation_error(exc, Scenario)}") from None
    except SpecError as exc:
        raise SpecError(f"{label}: {exc}") from None
