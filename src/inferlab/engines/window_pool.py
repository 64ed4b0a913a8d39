"""Where an engine keeps the KV of a model's sliding-window (or chunked) attention layers, as
arithmetic on a token's bytes.

A windowed layer (gpt-oss's 128-token sliding layers, Gemma's local layers, Llama 4's chunked
ones) needs a sequence's last ``W`` tokens only. vLLM's hybrid KV-cache manager frees a
sequence's blocks that fall out of a window and TensorRT-LLM sizes a pool per window
(``max_attention_window``, its variable sliding-window cache), so in one pool a sequence of
``L`` tokens holds ``L`` tokens of the full-attention layers and at most ``W`` of a windowed
one. SGLang keeps the windowed layers in a pool of their own that holds
``window_pool_ratio`` tokens for each token of the full layers' pool (``--swa-full-tokens-ratio``,
0.8 by default), the two splitting the budget
(:class:`~inferlab.engines.scheduler.SchedulerConfig`).

The serving simulation counts a KV pool in tokens of the full-attention layers: a request holds
its own tokens there and, in one pool, what its windowed layers hold as a fixed number of such
tokens beside them (:func:`window_tokens`), as a hybrid model's state is counted. A model
with no full-attention layer (every layer windowed) keeps the count of all layers a token.
"""

from __future__ import annotations

from typing import Any

#: Tokens well past any window: the windowed layers' holding is saturated there.
_FAR = 1.0e7


def pool_token_share(model: Any, sched: Any) -> float:
    """Bytes of one token of the pool the simulation counts, as a share of a token of every layer:
    the full layers' share, and with a windowed layers' pool of their own (SGLang) that pool's
    ``window_pool_ratio`` tokens of theirs for each; 1 where nothing is windowed or everything is."""
    full = model.full_attention_kv_share
    if full in (0.0, 1.0):
        return 1.0
    ratio = getattr(sched, "window_pool_ratio", None)
    return full + (float(ratio) * (1.0 - full) if ratio is not None else 0.0)


def window_tokens(model: Any, sched: Any, context: float | None = None) -> float:
    """Pool tokens (of the full layers) a sequence's windowed layers hold in one pool [token]: their
    bytes at ``context`` tokens (None: past every window, their most) over a full-layer token's;
    0 with a pool of their own, without windowed layers, or where every layer is windowed."""
    full = model.full_attention_kv_share
    if full in (0.0, 1.0) or getattr(sched, "window_pool_ratio", None) is not None:
        return 0.0
    length = _FAR if context is None else max(float(context), 1.0)
    every = float(model.kv_cache_bytes(1.0))
    windowed = float(model.kv_cache_bytes(length)) - full * every * length
    return max(windowed, 0.0) / (full * every)
