"""The TTFT percentile of the fluid model: a prompt's own time (its length's prefill and the decode
steps its iterations carry) and its admission wait (:func:`~.fluid.admission_wait_s`), mixed over
the traffic's prompt lengths and the wait's quantiles at :data:`TAIL_EDGES`."""

from __future__ import annotations

import numpy as np

#: Probability levels of the TTFT mixture (right ends of their intervals, so that a percentile at an
#: edge is exact for prompts of one length): a coarse body and a fine tail.
TAIL_EDGES = np.array([0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.98, 0.99, 0.995, 0.998, 0.999,
                       0.9995])
TAIL_WEIGHTS = np.diff(np.concatenate([[0.0], TAIL_EDGES[:-1], [1.0]]))


def ttft_percentile_s(decode_step_s: np.ndarray, batch: np.ndarray, prefill_s: np.ndarray, isl: np.ndarray,
                      chunk_tokens: float, waits_s: np.ndarray, percentile: float) -> np.ndarray:
    """The ``percentile`` of TTFT at each concurrency [s]: a prompt's own time plus its wait, a
    mixture over prompt lengths and waits.

    A prompt's own time is its prefill (``prefill_s`` at the lengths ``isl``, the traffic's
    quantiles at :data:`TAIL_EDGES`) and one decode step for each iteration it shares with the
    decodes (``ceil(isl / (chunk - b))``); the wait is independent of its length, with the
    quantiles ``waits_s`` at :data:`TAIL_EDGES` (points x levels: :func:`~.fluid.admission_wait_s`). At low load the tail is the long
    prompts' own prefill (the chat example's P99 prompt is 3.4x the mean); near the token
    budget's limit it is the wait.
    """
    waits = np.asarray(waits_s, float)  # (points, levels)
    own = own_time_s(decode_step_s, batch, prefill_s, isl, chunk_tokens)  # (points, lengths)
    return mixture_quantile((own[:, :, None] + waits[:, None, :]).reshape(len(own), -1), percentile)


def own_time_s(decode_step_s: np.ndarray, batch: np.ndarray, prefill_s: np.ndarray, isl: np.ndarray,
               chunk_tokens: float) -> np.ndarray:
    """A prompt's own time at each concurrency and length [s] (points, lengths): its prefill and a
    decode step for each iteration it shares with the decodes (:func:`ttft_percentile_s`)."""
    d, b = np.asarray(decode_step_s, float)[:, None], np.asarray(batch, float)[:, None]
    # decodes beside it where any request is in flight (Poisson(b) of them): none in an idle engine
    beside = -np.expm1(-b)
    return np.asarray(prefill_s, float)[None, :] + np.ceil(np.asarray(isl, float)[None, :]
                                                           / np.maximum(chunk_tokens - b, 1.0)) * d * beside


#: Weight of each (length, wait level) pair of the TTFT mixture, in the order of its columns.
_PAIR_WEIGHTS = (TAIL_WEIGHTS[:, None] * TAIL_WEIGHTS[None, :]).ravel()


def mixture_quantile(total: np.ndarray, percentile: float) -> np.ndarray:
    """The ``percentile`` of each row of ``total`` (points, lengths x levels), its columns weighted
    by their levels' :data:`TAIL_WEIGHTS`: the smallest value whose cumulative weight reaches it."""
    order = np.argsort(total, axis=-1)
    cum = np.cumsum(_PAIR_WEIGHTS[order], axis=-1)
    at = np.minimum(np.argmax(cum >= percentile / 100.0 - 1e-12, axis=-1), total.shape[-1] - 1)
    rows = np.arange(len(total))
    return total[rows, order[rows, at]]
