"""How a deployment spreads one model over GPUs: tensor, pipeline, expert and data parallelism.

``tp`` GPUs form one pipeline stage; ``pp`` stages form a replica; ``dp`` replicas serve
in parallel: ``num_gpus = tp x pp x dp``. Inside a stage, MoE layers run ``ep`` expert
groups of ``moe_tp`` GPUs each (``ep x moe_tp = tp``); with ``attention_dp`` the stage's
GPUs run attention data-parallel (each rank on its own sequences) and reach the experts
through all-to-all, as large MoE deployments do. A rank is one GPU holding all heads, or
``attention_tp`` GPUs splitting them (SGLang's ``--tp 8 --dp 4 --enable-dp-attention``,
vLLM's ``-tp 2 -dp 4 --enable-expert-parallel``: four ranks of two GPUs).
"""

from __future__ import annotations

import math

from dataclasses import dataclass

from ..errors import CombinationError, InfeasibleError, SpecError, option, option_name
from ..precision import number_format
from ..specs.model import ModelSpec
from .quantization import PrecisionConfig


def kv_units(model: ModelSpec) -> int:
    """The units a token's KV cache splits into over tensor-parallel ranks: the KV heads, or one
    for MLA's latent KV (held whole by every rank)."""
    return 1 if model.mla is not None else model.num_key_value_heads


def tp_split_reason(model: ModelSpec, tp: int) -> str:
    """Why ``tp`` GPUs cannot split the model's attention over them, or ``""`` when they can.

    Each GPU takes a whole share of the attention heads (``tp`` divides them) and of the KV
    heads: ``tp`` divides them, or is a multiple of them, each KV head then held by
    ``tp / num_key_value_heads`` GPUs (vLLM's ``QKVParallelLinear``, which SGLang and
    TensorRT-LLM share). MLA's one latent KV is held whole by every GPU.
    """
    heads = model.num_attention_heads
    if tp < 1 or heads % tp:
        return f"tp={tp} does not divide the {heads} attention heads"
    kv = kv_units(model)
    if kv % tp and tp % kv:
        return f"tp={tp} does not split the {kv} KV heads (it neither divides them nor is a multiple of them)"
    lin = model.linear_attention
    if lin is not None and lin.num_key_heads % tp:
        return f"tp={tp} does not divide the {lin.num_key_heads} key heads of the linear-attention layers"
    return ""


def state_share(model: ModelSpec, tp: int) -> float:
    """Share of a sequence's linear-attention state one of ``tp`` ranks holds (the state splits
    with the heads)."""
    lin = model.linear_attention
    return 1.0 / tp if lin is None else max(1.0 / tp, 1.0 / lin.num_key_heads)


def check_divisible(model: ModelSpec, tp: int) -> None:
    """Raise :class:`CombinationError` when ``tp`` GPUs cannot split the attention
    (:func:`tp_split_reason`; a layout that means nothing for this model, as expert parallelism
    for a dense one), listing the tensor-parallel sizes up to 64 that can."""
    why = tp_split_reason(model, tp)
    if why:
        fits = [d for d in range(1, 65) if not tp_split_reason(model, d)]
        raise CombinationError(f"{model.id or model.name}: {why}; tensor-parallel sizes that split its heads: "
                              f"{', '.join(map(str, fits))}")


def check_experts(model: ModelSpec, ep: int, attention_dp: bool) -> None:
    """Raise :class:`CombinationError` when ``ep > 1`` or attention DP is given for a dense model
    (it has no experts), or ``ep`` does not divide its routed experts.

    Depends on the model alone, so it is checked before the layout's own arithmetic
    (:class:`Parallelism` refuses an ``ep`` that does not divide ``tp``): advice to change ``tp``
    for an ``ep`` the model cannot take at all would lead nowhere.
    """
    if ep <= 1 and not attention_dp:
        return
    if model.moe is None:
        given = " and ".join(([option("ep", ep)] if ep > 1 else []) + ([option_name("attention_dp")] if attention_dp else []))
        raise CombinationError(f"{model.id or model.name} has no experts: {given} "
                               f"need{'s' if ' and ' not in given else ''} a mixture-of-experts model")
    if model.moe.num_experts % ep:  # as a tp that cannot split the heads: bad input for this model
        fits = [d for d in range(1, 65) if model.moe.num_experts % d == 0]
        raise CombinationError(f"ep={ep} does not divide the {model.moe.num_experts} routed experts of "
                               f"{model.id or model.name}; expert-parallel sizes that split them: "
                               f"{', '.join(map(str, fits))}")


@dataclass(frozen=True)
class Parallelism:
    """Parallel layout of one deployment.

    Attributes
    ----------
    tp : int
        GPUs per pipeline stage (attention heads split over them unless ``attention_dp``).
    pp : int
        Pipeline stages; layers are split evenly.
    ep : int
        Expert-parallel groups inside a stage (routed experts split over them).
    dp : int
        Independent replicas.
    attention_dp : bool
        Attention data-parallel over the stage's ``tp`` GPUs, MoE over expert parallelism.
    attention_tp : int
        With ``attention_dp``, the GPUs each attention rank splits its heads over (1: every
        GPU is a rank with all heads); the stage has ``tp / attention_tp`` ranks.
    expert_imbalance : float
        Tokens on the busiest expert group over the mean (1 = balanced routing).
    micro_batches : int or None
        Pipeline micro-batches (default: ``pp``, or the batch when smaller).
    """

    tp: int = 1
    pp: int = 1
    ep: int = 1
    dp: int = 1
    attention_dp: bool = False
    expert_imbalance: float = 1.0
    micro_batches: int | None = None
    attention_tp: int = 1

    def __post_init__(self) -> None:
        for name in ("tp", "pp", "ep", "dp", "attention_tp"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise SpecError(f"{name} must be a positive integer, got {value!r}")
        if self.tp % self.ep:
            vllm = (f"; vLLM's dp={self.dp} with experts over the data-parallel ranks is tp={self.tp * self.dp}, "
                    f"ep={self.ep}, attention_dp" + (f", attention_tp={self.tp}" if self.tp > 1 else "")
                    + f" here (--tp {self.tp * self.dp} --ep {self.ep} --attention-dp"
                    + (f" --attention-tp {self.tp}" if self.tp > 1 else "") + ")"
                    if self.dp > 1 and self.ep == self.tp * self.dp else "")
            raise SpecError(f"ep={self.ep} must divide tp={self.tp}: the expert groups share the stage's GPUs "
                            f"(ep x moe_tp = tp); e.g. ep in {[d for d in range(1, self.tp + 1) if self.tp % d == 0]}, "
                            f"or a tp that is a multiple of {self.ep}{vllm}")
        if self.attention_tp > 1 and not self.attention_dp:
            raise SpecError(f"attention_tp={self.attention_tp} splits attention data-parallel ranks over GPUs, but "
                            f"attention_dp is off (the heads then split over all tp={self.tp}): give attention_dp, "
                            "or drop attention_tp")
        if self.tp % self.attention_tp:
            raise SpecError(f"attention_tp={self.attention_tp} must divide tp={self.tp}: the stage's GPUs form "
                            f"tp / attention_tp attention ranks; e.g. attention_tp in "
                            f"{[d for d in range(1, self.tp + 1) if self.tp % d == 0]}")
        if not self.expert_imbalance >= 1.0:
            raise SpecError(f"expert_imbalance is the busiest group's load over the mean, >= 1; got {self.expert_imbalance}")
        if self.micro_batches is not None and self.micro_batches < 1:
            raise SpecError(f"micro_batches must be >= 1, got {self.micro_batches}")

    @property
    def moe_tp(self) -> int:
        """GPUs each expert is split over."""
        return self.tp // self.ep

    @property
    def num_gpus(self) -> int:
        """GPUs of the whole deployment."""
        return self.tp * self.pp * self.dp

    @property
    def attention_groups(self) -> int:
        """How many ways a stage splits its sequences for attention (``tp / attention_tp`` ranks
        with attention DP)."""
        return self.tp // self.attention_tp if self.attention_dp else 1

    @property
    def head_split(self) -> int:
        """GPUs a sequence's attention heads (and the other layers outside the routed experts)
        split over: ``tp``, or ``attention_tp`` with attention DP."""
        return self.attention_tp if self.attention_dp else self.tp

    def check(self, model: ModelSpec) -> None:
        """Raise :class:`InfeasibleError` for a layout the model cannot take."""
        check_experts(model, self.ep, self.attention_dp)
        check_divisible(model, self.head_split)
        if self.pp > model.num_hidden_layers:
            raise InfeasibleError(f"pp={self.pp} exceeds the {model.num_hidden_layers} layers of {model.id or model.name}")

    def __str__(self) -> str:
        parts = [f"tp{self.tp}"] + [f"{k}{v}" for k, v in (("pp", self.pp), ("ep", self.ep), ("dp", self.dp)) if v > 1]
        ranks = f" ({self.attention_groups} ranks of tp{self.attention_tp})" if self.attention_tp > 1 else ""
        return "x".join(parts) + (f" attention-dp{ranks}" if self.attention_dp else "")


def expert_layout(tp: int, ep: int, dp: int, attention_dp: bool) -> tuple[int, int, int, bool, int]:
    """``(tp, ep, dp, attention_dp, attention_tp)`` in this module's convention, from either engine's.

    TensorRT-LLM and SGLang write wide expert parallelism as ``tp=8, ep=8`` with attention
    DP; vLLM as ``dp=8`` ranks with ``--enable-expert-parallel`` (``ep=8``): attention runs
    data-parallel over the ``dp`` ranks of ``tp`` GPUs each, the experts are spread over all
    ``tp x dp`` GPUs. When ``ep`` exceeds ``tp`` and equals ``tp x dp``, the latter is the
    former: one stage of ``ep`` GPUs, ``dp`` attention ranks of ``attention_tp = tp`` GPUs.
    Attention DP already on with ``tp > 1`` is TensorRT-LLM's spelling (``tp`` ranks of one GPU):
    not folded (its ``ep`` beyond ``tp`` is left for :class:`Parallelism` to refuse).
    """
    if ep > tp and dp > 1 and ep == tp * dp and (tp == 1 or not attention_dp):
        return ep, ep, 1, True, tp
    return tp, ep, dp, attention_dp, 1


def weights_per_gpu(model: ModelSpec, precision: PrecisionConfig, par: Parallelism) -> float:
    """Stored weight bytes on one GPU [B].

    Notes
    -----
    Linear layers in the weight format, routed experts and attention projections in theirs
    (``moe_weights``, ``attention_weights``),
    embedding and LM head in 16-bit (engines exclude them from quantization; a GGUF type
    quantizes them too, as llama.cpp stores them). Routed
    experts split over ``ep x moe_tp = tp`` GPUs; the other weights, embedding and LM head
    included, over ``tp`` (with attention DP, over a rank's ``attention_tp`` GPUs: each rank
    holds them whole, as the step runs them; TensorRT-LLM's ``enable_lm_head_tp_in_adp`` off). With ``pp`` stages the figure is the largest stage's, the
    one memory must hold: ``ceil(layers / pp)`` layers, and the embedding (first stage) or the
    LM head (last; a tied head is a copy of the embedding there), whichever is larger.
    """
    counts = model.param_counts
    fmt = number_format(precision.weights)
    w = fmt.bytes_per_element
    # engines keep the embedding and LM head 16-bit; a GGUF file stores them quantized too
    end = w if fmt.gguf else 2.0
    embed = (counts.embedding + counts.lm_head) * end
    experts = counts.routed_experts * number_format(precision.experts).bytes_per_element
    attention = counts.attention * number_format(precision.attention).bytes_per_element
    rest = (counts.total - counts.embedding - counts.lm_head - counts.routed_experts - counts.attention) * w + attention
    split = par.head_split
    if par.pp == 1:
        return embed / split + experts / par.tp + rest / split
    ends = max(counts.embedding, counts.lm_head) * end
    return ends / split + (experts / par.tp + rest / split) * stage_layer_share(model, par.pp)


def stage_layer_share(model: ModelSpec, pp: int) -> float:
    """Share of the model's layers on its largest pipeline stage: ``ceil(layers / pp) / layers``."""
    layers = model.num_hidden_layers
    return math.ceil(layers / pp) / layers
