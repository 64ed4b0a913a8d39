"""What a speculative drafter takes from a replica: its weights and KV cache on one GPU, and
whether a draft model can speed its target up at all.

Shared by the static estimate (:func:`inferlab.estimate` sizes the KV cache next to the
drafter) and the serving simulation (:mod:`inferlab.serving.speculation`).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..core.memory import kv_share
from ..core.parallelism import Parallelism, weights_per_gpu
from ..errors import SpecError
from ..precision import number_format
from ..specs.model import ModelSpec
from .speculative import EAGLE_HEAD_FORMAT, _one_layer_view, eagle_layer
from .speculative_config import SpeculativeConfig
from .step import ResolvedDeployment


def check_drafter(dep: ResolvedDeployment, spec: SpeculativeConfig) -> None:
    """Refuse a draft model that cannot speed the target up, saying why.

    Raises
    ------
    SpecError
        When the draft model has another vocabulary (so another tokenizer: its tokens are
        not the target's), or at least as many parameters as the target (each of its
        ``k`` passes costs about a target step, so a step of ``k + 1`` of them never pays).
    """
    model_id = dep.model.id or dep.model.name
    if spec.target is not None and model_id != spec.target:
        raise SpecError(f"speculative: this drafter's acceptance was measured with {spec.target}, not {model_id} "
                        f"({spec.source.split(':')[0]}); give the acceptance of a drafter for {model_id}, e.g. "
                        f"'{spec.method}:k={spec.k},length=L'")
    if spec.method != "draft":
        return
    draft = _draft_spec(spec)
    name, target = draft.id or draft.name, dep.model.id or dep.model.name
    if draft.vocab_size != dep.model.vocab_size:
        raise SpecError(f"speculative: draft model {name} has vocab_size {draft.vocab_size}, the target {target} "
                        f"{dep.model.vocab_size}: a draft must share the target's tokenizer; pick a draft of the "
                        "same family, or method eagle/medusa/ngram")
    if draft.total_params >= dep.model.total_params:
        raise SpecError(f"speculative: draft model {name} ({draft.total_params / 1e9:.1f} B parameters) is not "
                        f"smaller than the target {target} ({dep.model.total_params / 1e9:.1f} B): its passes cost "
                        "as much as the target's steps, so speculation cannot pay; use a draft several times "
                        "smaller, or method eagle/ngram")


def _draft_spec(spec: SpeculativeConfig) -> ModelSpec:
    from ..specs.catalog import load_model

    model = spec.draft_model
    return model if isinstance(model, ModelSpec) else load_model(str(model))


@dataclass(frozen=True)
class DrafterMemory:
    """What the drafter takes from one GPU's memory.

    Attributes
    ----------
    weight_bytes : float [B]
        The drafter's weights on one GPU.
    kv_bytes_per_token : float [B/token]
        The drafter's KV cache per token of every sequence, on one GPU.
    lookahead_tokens : int [token]
        KV slots each running request holds beyond its tokens (the ``k`` drafts verified).
    method : str
        The speculative method (an engine may reserve memory for its drafter by it: SGLang).
    """

    weight_bytes: float
    kv_bytes_per_token: float
    lookahead_tokens: int
    method: str = ""

    @property
    def plan_keywords(self) -> dict[str, float]:
        """These figures as :func:`~inferlab.core.memory.plan_memory`'s keywords."""
        return {"extra_weight_bytes": self.weight_bytes, "extra_kv_bytes_per_token": self.kv_bytes_per_token,
                "lookahead_tokens": self.lookahead_tokens}


def drafter_memory(dep: ResolvedDeployment, spec: SpeculativeConfig) -> DrafterMemory:
    """Weights and KV of the drafter on one GPU of the replica.

    Notes
    -----
    ``draft``: the draft model's weights and KV at the target's formats, split over the
    tensor-parallel group (or whole on each GPU when its heads do not divide ``tp``);
    ``eagle``: one decoder layer shaped like the target's first, its ``2H -> H`` fusion
    and, with a reduced vocabulary, its own LM head, in its checkpoint's BF16 whatever the target's; ``mtp``: the model's MTP modules and
    one layer of KV per module used; ``medusa``: ``k`` heads of ``H x H`` plus an LM head
    each; ``ngram``: nothing. The embedding and (unless reduced) the LM head are the
    target's, shared.
    """
    model, prec, tp = dep.model, dep.precision, dep.parallel.tp
    kv_fmt = prec.kv_cache
    w = number_format(prec.weights).bytes_per_element
    if spec.method == "draft":
        draft = _draft_spec(spec)
        dtp = tp if draft.num_attention_heads % tp == 0 else 1
        kv = sum(draft.kv_cache_bytes_per_token(kv_fmt).values()) * kv_share(draft, dtp)
        return DrafterMemory(weights_per_gpu(draft, prec, Parallelism(tp=dtp)), kv, spec.k, spec.method)
    # a token's KV splits as the target's: over a rank's GPUs under attention DP
    layer_kv = model.kv_elements_per_token_per_layer() * number_format(kv_fmt).bytes_per_element * \
        kv_share(model, dep.parallel.head_split)
    h = model.hidden_size
    if spec.method == "eagle":
        counts = _one_layer_view(model, eagle_layer(model), spec.draft_vocab_size).param_counts
        own_head = counts.lm_head if spec.draft_vocab_size else 0
        params = counts.total - counts.embedding - counts.lm_head + own_head + 2 * h * h
        head = number_format(EAGLE_HEAD_FORMAT).bytes_per_element  # its checkpoint's, not the target's
        return DrafterMemory(params * head / tp, layer_kv, spec.k, spec.method)
    if spec.method == "mtp":
        return DrafterMemory(model.param_counts.mtp * w / tp, layer_kv * min(spec.k, model.num_mtp_layers), spec.k,
                             spec.method)
    if spec.method == "medusa":
        vocab = spec.draft_vocab_size or model.vocab_size
        return DrafterMemory(spec.k * (h * h * w + h * vocab * 2.0) / tp, 0.0, spec.k, spec.method)
    return DrafterMemory(0.0, 0.0, spec.k, spec.method)
