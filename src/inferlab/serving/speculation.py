"""Speculative decoding in the serving simulation: the step model wrapped, tokens drawn per request.

Every iteration's decoding requests run the drafter's ``k`` passes and one verify pass of
``k + 1`` tokens each (the last emitted token and the ``k`` drafts), timed by the same
physics as the static estimate (:mod:`inferlab.techniques.speculative`): the verify pass by
the step model with ``k + 1`` new tokens per sequence, the draft passes by
:func:`~inferlab.techniques.speculative.speculative_decode` tabulated over batch and context.
Each request then emits ``1 + min(G, k)`` tokens, ``G`` drawn from the geometric law of
accepted drafts (a draft is accepted with probability ``a`` given the ones before it were),
so that the mean is :func:`~inferlab.techniques.speculative_config.tokens_per_step`. A
measured acceptance length is turned into its rate ``a`` the same way as in the estimate.

Memory: the drafter's weights and its KV cache (a draft model's, or the one layer of an
EAGLE or MTP head) come out of the pool, and every running request holds ``k`` KV slots
beyond its tokens for the drafts being verified (vLLM's lookahead slots).

References
----------
.. [1] Leviathan, Kalman, Matias, "Fast Inference from Transformers via Speculative
   Decoding", ICML 2023, sec. 3.1 (accepted drafts per step: capped geometric).
"""

from __future__ import annotations

import bisect
import math

import numpy as np

from ..techniques.speculative import SpeculativeConfig, drafter_prefill_s, speculative_decode
from ..techniques.speculative_memory import DrafterMemory, check_drafter, drafter_memory  # noqa: F401  (re-exported)
from .stepmodel import StepModel


def speculative_config(value: SpeculativeConfig | str) -> SpeculativeConfig:
    """A :class:`SpeculativeConfig` from itself, its text form, a preset name or a mapping."""
    return SpeculativeConfig.of(value)


class SpeculativeStepModel:
    """Iteration times with speculative decoding: :class:`StepModel`'s, decoders verified.

    Parameters
    ----------
    base : StepModel
        The target's step model.
    spec : SpeculativeConfig
    max_seqs : int
        Largest batch of decoding requests to tabulate the draft passes for.
    max_context : float [token]
        Longest context to tabulate them for.

    Notes
    -----
    ``t = verify(decoders, k + 1 tokens each, prefill chunks) + draft(n, mean context)
    + host_s``. Draft passes run inside the engine step (no scheduler overhead of their
    own); their table is bilinear in batch and context, the batch on a geometric grid.
    """

    def __init__(self, base: StepModel, spec: SpeculativeConfig, max_seqs: int, max_context: float):
        self.base, self.spec = base, spec
        self.groups = base.groups
        self.k = int(spec.k)
        self.request_overhead_s = base.request_overhead_s
        self._batches = np.unique(np.round(np.geomspace(1, max(max_seqs, 2), 24))).tolist()
        self._contexts = np.geomspace(1.0, max(max_context, 2.0), 12).tolist()
        draft = speculative_decode(base.dep, np.asarray(self._batches)[:, None], np.asarray(self._contexts)[None, :],
                                   spec).draft_s
        shape = (len(self._batches), len(self._contexts))
        self._draft = np.broadcast_to(np.asarray(draft, float), shape).tolist()
        # the drafter's pass over prefill chunks: a line through 512 and 4,096 tokens (its attention's
        # quadratic part left out: a draft model or one layer, small beside the target's)
        low, high = (float(t) for t in drafter_prefill_s(base.dep, spec, 1.0, np.array([512.0, 4096.0])))
        self._prefill_per_token_s = max((high - low) / 3584.0, 0.0)
        self._prefill_fixed_s = max(low - 512.0 * self._prefill_per_token_s, 0.0)

    def draft_s(self, n: float, *contexts: float) -> list[float]:
        """Draft passes of one step for ``n`` sequences at each mean context [s], plus host work."""
        i, fi = _bracket(self._batches, n)
        t, out = self._draft, []
        for context in contexts:
            j, fj = _bracket(self._contexts, context)
            low = t[i][j] + (t[i][j + 1] - t[i][j]) * fj
            high = t[i + 1][j] + (t[i + 1][j + 1] - t[i + 1][j]) * fj
            out.append(low + (high - low) * fi + self.spec.host_s)
        return out

    def time(self, *, decode_context: np.ndarray, prefill_context: np.ndarray, prefill_tokens: np.ndarray,
             logits: float) -> float:
        """One iteration [s]: decoders drafted and verified, prefill chunks as without speculation
        and the drafter's pass over them; ``logits`` counts one row per decoder (a verify pass has
        ``k + 1``)."""
        n = len(decode_context)
        t = self.base.time(decode_context=decode_context, prefill_context=prefill_context,
                           prefill_tokens=prefill_tokens, logits=logits + n * self.k, decode_new=self.k + 1.0)
        tokens = float(np.add.reduce(prefill_tokens)) if len(prefill_tokens) else 0.0
        if tokens > 0 and self.groups > 1:  # attention DP: the drafter's pass on the busiest rank's chunks
            tokens = max(float(np.max(prefill_tokens)), tokens / self.groups)
        if tokens > 0:
            t += self._prefill_fixed_s + self._prefill_per_token_s * tokens
        return t + (self.draft_s(n, float(np.add.reduce(decode_context)) / n)[0] if n else 0.0)

    def time_decode(self, context: np.ndarray) -> tuple[float, float]:
        """A decode-only iteration and the same with every context one token longer [s]."""
        n = len(context)
        if not n:
            return self.base.time_decode(context)
        t0, t1 = self.base.time_decode(context, self.k + 1.0)
        mean = float(np.add.reduce(context)) / n
        d0, d1 = self.draft_s(n, mean, mean + 1.0)
        return t0 + d0, t1 + d1


def _bracket(grid: list[float], x: float) -> tuple[int, float]:
    """Index ``i`` and fraction ``f`` with ``x = grid[i] + f (grid[i+1] - grid[i])``, clamped."""
    j = min(max(bisect.bisect_right(grid, x), 1), len(grid) - 1)
    g0, g1 = grid[j - 1], grid[j]
    return j - 1, min(max((x - g0) / (g1 - g0), 0.0), 1.0)


class SpeculativeDecoding:
    """Tokens emitted per step, drawn per request from the acceptance model.

    Parameters
    ----------
    spec : SpeculativeConfig
    seed : int
        Seed of the draws (the workload's, so that a run is reproducible).
    """

    def __init__(self, spec: SpeculativeConfig, seed: int):
        self.k = int(spec.k)
        self.acceptance = spec.acceptance_rate
        self.lookahead = self.k
        self.mean_tokens = spec.tokens_per_step
        self._rng = np.random.default_rng([seed, 0x5BEC])
        self._pool = np.zeros(0)
        self._used = 0

    def _fresh(self, size: int) -> np.ndarray:
        """``size`` draws of ``1 + min(G, k)`` tokens, ``P(G >= i) = a^i``."""
        if self.acceptance >= 1.0:
            return np.full(size, self.k + 1.0)
        if self.acceptance <= 0.0:
            return np.ones(size)
        accepted = self._rng.geometric(1.0 - self.acceptance, size=size) - 1
        return 1.0 + np.minimum(accepted, self.k)

    def _draw(self, shape: tuple[int, ...]) -> np.ndarray:
        """Draws of the tokens one step emits, ``shape`` of them, taken from a pool drawn in
        bulk (one generator call per iteration would cost more than the iteration)."""
        size = shape[0] * shape[1] if len(shape) == 2 else shape[0]
        if self._used + size > len(self._pool):
            self._pool = self._fresh(max(size, 1 << 16))
            self._used = 0
        out = self._pool[self._used:self._used + size]
        self._used += size
        return out.reshape(shape)

    def tokens(self, remaining: np.ndarray) -> np.ndarray:
        """Tokens each decoding request emits in one iteration, at most its ``remaining``."""
        return np.minimum(self._draw((len(remaining),)), remaining)

    def stretch(self, t0: float, t1: float, remaining: np.ndarray, max_steps: int,
                free_tokens: float) -> tuple[int, np.ndarray | float, float, float]:
        """Decode-only steps until a request finishes, the KV pool fills or ``max_steps``.

        Returns
        -------
        steps : int
        tokens : array [token]
            Tokens each request emitted.
        elapsed : float [s]
            The steps' time: step ``j`` takes ``t0 + (t1 - t0) G_j / n``, ``G_j`` the
            tokens the ``n`` contexts grew by before it (the step time is linear in them).
        mean_step : float [s]
        """
        n = len(remaining)
        # each step emits ``mean_tokens`` on average: draw a little past the expected first finish
        steps = int(min(max_steps, max(1.0, math.ceil(float(remaining.min()) / self.mean_tokens) + 2)))
        cum = self._draw((steps, n)).cumsum(axis=0)
        finished = np.flatnonzero((cum >= remaining).any(axis=1))
        if finished.size:
            steps = int(finished[0]) + 1
        grown = cum[:steps].sum(axis=1)  # growth after each step
        # like plain decoding, the last step may take the pool past full (preemption follows)
        if free_tokens < (self.k + 1.0) * n * steps:
            over = np.flatnonzero(grown[:-1] > free_tokens)
            if over.size:
                steps = int(over[0]) + 1
        before = float(grown[:steps - 1].sum())
        elapsed = steps * t0 + (t1 - t0) / n * before
        return steps, np.minimum(cum[steps - 1], remaining), elapsed, elapsed / steps
