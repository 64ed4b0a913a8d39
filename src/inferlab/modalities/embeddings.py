"""Embedding and reranker models: one forward pass per input, no KV cache, no decode.

Physics
-------
An encoder (BERT, BGE, E5, GTE) or a decoder used as an embedder (Qwen3-Embedding) runs a
batch of ``b`` sequences of ``s`` tokens through its ``L`` layers once. Per layer the
projections cost ``2 b s (h (h + 2 h_kv) + h^2)`` FLOPs, the MLP ``2 b s h i`` times 2
(GELU) or 3 (gated SiLU), attention ``4 b n_heads s^2 d_head`` (half of it when causal).
Weights are read once per pass whatever ``b``, so the GEMMs' arithmetic intensity grows
with ``b s`` tokens: past a few hundred tokens a pass is compute-bound, which is why
embedding servers batch by a token budget (text-embeddings-inference's
``--max-batch-tokens``) [1].

Padding: a batch runs at the length of its longest member; sorting inputs by length and
batching neighbours (length bucketing) pads each batch only to its own longest input.
Throughput is counted in real (unpadded) tokens.

Tokenization runs on the CPU before the GPU sees a token; a fast Rust tokenizer
handles about 1 GB of text in 20 s on a server CPU [2], about 12.5 M tokens/s at
4 bytes per token [3]: beyond that rate the GPU waits for the tokenizer.

References
----------
.. [1] Hugging Face, text-embeddings-inference README, "Token based dynamic batching".
   https://github.com/huggingface/text-embeddings-inference
.. [2] Hugging Face tokenizers README: "Takes less than 20 seconds to tokenize a GB of
   text on a server's CPU." https://github.com/huggingface/tokenizers
.. [3] OpenAI, "What are tokens and how to count them": "one token generally corresponds
   to ~4 characters of text for common English text".
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ..core.ops import Elementwise, Gemm, Op
from ..errors import SpecError, option_name
from ..precision import number_format
from ..specs.hardware import HardwareSpec
from .catalog import ModalitySpec, load_modality
from .passes import DATASHEET, Efficiency, FullAttention, PassTime, check_fits, norm, time_pass

#: Tokenizer rate of a server CPU [B/s]: 1 GB in 20 s (tokenizers README, [2]).
TOKENIZER_BYTES_PER_S = 1e9 / 20.0
#: Text per token [B/token] for English BPE vocabularies ([3]).
BYTES_PER_TOKEN = 4.0


@dataclass(frozen=True)
class Encoder:
    """Shapes of an embedding model, from its config (Hugging Face field names)."""

    hidden_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    intermediate_size: int
    vocab_size: int
    max_position_embeddings: int
    gated_mlp: bool
    causal: bool

    @classmethod
    def from_spec(cls, spec: ModalitySpec) -> Encoder:
        """Read the config; a decoder family (``qwen3``, ``llama``...) is gated and causal."""
        heads = int(spec.field("num_attention_heads"))
        hidden = int(spec.field("hidden_size"))
        decoder = spec.config.get("model_type") not in ("bert", "xlm-roberta", "roberta", "new", "nomic_bert")
        return cls(hidden, int(spec.field("num_hidden_layers")), heads,
                   int(spec.config.get("num_key_value_heads", heads)), int(spec.config.get("head_dim", hidden // heads)),
                   int(spec.field("intermediate_size")), int(spec.field("vocab_size")),
                   int(spec.field("max_position_embeddings")), decoder, decoder)

    @property
    def num_params(self) -> float:
        """Parameters of the layers and the token embedding [1] (norms and biases omitted)."""
        h, d = self.hidden_size, self.head_dim
        attn = h * (self.num_attention_heads + 2 * self.num_key_value_heads) * d + self.num_attention_heads * d * h
        mlp = (3 if self.gated_mlp else 2) * h * self.intermediate_size
        return float(self.num_hidden_layers * (attn + mlp) + self.vocab_size * h)


def encoder_ops(enc: Encoder, batch: float, seq: float, precision: str = "bf16") -> tuple[Op, ...]:
    """The ops of one forward pass of ``batch`` sequences of ``seq`` tokens."""
    fmt = number_format(precision)
    w, a = fmt.bytes_per_element, 2.0
    tokens = batch * seq
    h, d, n = enc.hidden_size, enc.head_dim, enc.num_hidden_layers
    q, kv = enc.num_attention_heads * d, enc.num_key_value_heads * d
    up = (2 if enc.gated_mlp else 1) * enc.intermediate_size
    prec = fmt.compute
    gemm = dict(count=n, precision=prec, weight_bytes_per_element=w, act_bytes_per_element=a)
    return (
        Elementwise("embedding", elements_read=tokens * h, elements_written=tokens * h),
        Gemm("qkv", m=tokens, n=q + 2 * kv, k=h, **gemm),
        FullAttention("attention", batch=batch, seq=seq, heads=enc.num_attention_heads, head_dim=d,
                      causal=enc.causal, count=n, precision="bf16"),
        Gemm("o_proj", m=tokens, n=h, k=q, **gemm),
        Gemm("mlp_up", m=tokens, n=up, k=h, **gemm),
        Gemm("mlp_down", m=tokens, n=h, k=enc.intermediate_size, **gemm),
        norm("norms_residuals", tokens, h, count=2 * n),
        norm("activation", tokens, enc.intermediate_size, count=n, passes=2.0 if enc.gated_mlp else 1.0),
    )


@dataclass(frozen=True)
class EmbedResult:
    """Throughput of an embedding model at one batch size and length.

    Attributes
    ----------
    batch, seq : int
        Sequences per pass and padded length of each [token].
    real_tokens : float
        Mean unpadded tokens per sequence [token].
    pass_time : PassTime
        The forward pass on one GPU.
    tokenizer_tokens_per_s : float
        What the CPU tokenizer supplies [token/s].
    """

    model: str
    hardware: str
    precision: str
    batch: int
    seq: int
    real_tokens: float
    pass_time: PassTime
    tokenizer_tokens_per_s: float = field(default=TOKENIZER_BYTES_PER_S / BYTES_PER_TOKEN)

    @property
    def latency_s(self) -> float:
        """Time of one pass [s]."""
        return float(self.pass_time.time_s)

    @property
    def gpu_tokens_per_s(self) -> float:
        """Real tokens the GPU embeds per second [token/s]."""
        return self.batch * self.real_tokens / self.latency_s

    @property
    def tokens_per_s(self) -> float:
        """Real tokens per second, the slower of GPU and tokenizer [token/s]."""
        return min(self.gpu_tokens_per_s, self.tokenizer_tokens_per_s)

    @property
    def sequences_per_s(self) -> float:
        """Sequences per second [sequence/s]."""
        return self.tokens_per_s / self.real_tokens

    @property
    def bottleneck(self) -> str:
        """``tokenizer`` when the CPU tokenizer is slower than the GPU, else the pass's bound."""
        return "tokenizer" if self.tokenizer_tokens_per_s < self.gpu_tokens_per_s else self.pass_time.bound

    @property
    def padding_waste(self) -> float:
        """Share of the computed tokens that are padding [1]."""
        return 1.0 - self.real_tokens / self.seq


def _checked(name: str, value: object, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not low <= value <= high:
        raise SpecError(f"{option_name(name)} must be a whole number from {low} to {high:,}, got {value!r:.40}")
    return int(value)


def embed(model: str | ModalitySpec, hardware: str | HardwareSpec, *, batch: int = 64, seq_len: int = 512,
          precision: str = "bf16", real_tokens: float | None = None,
          efficiency: Efficiency = DATASHEET) -> EmbedResult:
    """Throughput of ``batch`` sequences padded to ``seq_len`` tokens per forward pass.

    Parameters
    ----------
    model : str or ModalitySpec
        An embedding model of the modalities catalog.
    hardware : str or HardwareSpec
        A catalog GPU or a MIG slice (``h100-sxm:3g.40gb``).
    batch, seq_len : int
        Sequences per pass; padded length [token] (at most the model's positions).
    real_tokens : float, optional
        Mean unpadded length [token]; default ``seq_len`` (no padding).
    """
    from ..inputs.resolve import resolve_hardware

    spec = model if isinstance(model, ModalitySpec) else load_modality(model, "embedding")
    enc = Encoder.from_spec(spec)
    hw = resolve_hardware(hardware)
    batch = _checked("batch", batch, 1, 1 << 20)
    seq = _checked("seq_len", seq_len, 1, enc.max_position_embeddings)
    real = float(seq if real_tokens is None else real_tokens)
    if not 0 < real <= seq:
        raise SpecError(f"real_tokens must be in (0, seq_len={seq}], got {real_tokens!r}")
    if number_format(precision).gguf:
        raise SpecError(f"precision {precision!r} is a GGUF weight format of llama.cpp's LLM runtime; embedding "
                        "servers (TEI, vLLM, SGLang) run bf16, fp16, fp8 or integer weights")
    ops = encoder_ops(enc, batch, seq, precision)
    check_fits(f"{spec.id} at batch {batch} x {seq} tokens", hw, ops)
    timed = time_pass(ops, hw, efficiency)
    return EmbedResult(spec.id, hw.id, precision, batch, seq, real, timed)


def bucketed_tokens_per_s(model: str | ModalitySpec, hardware: str | HardwareSpec, lengths: np.ndarray, *,
                          batch: int = 64, precision: str = "bf16", bucket: bool = True,
                          efficiency: Efficiency = DATASHEET) -> float:
    """Real tokens per second [token/s] embedding ``lengths`` in batches of ``batch``.

    ``bucket`` sorts the inputs by length first, so each batch pads only to its own
    longest input; without it, batches keep arrival order and pad to their longest member.
    """
    try:
        lengths = np.asarray(lengths, dtype=float)
    except (TypeError, ValueError):
        lengths = np.asarray([math.nan])
    with np.errstate(invalid="ignore"):
        whole = np.isfinite(lengths) & (lengths >= 1) & (lengths == np.round(lengths))
    if lengths.ndim != 1 or lengths.size == 0 or not np.all(whole):
        raise SpecError("lengths must be a non-empty list of token counts, each a whole number of at least 1")
    batch = _checked("batch", batch, 1, 1 << 20)
    order = np.sort(lengths) if bucket else lengths
    total_s = 0.0
    for start in range(0, order.size, batch):
        chunk = order[start:start + batch]
        r = embed(model, hardware, batch=int(chunk.size), seq_len=int(chunk.max()), precision=precision,
                  efficiency=efficiency)
        total_s += r.latency_s
    return float(lengths.sum() / total_s)
