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
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


from .errors import InferlabError, SpecError
from .specs.validation import read_yaml_mapping
from .techniques.disaggregation import Disaggregation, Pool
from .techniques.prefix_cache import PrefixCache
from .techniques.speculative import SpeculativeConfig

#: Keys a deployment file may hold, and what each is.
KEYS = {
    "model": "catalog id, alias or config.json path", "hardware": "catalog id", "num_gpus": "integer",
    "tp": "integer", "pp": "integer", "ep": "integer", "dp": "integer", "attention_dp": "true or false",
    "expert_imbalance": "number >= 1", "micro_batches": "integer", "precision": "format name or mapping",
    "isl": "tokens (integer or list)", "osl": "tokens (integer or list)", "batch_size": "requests (integer or list)",
    "engine": "generic, trtllm, vllm, sglang, lmdeploy", "profile": "default, roofline or a profile path",
    "attention": "flash or naive", "cuda_graphs": "true or false", "gpu_memory_utilization": "number in (0, 1]",
    "kv_block_size": "tokens", "max_num_tokens": "tokens", "price_per_gpu_hour": "USD", "utilization": "number in (0, 1]",
    "waves": "true or false", "speculative": "text or mapping", "prefix_cache": "hit rate, text or mapping",
    "disaggregation": "text or mapping", "prefill_batch": "requests",
}


def _technique(value: Any, cls: type, key: str, build: Any = None) -> Any:
    if value is None or isinstance(value, (str, int, float, cls)):
        return value
    if not isinstance(value, dict):
        raise SpecError(f"{key}: expected text or a mapping, got {type(value).__name__}")
    try:
        return build(value) if build else cls(**value)
    except (TypeError, InferlabError) as exc:
        raise SpecError(f"{key}: {exc}") from None


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
        On unreadable YAML, unknown keys (listing the allowed ones) or malformed techniques.
    """
    path = Path(path)
    data = read_yaml_mapping(path, f"deployment file {path}")
    unknown = sorted(set(data) - set(KEYS))
    if unknown:
        raise SpecError(f"{path}: unknown key(s) {', '.join(unknown)}; allowed: {', '.join(KEYS)}")
    try:
        data["speculative"] = _technique(data.get("speculative"), SpeculativeConfig, "speculative")
        data["prefix_cache"] = _technique(data.get("prefix_cache"), PrefixCache, "prefix_cache")
        data["disaggregation"] = _technique(data.get("disaggregation"), Disaggregation, "disaggregation",
                                            _disaggregation)
    except InferlabError as exc:
        raise SpecError(f"{path}: {exc}") from None
    for key in ("model", "hardware"):
        if key not in data:
            raise SpecError(f"{path}: required key {key!r} is missing")
    return data
