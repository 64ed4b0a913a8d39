"""Formats of a model's shipped checkpoint, per tensor kind, read from its quantization config.

A Hugging Face ``config.json`` may carry a ``quantization_config`` (DeepSeek-V3/R1 and
Kimi-K2: FP8 with 128x128 block scales; gpt-oss: MXFP4 routed experts, attention,
router, embeddings and LM head left in BF16; AWQ/GPTQ: INT4 weight-only; compressed-tensors
(llm-compressor's format: Kimi-K2.5's INT4 routed experts, FP8 and W8A8 checkpoints): the
first quantization group's weight and activation widths, its ``ignore`` list); a ModelOpt
checkpoint carries an ``hf_quant_config.json`` beside it (FP8 or NVFP4 weights and
activations, often an FP8 KV cache). Recipes not listed here are not guessed: the
formats stay BF16 and the source says the recipe was not read.

References
----------
.. [1] Hugging Face transformers, quantization configs (``FineGrainedFP8Config``:
   ``weight_block_size``; ``Mxfp4Config``: ``modules_to_not_convert``; ``AwqConfig``,
   ``GPTQConfig``: ``bits``).
.. [2] NVIDIA TensorRT Model Optimizer, ``hf_quant_config.json``: ``quant_algo``,
   ``kv_cache_quant_algo``, ``exclude_modules``.
.. [3] vllm-project/compressed-tensors, ``QuantizationConfig``: ``config_groups`` (each with
   ``weights`` and ``input_activations``: ``num_bits``, ``type`` int or float, ``strategy``,
   ``group_size``), ``ignore``, ``format``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, model_validator

from ..errors import SpecError
from ..precision import number_format

#: Recipe names -> (weight format, activation format). Weight-only recipes keep BF16
#: activations; W8A8 and W4A4 recipes quantize the activations too.
_RECIPES: dict[str, tuple[str, str]] = {
    "fp8": ("fp8", "fp8"), "FP8": ("fp8", "fp8"), "fbgemm_fp8": ("fp8", "fp8"), "FP8_BLOCK": ("fp8_block", "fp8"),
    "NVFP4": ("nvfp4", "nvfp4"), "nvfp4": ("nvfp4", "nvfp4"), "mxfp4": ("mxfp4", "bf16"), "MXFP4": ("mxfp4", "bf16"),
    "W4A16_AWQ": ("int4", "bf16"), "INT4_AWQ": ("int4", "bf16"), "W4A8_AWQ": ("int4", "fp8"),
    "INT8_SQ": ("int8", "int8"), "W8A8": ("int8", "int8"),
}
#: Integer weight-only methods whose width is ``bits``.
_BITS_METHODS = {"awq", "gptq"}
#: Module-name fragments of attention blocks in exclusion lists.
_ATTENTION_MODULES = ("self_attn", ".attn", "attention")


class CheckpointFormats(BaseModel):
    """Storage formats of a released checkpoint and where they were read.

    Attributes
    ----------
    weights : str
        Linear-layer weights outside the routed experts (embedding and LM head are
        16-bit regardless, see :func:`inferlab.core.parallelism.weights_per_gpu`).
    moe_weights : str or None
        Routed-expert weights; None: as ``weights``.
    activations : str
        Activations the recipe quantizes to (``bf16`` for weight-only recipes).
    kv_cache : str or None
        KV-cache format the checkpoint was calibrated for; None: not stated (BF16).
    source : str
        What was read: file, field and recipe.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    weights: str = "bf16"
    moe_weights: str | None = None
    activations: str = "bf16"
    kv_cache: str | None = None
    source: str

    @model_validator(mode="after")
    def _check(self) -> CheckpointFormats:
        for fmt in (self.weights, self.moe_weights, self.activations, self.kv_cache):
            if fmt is not None:
                number_format(fmt)
        return self

    def describe(self) -> str:
        """One line: the formats per kind, then the source."""
        parts = [f"weights {self.weights}"]
        if self.moe_weights and self.moe_weights != self.weights:
            parts.append(f"routed experts {self.moe_weights}")
        parts += [f"activations {self.activations}", f"KV cache {self.kv_cache}" if self.kv_cache else "KV cache not stated"]
        return ", ".join(parts) + f"; from {self.source}"


def _recipe(algo: Any, bits: Any = None, block: Any = None) -> tuple[str, str] | None:
    if algo in _BITS_METHODS:
        fmt = {4: "int4", 8: "int8"}.get(bits if isinstance(bits, int) else 4)
        return (fmt, "bf16") if fmt else None
    found = _RECIPES.get(algo) if isinstance(algo, str) else None
    if found and found[0] == "fp8" and block:  # DeepSeek/Kimi: weight_block_size [128, 128]
        return "fp8_block", found[1]
    return found


def _attention_excluded(modules: Any) -> bool:
    return isinstance(modules, list) and any(isinstance(m, str) and any(a in m for a in _ATTENTION_MODULES)
                                             for m in modules)


def _formats(recipe: tuple[str, str], experts_only: bool, source: str, kv: str | None = None) -> CheckpointFormats:
    weights, acts = recipe
    if experts_only:  # attention left in BF16: the recipe covers the MoE experts (gpt-oss)
        return CheckpointFormats(weights="bf16", moe_weights=weights, activations="bf16", kv_cache=kv,
                                 source=source + "; attention not converted: routed experts only")
    return CheckpointFormats(weights=weights, activations=acts, kv_cache=kv, source=source)


def _compressed_tensors(qc: Mapping[str, Any]) -> tuple[str, str] | None:
    """(weight format, activation format) of a compressed-tensors config's first quantization
    group: W4A16 integer groups as INT4, W8A8 floats as FP8 (block strategy: FP8 in blocks),
    W8A8 integers as INT8, 4-bit floats in groups of 16 as NVFP4; None for anything else."""
    groups = qc.get("config_groups")
    group = next(iter(groups.values()), None) if isinstance(groups, Mapping) else None
    weights = group.get("weights") if isinstance(group, Mapping) else None
    if not isinstance(weights, Mapping):
        return None
    acts = group.get("input_activations")
    acts = acts if isinstance(acts, Mapping) else {}
    bits, kind, act_bits = weights.get("num_bits"), weights.get("type"), acts.get("num_bits")
    if (kind, bits, act_bits) == ("int", 4, None):  # groups of 32 store a scale per 32 weights
        return ("int4_g32" if weights.get("group_size") == 32 else "int4"), "bf16"
    if (kind, bits, act_bits) == ("float", 8, 8):
        return ("fp8_block" if weights.get("strategy") == "block" else "fp8"), "fp8"
    if (kind, bits, act_bits, acts.get("type")) == ("int", 8, 8, "int"):
        return "int8", "int8"
    if (kind, bits, weights.get("group_size")) == ("float", 4, 16):
        return "nvfp4", ("nvfp4" if act_bits == 4 else "bf16")
    return None


def _from_hf(qc: Mapping[str, Any], is_moe: bool) -> CheckpointFormats:
    method = qc.get("quant_method")
    if method is not None and not isinstance(method, str):
        raise SpecError(f"config: quantization_config.quant_method must be a name such as 'fp8' or 'mxfp4', "
                        f"got {method!r:.60}")
    left = "ignore" if method == "compressed-tensors" else "modules_to_not_convert"
    _check_module_list(qc, left, "quantization_config")
    where = f"config.json quantization_config, quant_method {method!r}"
    recipe = _compressed_tensors(qc) if method == "compressed-tensors" else \
        _recipe(method, qc.get("bits"), qc.get("weight_block_size"))
    if recipe is None:
        return CheckpointFormats(source=f"{where} not read by inferlab: formats assumed bf16")
    return _formats(recipe, is_moe and _attention_excluded(qc.get(left)), where)


def _from_modelopt(quant: Mapping[str, Any], is_moe: bool, where: str) -> CheckpointFormats | None:
    recipe_data = quant.get("quantization", quant)
    if not isinstance(recipe_data, Mapping):
        raise SpecError(f"{where}: hf_quant_config 'quantization' must be a mapping")
    algo, kv_algo = recipe_data.get("quant_algo"), recipe_data.get("kv_cache_quant_algo")
    for key, value in (("quant_algo", algo), ("kv_cache_quant_algo", kv_algo)):
        if value is not None and not isinstance(value, str):
            raise SpecError(f"{where}: hf_quant_config {key} must be a name such as 'FP8' or 'NVFP4', "
                            f"got {value!r:.60}")
    _check_module_list(recipe_data, "exclude_modules", f"{where}: hf_quant_config")
    recipe = _recipe(algo)
    kv_recipe = _recipe(kv_algo)
    if recipe is None and kv_recipe is None:
        return None
    source = f"hf_quant_config.json (ModelOpt), quant_algo {algo!r}, kv_cache_quant_algo {kv_algo!r}"
    kv = kv_recipe[0] if kv_recipe else None
    if recipe is None:
        return CheckpointFormats(kv_cache=kv, source=source)
    return _formats(recipe, is_moe and _attention_excluded(recipe_data.get("exclude_modules")), source, kv)


def _check_module_list(section: Mapping[str, Any], key: str, where: str) -> None:
    """Refuse a module list that is not a list of names (a string would be read as no exclusions)."""
    modules = section.get(key)
    if modules is not None and not (isinstance(modules, list) and all(isinstance(m, str) for m in modules)):
        raise SpecError(f"config: {where}.{key} must be a list of module names, got {modules!r:.60}")


def checkpoint_formats(data: Mapping[str, Any], quant: Mapping[str, Any] | None, where: str,
                       is_moe: bool) -> CheckpointFormats | None:
    """The checkpoint's formats from ``quantization_config`` and a ModelOpt sidecar (which wins).

    None when neither is present: the checkpoint is the config's 16-bit dtype.

    Raises
    ------
    SpecError
        A ``quantization_config`` that is not a mapping, or whose method or module list
        has the wrong type (read otherwise, it would silently mean BF16 or no exclusions).
    """
    found = None
    qc = data.get("quantization_config")
    if qc is not None and not isinstance(qc, Mapping):
        raise SpecError(f"config: quantization_config must be a mapping (quant_method, ...), got {qc!r:.60}")
    if isinstance(qc, Mapping):
        found = _from_hf(qc, is_moe)
    if quant is not None:
        found = _from_modelopt(quant, is_moe, where) or found
    return found
