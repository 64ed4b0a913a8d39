"""Validation cases (schema ``inferlab-cases/1``): measured results of real deployments.

A case is one deployment, one workload and one measured metric (see
``validation/SCHEMA.md`` of the shared data). :func:`load_cases` reads and checks case
files; :func:`predict_case` predicts a case's metric with :func:`inferlab.estimate` (static
batches) or the serving simulation (:mod:`.serving`) when the model covers its regime and
techniques, and otherwise says why it does not, so an unsupported case is never
approximated silently.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, field_validator, model_validator

from ..core.parallelism import expert_layout
from ..core.quantization import KINDS
from ..errors import InferlabError, SpecError
from ..specs.validation import SAFE_LOADER, format_validation_error, read_text
from .case_file import case_list
from .case_units import METRICS as _METRICS, RATE_UNIT as _RATE_UNIT, measured_in, number_as_written as _number
from .case_setup import (PROFILE_ENGINES, SOURCE_PRECISION, SOURCE_SCHEDULERS, SOURCE_VERSIONS, case_engine,  # noqa
                         case_limits, case_version, known_engine, misspelt, source_layout, unstated_kv_cache)

SCHEMA = "inferlab-cases/1"
#: Case files shipped with the package (copies of the public validation sets).
PUBLIC_FILES = ("public.yaml", "public-closed-loop.yaml")
REGIMES = ("static_batch", "offline", "online", "closed_loop")
METRICS = ("output_tokens_per_s", "output_tokens_per_s_per_gpu", "output_tokens_per_s_per_user", "ttft_ms",
           "itl_ms", "tpot_ms", "tpot_p50_ms")
_CASE_CONFIG = ConfigDict(frozen=True, extra="allow", allow_inf_nan=False)
#: Bounds of a case's counts, far beyond any benchmark: GPUs, tokens, requests or clients, drafts.
MAX_GPUS, MAX_TOKENS, MAX_LOAD, MAX_DRAFT = 10**6, 10**8, 10**6, 64
#: The typed keys of ``load``: (kind, smallest, largest).
_LOAD_KEYS: dict[str, tuple[str, float, float]] = {
    "batch_size": ("int", 1, MAX_LOAD), "concurrency": ("int", 1, MAX_LOAD), "num_requests": ("int", 1, MAX_LOAD),
    "request_rate": ("real", 0.0, 1e9), "offline": ("bool", 0, 1), "max_concurrency": ("int", 1, MAX_LOAD),
    "preamble_tokens": ("int", 0, MAX_TOKENS)}
_LOADER = SAFE_LOADER


class Parallelism(BaseModel):
    """How the case's GPUs split the model."""

    model_config = _CASE_CONFIG
    tp: int = Field(default=1, ge=1)
    pp: int = Field(default=1, ge=1)
    ep: int = Field(default=1, ge=1)
    dp: int = Field(default=1, ge=1)
    attention_dp: bool = False
    attention_dp_size: int | None = Field(default=None, ge=1)
    moe_tp: int | None = Field(default=None, ge=1)


class Case(BaseModel):
    """One measured metric of one deployment and workload."""

    model_config = _CASE_CONFIG
    id: str = Field(min_length=1)
    regime: Literal["static_batch", "offline", "online", "closed_loop"]
    model: str
    hardware: str
    num_gpus: Annotated[int, BeforeValidator(_number)] = Field(ge=1, le=MAX_GPUS)
    parallelism: Parallelism = Parallelism()
    precision: dict[str, str | None]
    engine: Annotated[str, AfterValidator(known_engine)]
    engine_version: str | None = None
    isl: Annotated[int, BeforeValidator(_number)] = Field(ge=1, le=MAX_TOKENS)
    osl: Annotated[int, BeforeValidator(_number)] = Field(ge=1, le=MAX_TOKENS)
    load: dict[str, Any]
    speculative: dict[str, Any] | None = None
    prefix_cache: dict[str, Any] | None = None
    disaggregation: dict[str, Any] | None = None
    scheduler: dict[str, Any] | None = None  # limits the run set (max_num_seqs...); else the engine's defaults
    metric: Literal["output_tokens_per_s", "output_tokens_per_s_per_gpu", "output_tokens_per_s_per_user",
                    "ttft_ms", "itl_ms", "tpot_ms", "tpot_p50_ms"]
    measured: Annotated[float, BeforeValidator(_number)] = Field(gt=0.0)
    unit: str = ""
    source: str = ""
    source_id: str = ""

    @model_validator(mode="before")
    @classmethod
    def _as_run(cls, data: Any) -> Any:
        """The layout as it ran where the source family's dump wrote it inflated (:func:`source_layout`);
        ``measured`` in its metric's unit (ms for times, tokens/s for rates): a case written
        in another unit of the same kind is converted (0.05 s is 50 ms), one in a unit of another
        kind, or none known, refused (it had been compared as if it were in the metric's unit)."""
        misspelt(data, tuple(cls.model_fields), tuple(Parallelism.model_fields), KINDS)
        data = source_layout(data)
        if not isinstance(data, dict) or not data.get("unit") or data.get("metric") not in _METRICS:
            return data
        value, unit, metric = data.get("measured"), data["unit"], data["metric"]
        if not isinstance(unit, str) or isinstance(value, bool) or not isinstance(value, (int, float)):
            return data  # the field checks say what is wrong
        return {**data, "measured": measured_in(metric, unit, float(value)),
                "unit": "ms" if metric.endswith("_ms") else _RATE_UNIT[metric]}

    @field_validator("scheduler")
    @classmethod
    def _limits(cls, limits: dict[str, Any] | None) -> dict[str, Any] | None:
        from ..engines.scheduler import USER_LIMITS, SchedulerConfig
        from ..engines.window_options import window_limits

        if limits is None:
            return None
        unknown = sorted(set(limits) - set(USER_LIMITS))
        if unknown:
            raise ValueError(f"unknown scheduler limits {unknown}; allowed: {', '.join(USER_LIMITS)}")
        try:  # a window setting in canonical form (a YAML list as the kinds' tuple), as serve takes it
            SchedulerConfig(**(out := window_limits(SchedulerConfig(), dict(limits), None, custom=True)))
            return out
        except InferlabError as exc:
            raise ValueError(str(exc)) from None

    @field_validator("load")
    @classmethod
    def _load(cls, load: dict[str, Any]) -> dict[str, Any]:
        for key, value in load.items():
            if key not in _LOAD_KEYS:
                continue  # an unknown load key is reported as unsupported, with the keys expected
            kind, low, high = _LOAD_KEYS[key]
            ok = {"int": isinstance(value, int) and not isinstance(value, bool),
                  "real": isinstance(value, (int, float)) and not isinstance(value, bool),
                  "bool": isinstance(value, bool)}[kind]
            if not ok or kind != "bool" and not (low <= value <= high and math.isfinite(value)
                                                 and (kind == "int" or value > 0)):
                allowed = {"int": f"an integer from {low:,} to {high:,}", "real": f"a number in (0, {high:g}]",
                           "bool": "true or false"}[kind]
                raise ValueError(f"{key} must be {allowed}, got {value!r:.60}")
        return load

    @field_validator("speculative")
    @classmethod
    def _speculative(cls, spec: dict[str, Any] | None) -> dict[str, Any] | None:
        spec = spec or {}
        k = spec.get("draft_tokens")
        if k is not None and (isinstance(k, bool) or not isinstance(k, int) or not 0 <= k <= MAX_DRAFT):
            raise ValueError(f"draft_tokens must be an integer from 0 to {MAX_DRAFT}, got {k!r:.60}")
        for key in ("method", "draft_model"):
            if spec.get(key) is not None and not isinstance(spec[key], str):
                raise ValueError(f"{key} must be a name, got {spec[key]!r:.60}")
        vocab = spec.get("draft_vocab_size")
        if vocab is not None and (isinstance(vocab, bool) or not isinstance(vocab, int) or vocab < 1):
            raise ValueError(f"draft_vocab_size must be a whole number of tokens >= 1, got {vocab!r:.60}")
        for key in ("acceptance", "acceptance_length"):
            value = spec.get(key)
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))
                                      or not math.isfinite(value)):
                raise ValueError(f"{key} must be a finite number, got {value!r:.60}")
        return spec or None

    @property
    def holdout_half(self) -> int:
        """0 or 1: a fixed split of cases by a hash of the id (fit on 0, score on 1)."""
        return hashlib.sha256(self.id.encode("utf-8")).digest()[0] & 1


@dataclass(frozen=True)
class InvalidCase:
    """A case that does not follow the schema: kept with its reason, so that the other
    cases of its file are still predicted (``inferlab validate`` reports it in its row)."""

    id: str
    reason: str
    regime: str = ""
    metric: str = ""
    measured: float | None = None


def _invalid(item: Any, i: int, reason: str) -> InvalidCase:
    """An :class:`InvalidCase` with what can be read of ``item`` (for the report's columns)."""
    fields = item if isinstance(item, dict) else {}
    measured = fields.get("measured")
    ok = isinstance(measured, (int, float)) and not isinstance(measured, bool) and math.isfinite(measured)
    text = {k: fields.get(k) if isinstance(fields.get(k), str) else "" for k in ("id", "regime", "metric")}
    return InvalidCase(id=text["id"] or f"case {i + 1}", reason=reason, regime=text["regime"], metric=text["metric"],
                       measured=float(measured) if ok else None)


def _read_yaml(text: str, label: str) -> list[Case | InvalidCase]:
    """The cases of one file, each a :class:`Case` or an :class:`InvalidCase`; a file that
    is not a case file at all is a :class:`SpecError`."""
    try:
        data = yaml.load(text, Loader=_LOADER)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise SpecError(f"case file {label}: not valid YAML{where}: {getattr(exc, 'problem', exc)}") from None
    except RecursionError:
        raise SpecError(f"case file {label}: nested too deeply to be a case file") from None
    raw = case_list(data, label, SCHEMA)
    cases: list[Case | InvalidCase] = []
    for i, item in enumerate(raw):
        named = isinstance(item, dict) and isinstance(item.get("id"), str) and item.get("id")
        where = f"case file {label}, case {i + 1}" + (f" ({item['id']})" if named else "")  # counted from 1
        if not isinstance(item, dict):
            cases.append(_invalid(item, i, f"{where}: expected a mapping of fields, got {type(item).__name__}"))
            continue
        try:
            cases.append(Case(**{str(k): v for k, v in item.items()}))
        except ValidationError as exc:
            cases.append(_invalid(item, i, f"{where}: {format_validation_error(exc, Case)}"))
    return cases


def _read_texts(paths: Sequence[str | Path] | str | Path | None) -> list[tuple[str, str]]:
    if paths is None:
        folder = resources.files("inferlab.validation") / "data"
        return [((folder / name).read_text(encoding="utf-8"), name) for name in PUBLIC_FILES]
    texts = []
    for path in [paths] if isinstance(paths, (str, Path)) else paths:
        texts.append((read_text(path, f"case file {path}"), str(path)))
    return texts


def load_case_entries(paths: Sequence[str | Path] | str | Path | None = None) -> list[Case | InvalidCase]:
    """Every case of the files (the public ones with none), in order: a case that breaks the
    schema or repeats an id is an :class:`InvalidCase` with its reason, not the end of the file.

    Raises
    ------
    SpecError
        A file that cannot be read, is not UTF-8 YAML, or is not ``inferlab-cases/1``.
    """
    cases: list[Case | InvalidCase] = []
    seen: dict[str, str] = {}
    for text, label in _read_texts(paths):
        for case in _read_yaml(text, label):
            if isinstance(case, Case) and case.id in seen:
                case = InvalidCase(case.id, f"case file {label}: duplicate case id {case.id!r} (first in "
                                            f"{seen[case.id]}); ids must be unique", case.regime, case.metric,
                                   case.measured)
            elif isinstance(case, Case):
                seen[case.id] = label
            cases.append(case)
    return cases


def load_cases(paths: Sequence[str | Path] | str | Path | None = None) -> list[Case]:
    """Read case files; with none, the public cases shipped in the package.

    Raises
    ------
    SpecError
        A file that cannot be read, is not ``inferlab-cases/1``, has a malformed case, or
        repeats a case id (within or across files); :func:`load_case_entries` keeps the
        malformed cases instead.
    """
    entries = load_case_entries(paths)
    bad = next((c for c in entries if isinstance(c, InvalidCase)), None)
    if bad is not None:
        raise SpecError(bad.reason)
    return entries  # type: ignore[return-value]


def _has_experts(model: str) -> bool:
    """Whether the catalog model has routed experts (a dense model ignores ``moe_tp``); True if unknown."""
    from ..specs.catalog import load_model

    try:
        return load_model(model).moe is not None
    except InferlabError:
        return True


def case_layout(case: Case) -> dict[str, Any] | str:
    """The case's layout as keyword arguments of :func:`inferlab.estimate` (``tp``, ``pp``,
    ``ep``, ``dp``, ``attention_dp``, ``attention_tp``), or why it cannot be mapped (:func:`layout_of`)."""
    layout = layout_of(case.model, case.parallelism, case.num_gpus)
    if isinstance(layout, str):
        return layout
    tp, pp, dp = layout["tp"], layout["pp"], layout["dp"]
    if case.num_gpus != tp * pp * dp:
        return f"num_gpus={case.num_gpus} differs from tp x pp x dp = {tp * pp * dp}"
    return layout


def layout_of(model: str, par: Parallelism, num_gpus: int | None = None) -> dict[str, Any] | str:
    """A layout in the engines' spellings as keyword arguments of :func:`inferlab.estimate`,
    or why it cannot be mapped; the GPU count is the caller's to check.

    With attention data parallelism a case may give the attention TP per rank as ``tp``
    and the ranks as ``attention_dp_size``: the stage then has ``tp x attention_dp_size``
    GPUs, ranks of ``tp`` (``attention_tp``). ``tp`` equal to the ranks on as many GPUs
    (``num_gpus`` over ``pp x dp``) is TensorRT-LLM's spelling instead: ``tp`` GPUs, each a
    rank. vLLM's ``dp=N`` with ``ep=tp x N`` is one stage of ``tp x N`` GPUs
    (:func:`~inferlab.core.parallelism.expert_layout`). ``moe_tp`` is checked only for MoE models.
    """
    adp = par.attention_dp or (par.attention_dp_size or 1) > 1
    tp, attention_tp = par.tp, 1
    ranks = par.attention_dp_size
    if adp and ranks is not None and ranks != par.tp:
        tp, attention_tp = par.tp * ranks, par.tp
    elif adp and ranks == par.tp > 1 and num_gpus is not None and num_gpus == par.tp * ranks * par.pp * par.dp:
        tp, attention_tp = par.tp * ranks, par.tp  # as many ranks as GPUs a rank: the GPUs say which
    dp = par.dp
    if _has_experts(model) and attention_tp == 1:
        tp, _, dp, adp, attention_tp = expert_layout(tp, par.ep, par.dp, adp)
    if tp % par.ep:
        return f"ep={par.ep} does not divide tp={tp}: expert groups outside the stage's GPUs are not modelled"
    if par.moe_tp is not None and par.moe_tp * par.ep != tp and _has_experts(model):
        return f"moe_tp={par.moe_tp} x ep={par.ep} differs from tp={tp}"
    return {"tp": tp, "pp": par.pp, "ep": par.ep, "dp": dp, "attention_dp": adp, "attention_tp": attention_tp}


def static_unsupported_reason(case: Case) -> str | None:
    """Why :func:`inferlab.estimate` cannot predict the static-batch ``case``, or None when it can."""
    if case.disaggregation:  # said first: its num_gpus is both pools', which no one layout matches
        return ("disaggregated prefill and decode in a static batch: not mapped (online, offline and closed-loop "
                "cases over separate pools are simulated)")
    layout = case_layout(case)
    if isinstance(layout, str):
        return layout
    if case.speculative:
        try:
            case_speculative(case)
        except InferlabError as exc:
            return f"speculative decoding as given cannot be modelled: {exc}"
    reason = prefix_cache_reason(case)
    if reason is not None:
        return reason
    if case.prefix_cache and "prompts" in case.prefix_cache:
        return "prefix_cache.prompts in a static batch: each prompt is sent once, so none repeats"
    if set(case.load) != {"batch_size"}:
        return f"static_batch with load {sorted(case.load)} (expected batch_size)"
    return None


def prefix_cache_reason(case: Case) -> str | None:
    """Why the case's ``prefix_cache`` cannot be simulated, or None: it gives either a
    ``hit_rate`` (share of prompt tokens found cached, 0-1) or ``prompts`` (the distinct prompts
    the client drew its requests from, a whole number >= 1), not both."""
    given = case.prefix_cache or {}
    if not given:
        return None
    unknown = sorted(set(given) - {"hit_rate", "prompts"})
    if unknown:
        return f"prefix_cache: unknown key(s) {', '.join(map(str, unknown))} (hit_rate or prompts)"
    if len(given) != 1:
        return "prefix_cache gives both a hit_rate and prompts; give one"
    if "hit_rate" in given:
        hit = given["hit_rate"]
        ok = isinstance(hit, (int, float)) and not isinstance(hit, bool) and 0.0 <= hit <= 1.0
        return None if ok else f"prefix_cache.hit_rate {hit!r} must be a share from 0 to 1"
    n = given["prompts"]
    ok = isinstance(n, int) and not isinstance(n, bool) and n >= 1
    return None if ok else f"prefix_cache.prompts {n!r} must be a whole number of distinct prompts >= 1"


def case_prefix(case: Case) -> tuple[str, float] | None:
    """The case's prefix cache as ``("hit_rate", h)`` or ``("prompts", n)``; None without one
    (or with a hit rate of 0)."""
    given = case.prefix_cache or {}
    if given.get("prompts") is not None:
        return ("prompts", int(given["prompts"]))
    hit = float(given.get("hit_rate") or 0.0)
    return ("hit_rate", hit) if hit > 0 else None


def case_speculative(case: Case) -> Any:
    """The case's ``speculative`` block as a :class:`SpeculativeConfig` (None without one)."""
    return speculative_from(case.speculative)


def speculative_from(spec: dict[str, Any] | None) -> Any:
    """A case's ``speculative`` mapping as a :class:`SpeculativeConfig` (None for none)."""
    from ..techniques.speculative import SpeculativeConfig

    if spec and spec.get("draft_tokens") is None:
        raise SpecError("speculative: draft_tokens (the draft length k, from 1) is missing")
    return None if not spec else SpeculativeConfig(
        method=spec.get("method") or "", k=int(spec["draft_tokens"]), acceptance=spec.get("acceptance"),
        acceptance_length=spec.get("acceptance_length"), draft_model=spec.get("draft_model"),
        draft_vocab_size=spec.get("draft_vocab_size"))


def case_precision(case: Case) -> dict[str, str]:
    """The case's ``precision`` as :meth:`PrecisionConfig.parse` takes it.

    Every stated kind is passed (``moe_weights`` included: the routed experts' format), over
    the formats its source family states (:data:`~.case_setup.SOURCE_PRECISION`); a KV cache not
    stated is the engine's for the checkpoint such a run loads (:func:`~.case_setup.unstated_kv_cache`);
    other kinds not stated are the checkpoint's.
    """
    stated = {k: v for k, v in case.precision.items() if k in KINDS and v}
    out = {**SOURCE_PRECISION.get(case.source, {}), **stated}
    if "kv_cache" not in out and (kv := unstated_kv_cache(case, out)) is not None:
        out["kv_cache"] = kv
    return out
