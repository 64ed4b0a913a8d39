"""Deployment files: a YAML description of one deployment and workload for ``estimate``.

Keys are :func:`inferlab.estimate` parameters; techniques may be written as the CLI's
text (``speculative: "eagle:k=4,accept=0.7"``) or as mappings of their fields::

    model: llama-3.1-70b
    hardware: h100-sxm
    tp: 4
    pp: 2
    precision: {weights: fp8, activations: fp8, kv_cache: fp8}
    isl: 2048
    osl: 256
    batch_size: [1, 8, 64]
    speculative: {method: draft, draft_model: llama-3.1-8b, k: 4, acceptance: 0.7}
    prefix_cache: {hit_rate: 0.5, replicas: 4, cache_aware_routing: false}

``engine_args`` takes an engine's launch command instead of the deployment keys it sets
(:mod:`inferlab.engines`); keys given beside it must agree with it::

    engine_args: vllm serve meta-llama/Llama-3.1-70B-Instruct -tp 4 --quantization fp8
    hardware: h100-sxm

A file may also be a :class:`~inferlab.Deployment` in its own form (``layout:``, ``engine:``
as a mapping; what ``Deployment.to_dict()`` and ``inferlab estimate --json`` write), with an
optional ``workload:`` (a :class:`~inferlab.Workload`'s mapping): the JSON of one estimate is
a deployment file for the next.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


from ..checks import from_fields, repeated
from ..core.quantization import PrecisionConfig
from ..errors import InferlabError, SpecError, did_you_mean
from ..specs.validation import read_yaml_mapping
from ..techniques.disaggregation import Disaggregation, Pool
from ..techniques.prefix_cache import PrefixCache
from ..techniques.speculative import SpeculativeConfig
from ..techniques.speculative_config import PRESETS

#: Keys a deployment file may hold, and what each is.
KEYS = {
    "model": "catalog id, alias or config.json path", "hardware": "catalog id", "num_gpus": "integer",
    "tp": "integer", "pp": "integer", "ep": "integer", "dp": "integer", "attention_dp": "true or false",
    "attention_tp": "integer (GPUs of an attention data-parallel rank)",
    "expert_imbalance": "number >= 1", "micro_batches": "integer",
    "precision": "format name, text (fp8 kv:bf16) or mapping; default: the checkpoint's formats",
    "isl": "tokens (integer or list)", "osl": "tokens (integer or list)", "batch_size": "requests (integer or list)",
    "engine": "generic, trtllm, vllm, sglang, lmdeploy", "profile": "default, roofline or a profile path",
    "attention": "flash or naive", "cuda_graphs": "true or false", "gpu_memory_utilization": "number in (0, 1]",
    "kv_block_size": "tokens", "max_num_tokens": "tokens", "price_per_gpu_hour": "USD", "utilization": "number in (0, 1]",
    "waves": "true or false", "speculative": "text or mapping", "prefix_cache": "hit rate, text or mapping",
    "disaggregation": "text or mapping", "prefill_batch": "requests",
    "allow_long_context": "true or false (contexts beyond the model's max_position_embeddings, RoPE scaling)",
    "engine_args": "an engine launch command: vllm serve ..., python -m sglang.launch_server ..., trtllm-serve ...",
}


#: Most values (scalars, list items, mapping entries) a deployment file may expand to. A
#: deployment is a few dozen; YAML aliases can make a few hundred bytes expand to billions
#: (each alias is a reference, so the expanded size is counted, not the text's).
MAX_VALUES = 10_000
#: Most values of one grid axis (``isl``, ``osl``, ``batch_size``, ``prefill_batch``).
MAX_AXIS_VALUES = 1_000
_AXES = ("isl", "osl", "batch_size", "prefill_batch")


def _expanded_size(data: Any, budget: int) -> int:
    """Values in ``data`` with every alias expanded, counting stopped once past ``budget``."""
    seen, stack = 0, [data]
    while stack and seen <= budget:
        item = stack.pop()
        seen += 1
        if isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return seen


def _whole(v: Any) -> bool:
    """A whole number, also written with an exponent (1e2 reads as a float)."""
    return isinstance(v, int) and not isinstance(v, bool) or isinstance(v, float) and v.is_integer()


def _check_shape(path: Path, data: dict[str, Any]) -> None:
    """Refuse an expanded size past :data:`MAX_VALUES` and grid axes that are not a whole
    number or a flat list of them, before anything reads the values."""
    if _expanded_size(data, MAX_VALUES) > MAX_VALUES:
        raise SpecError(f"{path}: expands to more than {MAX_VALUES:,} values (YAML aliases?); a deployment file "
                        "holds one deployment and a small grid")
    for key in (k for k in _AXES if k in data):
        value = data[key]
        items = value if isinstance(value, list) else [value]
        bad = next((v for v in items if not _whole(v)), None)
        if bad is not None or not 1 <= len(items) <= MAX_AXIS_VALUES:
            shown = f" holding {bad!r:.60}" if bad is not None and isinstance(value, list) \
                else "" if isinstance(value, (list, dict)) else f" {value!r:.60}"
            raise SpecError(f"{path}: {key} must be a whole number or a flat list of 1 to {MAX_AXIS_VALUES:,} whole "
                            f"numbers, got {type(value).__name__}{shown}")
        twice = repeated(items)
        if twice is not None:  # the axes are gridded, as the CLI's flags are: a repeat is a repeated row
            raise SpecError(f"{path}: {key} lists {twice!r} twice; each value once")


def _technique(value: Any, cls: type, key: str, build: Any = None) -> Any:
    if value is None or isinstance(value, (str, int, float, cls)):
        return value
    if not isinstance(value, dict):
        raise SpecError(f"{key}: expected text or a mapping, got {type(value).__name__}")
    try:
        if build:
            return build(value)
        # a dataclass: an unknown field named with the closest known one and the allowed ones
        return from_fields(cls, value, key) if hasattr(cls, "__dataclass_fields__") else cls(**value)
    except (TypeError, KeyError, InferlabError) as exc:
        text = str(exc)
        raise SpecError(text[:300] if text.startswith(f"{key}: ") else f"{key}: {text[:300]}") from None


def _disaggregation(value: dict) -> Disaggregation:
    pools = {side: Pool.parse(value[side]) if isinstance(value.get(side), str) else Pool(**value[side])
             for side in ("prefill", "decode") if side in value}
    if len(pools) != 2:
        raise SpecError("disaggregation: needs both 'prefill' and 'decode' pools")
    return Disaggregation(**{**value, **pools})


def load_deployment_file(path: str | Path) -> dict[str, Any]:
    """Read a deployment file into :func:`inferlab.estimate` keyword arguments.

    Raises
    ------
    SpecError
        On unreadable YAML, unknown keys (listing the allowed ones), malformed techniques,
        or keys that contradict the file's ``engine_args``.
    """
    kwargs, launch = read_deployment_file(path)
    if launch is None:
        return kwargs
    try:
        return launch.merged(kwargs, "estimate")
    except InferlabError as exc:
        raise SpecError(f"{path}: {exc}") from None


def read_deployment_file(path: str | Path, open_acceptance: bool = False,
                         hardware: str | None = None) -> tuple[dict[str, Any], Any]:
    """The file's own keyword arguments and its ``engine_args`` launch (None without one),
    not yet merged (see :meth:`~inferlab.engines.EngineLaunch.merged`). ``open_acceptance``: a
    flat file's ``speculative`` that names no acceptance is kept as its fields (a benchmark
    run's recorded acceptance completes it) rather than refused. ``hardware``: the GPU where the
    file names none (``--gpu`` beside it)."""
    path = Path(path)
    data = _deployment_mapping(path, hardware)
    if _typed(data):
        return _typed_form(path, data), None
    unknown = sorted(str(k) for k in set(data) - set(KEYS))
    if "cases" in unknown:  # another kind of file: say which and what reads it
        raise SpecError(f"{path} is a file of measured cases, not a deployment: predict them with inferlab validate {path}")
    if unknown:
        raise SpecError(f"{path}: unknown key(s) {', '.join(unknown)[:200]}{did_you_mean(unknown[0], KEYS)}; "
                        f"allowed: {', '.join(KEYS)}")
    _check_shape(path, data)
    try:
        if data.get("precision") is not None:  # a bad format is named with its file (checked again per model)
            PrecisionConfig.parse(data["precision"])
        spec = data.get("speculative")
        if open_acceptance and isinstance(spec, str) and spec.strip() not in PRESETS:
            spec = SpeculativeConfig.fields(spec)
        if open_acceptance and isinstance(spec, dict) and not {"acceptance", "acceptance_length"} & set(spec):
            data["speculative"] = spec  # (checked field by field where it is read)
        else:
            data["speculative"] = _technique(spec, SpeculativeConfig, "speculative")
        data["prefix_cache"] = _technique(data.get("prefix_cache"), PrefixCache, "prefix_cache")
        data["disaggregation"] = _technique(data.get("disaggregation"), Disaggregation, "disaggregation",
                                            _disaggregation)
    except InferlabError as exc:
        raise SpecError(f"{path}: {exc}") from None
    launch = None
    if "engine_args" in data:
        from ..engines import parse_engine_args

        if not isinstance(data["engine_args"], str):
            raise SpecError(f"{path}: engine_args must be the launch command as text")
        try:
            launch = parse_engine_args(data.pop("engine_args"))
        except InferlabError as exc:
            raise SpecError(f"{path}: engine_args: {exc}") from None
    for key in ("model", "hardware"):
        if key not in data and not (key == "model" and launch is not None) and not (
                key == "hardware" and data.get("disaggregation") is not None):  # the pools name the GPUs
            raise SpecError(f"{path}: required key {key!r} is missing")
    return data, launch


def _deployment_mapping(path: Path, hardware: str | None) -> dict[str, Any]:
    """A deployment file's mapping: the deployment of one ``--json`` wrote (its results aside), with
    ``hardware`` where the file names none and no pools."""
    data = read_yaml_mapping(path, f"deployment file {path}")
    if isinstance(data.get("deployment"), dict):  # what --json writes: its deployment and workload, the results aside
        data = _written_by_json(path, data)
    if hardware and data.get("hardware") is None and data.get("disaggregation") is None:
        data = {**data, "hardware": hardware}
    return data


def _written_by_json(path: Path, data: dict[str, Any]) -> dict[str, Any]:
    """The deployment (with its workload) of a file nesting them as ``--json`` writes them; the
    results beside them are left, where the file has them (``ttft_s``), and refused otherwise."""
    others = sorted(str(k) for k in set(data) - {"deployment", "workload"})
    if others and "latency_s" in data:  # serve's: its workload is a load, not a static batch
        raise SpecError(f"{path} is what serve --json writes; estimate reads a static batch: keep its deployment: "
                        "alone (and give the batch with --batch, --isl, --osl)")
    if others and "ttft_s" not in data:
        raise SpecError(f"{path}: key(s) {', '.join(others)[:200]} beside deployment; allowed: deployment, workload "
                        "(or the deployment's own keys at the top, without deployment:)")
    nested = dict(data["deployment"])
    if "workload" in data:
        nested["workload"] = data["workload"]
    return nested


def _typed(data: dict[str, Any]) -> bool:
    """Whether a deployment file is in the :class:`~inferlab.Deployment`'s own form."""
    return "layout" in data or "workload" in data or isinstance(data.get("engine"), dict)


def deployment_file_limits(path: str | Path, hardware: str | None = None) -> dict[str, Any]:
    """The scheduler limits a deployment file in the :class:`~inferlab.Deployment`'s own form
    sets on its engine (serving limits included, which the estimate arguments of
    :func:`read_deployment_file` leave out); ``{}`` for the flat form. ``hardware``: as there."""
    from .deployment import Deployment

    path = Path(path)
    data = _deployment_mapping(path, hardware)
    if not _typed(data):
        return {}
    data.pop("workload", None)
    try:
        return Deployment.from_dict(data).engine.limits()
    except SpecError as exc:
        if type(exc) is not SpecError:
            raise
        raise SpecError(f"{path}: {exc}") from None


def _typed_form(path: Path, data: dict[str, Any]) -> dict[str, Any]:
    """:func:`inferlab.estimate` keyword arguments of a file in the :class:`~inferlab.Deployment`'s
    own form (what ``to_dict()`` and ``--json`` write), with an optional ``workload:`` mapping
    (:class:`~inferlab.Workload`'s form, a static batch)."""
    from .deployment import Deployment
    from .workload import Workload

    data = dict(data)
    load = data.pop("workload", None)
    try:
        kwargs = Deployment.from_dict(data).estimate_kwargs()
        if load is not None:  # checked as a Workload; its axes as the flat form gives them (the CLI grids them)
            axes = Workload.from_dict(load).to_dict()
            for key in ("batch_size", "isl", "osl"):  # gridded by the CLI: a repeat is a repeated row
                items = axes.get(key) if isinstance(axes.get(key), list) else []
                if repeated(items) is not None:
                    raise SpecError(f"workload: {key} lists a value twice ({items}); each value once")
            kwargs.update({k: axes[k] for k in ("batch_size", "isl", "osl", "prefill_batch", "waves") if k in axes})
    except SpecError as exc:
        if type(exc) is not SpecError:  # an unknown name keeps its own type and did-you-mean
            raise
        raise SpecError(f"{path}: {exc}") from None
    return kwargs
