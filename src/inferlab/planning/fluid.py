"""A fluid model of one replica under continuous batching: the seed of the planner's search.

At a steady concurrency of ``b`` requests, a replica spends a share ``x`` of its time on
prefill (each request's prompt, ``t_pf``) and the rest on decode steps ``d(b)`` shared by
the ``b`` requests. With ``a = osl x d(b) / t_pf``, the request rate ``lambda = x / t_pf``
satisfies ``x = b / (1 + a / (1 - x))``, i.e. ``x^2 - (1 + a + b) x + b = 0``; under load
a token takes ``d(b) / (1 - x)``. Where the engine mixes decodes into the prompts'
iterations (vLLM, TensorRT-LLM), those iterations advance the decodes too, and a prompt
stalls them only by what its iterations add to a decode step (:func:`mixed_stall_s`); the
prompts that arrive during an iteration share the next
(:func:`~.replica_points.batched_prompts` solves the steady state with them). A
prompt's TTFT is its prefill stretched over the iterations it shares with decodes
(``ceil(isl / chunk)`` of them) plus the admission wait of a batching engine
(:func:`admission_wait_s`); its percentile mixes the prompts' lengths with the wait's
quantiles (:func:`~.ttft_mix.ttft_percentile_s`). A percentile TPOT is that of a request's decode as a
busy period the prompts arriving meanwhile stretch (:func:`tpot_percentile_s`).

The planner sizes its leading configurations with the request-level simulation
(:mod:`.sizing`); this model only seeds that search and ranks the rest.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import gammaincc, gammainccinv, gammaln


@dataclass(frozen=True)
class OperatingPoints:
    """Per concurrency ``b`` (arrays): sustainable request rate and latencies under load [s].

    ``prefill_share`` is the share of time the engine would spend on prompts prefilled one by
    one (``lambda t_pf``; above one where batching them is what keeps up);
    ``stall_share`` the share the decodes wait for them (``lambda e``, ``e <= t_pf`` the
    time a prompt adds to the decodes' iterations; the prefill share when not given).
    """

    batch: np.ndarray
    rate: np.ndarray
    tpot_s: np.ndarray
    ttft_s: np.ndarray
    prefill_share: np.ndarray
    stall_share: np.ndarray | None = None
    #: An iteration's mean length under load [s] where it is not a token's time (an engine whose
    #: decodes sit out some iterations: :mod:`.prefill_first`), and the variance of a token's gap [s^2]
    #: where it is not an M/G/1 busy period's (:func:`tpot_percentile_s`).
    iteration_s: np.ndarray | None = None
    gap_variance_s2: np.ndarray | None = None

    @property
    def stall(self) -> np.ndarray:
        """The share of time the decodes wait for prompts (``stall_share``, else ``prefill_share``)."""
        return np.asarray(self.prefill_share if self.stall_share is None else self.stall_share, float)

    @property
    def iteration(self) -> np.ndarray:
        """An iteration's mean length under load [s] (``iteration_s``, else a token's time)."""
        return np.asarray(self.tpot_s if self.iteration_s is None else self.iteration_s, float)


def mixed_stall_s(prefill_s: float, iterations: float, shared_step_s: float | np.ndarray) -> float | np.ndarray:
    """What a prompt adds to the decodes' time where its ``iterations`` carry the decodes [s].

    A mixed iteration runs the prompt's chunk and one token of every decode together: what
    the two would each pay alone (the weights read, the host's work per iteration; of a
    mixture of experts the experts both touch: ``shared_step_s``, at each concurrency, from
    :func:`~.curve.shared_step_s`) is paid once, so a prompt stalls the decodes by its
    prefill less that part of each of its iterations (at least 0). Hand check: 77.3 ms of
    prefill in one iteration beside a shared 8.6 ms stalls the decodes 68.7 ms.
    """
    return np.maximum(prefill_s - iterations * np.asarray(shared_step_s, float), 0.0)


def admission_wait_s(points: OperatingPoints, prefill_s: float, slots: np.ndarray | float,
                     percentile: float, prefill_spread: float = 2.0, batched_prefill_s: float | None = None,
                     overlap: bool = False, held_s: np.ndarray | None = None) -> np.ndarray:
    """Wait from arrival to the end of the prompt's turn in the token budget, at ``percentile`` [s].

    Parameters
    ----------
    points : OperatingPoints
        The replica at each mean concurrency ``b`` (rate, TPOT under load, prefill share).
    prefill_s : float [s]
        Prefill of one prompt alone.
    slots : array or float [request]
        Sequences the engine may run at once (the smaller of ``max_num_seqs`` and what the
        KV memory holds).
    percentile : float or array
        In (0, 100); an array of them adds a trailing axis to the result.
    prefill_spread : float
        ``E[P^2] / E[P]^2`` of the prompts' prefill times (``E[isl^2] / E[isl]^2``): 1 for prompts
        of one length, 2 for exponentially distributed ones (the M/M/1 default).
    batched_prefill_s : float [s], optional
        A prompt's share of a batch of prompts that fills the token budget: the service time
        of prompts that queue (the engine takes all that fit into one iteration). Where prefill
        is far from compute-bound (a 70B model over eight B200s: 1,500 tokens in 63 ms, 19% of
        the FP8 peak) a batch of five costs far less than five prompts one after another.
    overlap : bool
        The engine plans each iteration while the one before runs (an overlap scheduler), so an
        arrival also waits out the iteration already planned: one more token's time.

    Returns
    -------
    array [s]
        Upper bound of the ``percentile`` wait: the sum of the three parts below.

    Notes
    -----
    An iteration-level scheduler (Orca; vLLM, SGLang and TensorRT-LLM work this way)
    admits a request at the next iteration while it has a free sequence slot, KV blocks
    and token budget: a batching engine is not a single server that serves one request
    at a time. Three waits add up, each with a tail of its own (``q = 1 - p``):

    1. *The iteration in progress.* An arrival waits for it to end; an iteration under
       load lasts one token's time ``tau = d(b) / (1 - x)``, and the residual is taken as
       uniform on ``[0, tau]``: ``p x tau`` (``(p + 1) tau`` under an overlap scheduler, whose
       next iteration was planned before the arrival), where the engine is busy: with
       probability ``B = 1 - e^-b`` (its requests in flight Poisson with mean ``b``), else an
       arrival starts at once, so ``tau (1 - q / B)`` (``+ tau``) where ``q < B`` and 0 beyond
       (a replica at 0.2 req/s is idle 97% of the time: its median arrival waits for nothing).
    2. *Prompts ahead in the token budget.* Prompts batched into one iteration take as long
       as one after another where prefill is compute-bound (a share of a budget-filling
       batch's time each where it is not: ``batched_prefill_s``): prefill work is a single
       server busy a share ``x`` of the time. Its M/G/1 wait is taken with the exponential
       tail of the same mean (Pollaczek-Khinchine: ``E[W] = x t_pf s / (2 (1 - x))`` with ``s =
       E[P^2] / E[P]^2``): ``P(W > t) = x exp(-2 (1 - x) t / (s t_pf))``, i.e.
       ``t_pf (s / 2) ln(x / q) / (1 - x)`` when ``x > q`` and 0 otherwise; M/M/1's at ``s = 2``,
       half of it for prompts of one length. It matters only near the token-budget limit ``x -> 1``.
    3. *All slots taken.* With ``c`` slots each held for a request's lifetime
       ``S = b / lambda`` (Little's law) the engine is an M/M/c queue with offered load
       ``A = b``: the probability of waiting is Erlang's C formula
       ``C = c B / (c - A (1 - B))`` with Erlang's B ``B = pois(c; A) / P(N <= c)``
       (``N`` Poisson with mean ``A``), and ``P(W > t) = C exp(-(c - A) t / S)``, i.e.
       ``S ln(C / q) / (c - A)`` when ``C > q``; infinite when ``A >= c``. With ``b``
       well below ``c``, ``C`` is negligible: no queue.

    References
    ----------
    Yu et al., "Orca: A Distributed Serving System for Transformer-Based Generative
    Models", OSDI 2022, section 3.1 (iteration-level scheduling).
    Kleinrock, "Queueing Systems, Volume 1: Theory", Wiley 1975, chapter 3 (M/M/1 and
    M/M/m waiting times, Erlang's B and C formulas).
    """
    q = 1.0 - np.asarray(percentile, float) / 100.0
    # several percentiles: a trailing axis of them after the points'
    per_point = (lambda v: np.asarray(v, float)[..., None]) if q.ndim else (lambda v: np.asarray(v, float))
    x = per_point(points.prefill_share)
    if batched_prefill_s is not None and batched_prefill_s < prefill_s:
        # prompts that queue are prefilled together, a budget's worth at a time, each at its share
        # of the batch's time: the queue's server is that fast, and busy that much less
        x, prefill_s = x * batched_prefill_s / prefill_s, batched_prefill_s
    # (an idle engine takes an arrival at once: busy when any of its Poisson(b) requests is in flight)
    busy = -np.expm1(-per_point(points.batch))
    with np.errstate(divide="ignore", invalid="ignore"):
        iteration = np.where(q < busy, (1.0 + (1.0 if overlap else 0.0) - q / busy) * per_point(points.iteration), 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        prompts = np.where(x > q, prefill_s * prefill_spread / 2.0 * np.log(x / q) / (1.0 - x), 0.0)
        prompts = np.where(x < 1.0, prompts, np.inf)  # (more prompts than prefill keeps up with: no steady state)
    batch = per_point(points.batch)
    hold = batch / np.maximum(per_point(points.rate), 1e-300)
    slots = per_point(np.broadcast_to(np.floor(np.asarray(slots, float)), np.shape(points.batch)))
    if held_s is not None:  # a hold for other prompts runs while the iteration does: the longer of the two
        iteration = np.maximum(iteration, held_s)
    return iteration + prompts + slot_wait_s(batch, slots, hold, q)


def slot_wait_s(load: np.ndarray, slots: np.ndarray | float, hold_s: np.ndarray, tail: float) -> np.ndarray:
    """Wait for one of ``slots`` servers exceeded with probability ``tail`` in an M/M/c queue [s].

    Parameters
    ----------
    load : array [request]
        Offered load ``A`` (mean busy servers).
    slots : array or float [request]
        Servers ``c``.
    hold_s : array [s]
        Mean holding time of a server.
    tail : float
        Probability ``q`` of waiting longer than the result.

    Notes
    -----
    Erlang's B from the Poisson distribution, ``B = pmf(c; A) / cdf(c; A)`` (regularized
    incomplete gamma for the cdf, so the recursion over ``c`` is not needed), then
    ``C = c B / (c - A (1 - B))`` and ``t = S ln(C / q) / (c - A)`` (see
    :func:`admission_wait_s`).

    Examples
    --------
    One server at load 0.8, holding 1 s: M/M/1, ``C = 0.8``, P99 wait ``ln(80) / 0.2``.

    >>> import numpy as np
    >>> round(float(slot_wait_s(np.array(0.8), 1.0, np.array(1.0), 0.01)), 3)
    21.91
    """
    a = np.asarray(load, float)
    c = np.broadcast_to(np.asarray(slots, float), a.shape)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        log_pmf = c * np.log(np.maximum(a, 1e-300)) - a - gammaln(c + 1.0)
        b = np.exp(log_pmf) / np.maximum(gammaincc(c + 1.0, a), 1e-300)
        erlang_c = c * b / (c - a * (1.0 - b))
        t = hold_s * np.log(erlang_c / tail) / (c - a)
    return np.where(a >= c, np.inf, np.where(erlang_c > tail, np.maximum(t, 0.0), 0.0))


#: Output lengths the TPOT percentile averages over (equal-probability midpoints of the traffic's
#: output-length distribution; 16 are within 0.4% of 32 on lognormal answers, sigma 0.5-0.8).
OSL_POINTS = 16
#: Bisections of the TPOT percentile between the components' own quantiles (2^-12 of that span).
TPOT_BISECTIONS = 12


def tpot_percentile_s(points: OperatingPoints, prefill_s: float, prefill_spread: float, osl: np.ndarray,
                      percentile: float) -> np.ndarray:
    """The ``percentile`` of request TPOT under mixed prefill at each concurrency [s].

    A request's decode is a busy period: its ``n = osl - 1`` decode steps ``d`` are work
    ``tau = n d`` that the prompts arriving meanwhile (rate ``lambda``, prefill ``P`` each, share
    ``x = lambda E[P]``) stretch, and those arriving during the stretch stretch it again. Its
    length has mean ``tau / (1 - x)`` and variance ``tau lambda E[P^2] / (1 - x)^3`` (the busy
    period of an M/G/1 queue started by work ``tau``), so its TPOT has mean ``d / (1 - x)``,
    the fluid TPOT, and standard deviation ``sqrt(d x E[P] s / ((1 - x)^3 n))`` with ``s =
    E[P^2] / E[P]^2`` from the prompt lengths (a prefill takes time in proportion to its
    tokens). The stretch beyond ``d`` is never negative and, when few prompts arrive during an
    answer (long prompts, short answers), far from normal: it is taken as a gamma variable of
    that mean and variance. Short answers see the fewest prompts and spread the most: the
    percentile is that of the mixture over ``osl``.

    Parameters
    ----------
    points : OperatingPoints
        The replica at each concurrency (its TPOT ``d / (1 - x)`` and prefill share ``x``).
    prefill_s : float [s]
        Prefill of a prompt of the mean length.
    prefill_spread : float
        ``E[isl^2] / E[isl]^2`` of the traffic's prompts.
    osl : array [token]
        Output lengths the requests are equally likely to have (:data:`OSL_POINTS` quantiles).
    percentile : float
        In (0, 100).
    """
    tpot, x = np.asarray(points.tpot_s, float), points.stall
    d = tpot * (1.0 - x)
    stretch = (tpot * x)[..., None]  # mean of the stretch per token [s]: tpot - d
    # equal output lengths (an answer length that does not vary) are one component, computed
    # once and counted as often as it occurs in the mixture's mean
    steps, spread = _distinct(np.maximum(np.asarray(osl, float) - 1.0, 1.0))
    with np.errstate(divide="ignore", invalid="ignore"):
        gap = (d * x * prefill_s * prefill_spread / (1.0 - x) ** 3 if points.gap_variance_s2 is None
               else np.asarray(points.gap_variance_s2, float))
        var = gap[..., None] / steps  # (points, lengths)
        random = (var > 0) & (stretch > 0) & np.isfinite(var)  # else the stretch is its mean
        shape = np.minimum(np.where(random, stretch**2 / np.where(random, var, 1.0), 1.0), 1e12)
        inv_scale = np.where(random, stretch / np.where(random, var, 1.0), 0.0)
    target = 1.0 - percentile / 100.0
    # a mixture's quantile lies between its components' quantiles: the bracket of the bisection
    own = np.where(random, gammainccinv(shape, target) / np.where(random, inv_scale, 1.0), stretch)
    lo, hi = d + np.min(own, axis=-1), d + np.max(own, axis=-1)
    for _ in range(TPOT_BISECTIONS):  # every point at once
        mid = (lo + hi) / 2.0
        over = np.maximum(mid - d, 0.0)[..., None]  # the stretch a request must exceed to be slower
        tail = np.where(random, gammaincc(shape, over * inv_scale), over < stretch)
        above = _mean(tail if spread is None else tail.take(spread, axis=-1)) > target
        lo, hi = np.where(above, mid, lo), np.where(above, hi, mid)
    return np.where(np.all(np.isfinite(var), axis=-1), hi, np.inf)


def _distinct(values: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
    """The distinct values of a 1-D array, and the indices that spread them back to it (None
    when they are all distinct: the array itself)."""
    distinct, inverse = np.unique(values, return_inverse=True)
    return (values, None) if distinct.size == values.size else (distinct, inverse)


def _mean(values: np.ndarray) -> np.ndarray:
    """``np.mean(values, axis=-1)``, the same sum and division, without its per-call checks."""
    return np.add.reduce(values, axis=-1) / values.shape[-1]
