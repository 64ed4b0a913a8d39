"""The fluid model of an engine that runs its prompts before its decodes (SGLang's default), one
rank or each attention-DP rank on its own.

Under SGLang's ``--enable-dp-attention`` every rank's scheduler builds its own batch, a prefill
of its waiting prompts if it has any, else a decode of its running requests, and the ranks'
batches run as one forward (the routed experts' all-to-all joins them; sglang
``managers/scheduler_dp_attn_mixin.py``), so an iteration in which any rank prefills lasts as
long as that prefill, and only the ranks without prompts advance their decodes in it. Requests
are dealt to the ranks round robin in arrival order (the data-parallel controller's default),
so the ``N`` prompts that arrived during the last iteration sit on ``min(N, g)`` of the ``g``
ranks, and the share of the decodes that advance is ``psi = E[(g - N)^+] / g`` (``N``
Poisson; 1 when no prompt arrived: a decode iteration).

The iterations form a two-state chain: after an iteration of length ``tau`` a prefill
iteration follows with probability ``1 - e^(-lambda tau)``; decode iterations last ``d(b)``,
prefill ones ``p`` (a prompt's prefill alone, more for several prompts on several ranks: the
experts see all their tokens). With ``a = 1 - e^(-lambda d)`` and ``c = 1 - e^(-lambda p)`` the
share of prefill iterations is ``f = a / (a + 1 - c)``, an iteration lasts ``T = f p + (1 - f)
d`` on average and a request emits ``(1 - f) psi(lambda d) + f psi(lambda p)`` tokens an
iteration; its TPOT is their ratio. Little's law for the ``b`` requests in flight, ``b =
lambda (p + (osl - 1) TPOT(lambda))``, sets the rate at each concurrency (bisection: the right
side grows with ``lambda``). The earlier fluid model charged every prompt's prefill to every
rank's decodes, batched per token's time: gpt-oss-120b over eight B200s (TP8 EP8, attention DP,
SGLang), 200/200 at 150 req/s, simulated TPOT 88 ms, that model 41 ms, this one 85 ms
(tests/test_prefill_first_ranks.py).

With one rank (``g = 1``) it is the whole replica's chain: ``psi = e^-mu``, no decode
advances in a prefill iteration, and the prompts that arrived during one iteration share the
next (each adds :func:`~.curve.next_prompt_s`: nothing while an eager prefill's kernels take
longer to issue than to run). The earlier model charged each prompt one stall a token's time,
missing the chain in which prompts arriving during a long prefill iteration make the next one a
prefill too: gpt-oss-120b over eight B200s without attention DP, 200/200 at 50 req/s, TPOT 37 ms
where the simulation reads 100 (now 110); Qwen3-30B-A3B FP8 on an H100 at 60 req/s 69 against
211 (now 233).
"""

from __future__ import annotations

import numpy as np
from scipy.special import gammaln

from .fluid import OperatingPoints

#: Bisections of the request rate at each concurrency (a factor 10^12 bracket to 2^-50 of it in log).
RATE_BISECTIONS = 60


def poisson_below(mu: np.ndarray, count: int) -> np.ndarray:
    """``P(N = n)`` for ``N`` Poisson of mean ``mu`` and ``n = 0 .. count - 1`` (a trailing axis)."""
    n = np.arange(count, dtype=float)
    m = np.maximum(np.asarray(mu, float)[..., None], 1e-300)
    return np.exp(n * np.log(m) - m - gammaln(n + 1.0))


def free_share(mu: np.ndarray, ranks: int) -> np.ndarray:
    """Share of the ranks with no prompt when ``Poisson(mu)`` prompts are dealt round robin over
    ``ranks`` of them [1]: ``E[(g - N)^+] / g``, 1 at ``mu = 0``, ``e^-mu`` for one rank.

    >>> round(float(free_share(np.array(1.0), 1)), 4)  # e^-1
    0.3679
    """
    return (poisson_below(mu, ranks) * (ranks - np.arange(ranks, dtype=float))).sum(axis=-1) / ranks


def prefill_iterations(in_decode: np.ndarray, in_prefill: np.ndarray) -> np.ndarray:
    """The chain's share of prefill iterations where ``in_decode`` and ``in_prefill`` prompts
    arrive on average during a decode and a prefill iteration (``lambda d``, ``lambda p``) [1]:
    ``a / (a + 1 - c)``, ``a = 1 - e^(-lambda d)``, ``c = 1 - e^(-lambda p)``."""
    a = -np.expm1(-np.asarray(in_decode, float))
    return a / np.maximum(a + np.exp(-np.asarray(in_prefill, float)), 1e-300)


def chain(rate: np.ndarray, decode_s: np.ndarray, prefill_s: np.ndarray, ranks: int
          ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The iteration chain at each ``rate`` [1/s]: the share of prefill iterations, the mean
    iteration [s], the tokens a decoding request emits an iteration and the variance of the time
    between its tokens [s^2] (a geometric number of iterations, each of the chain's lengths)."""
    lam, d, p = (np.asarray(v, float) for v in (rate, decode_s, prefill_s))
    f = prefill_iterations(lam * d, lam * p)
    mean = f * p + (1.0 - f) * d
    tokens = (1.0 - f) * free_share(lam * d, ranks) + f * free_share(lam * p, ranks)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        gap_var = f * (1.0 - f) * (p - d) ** 2 / tokens + mean**2 * (1.0 - tokens) / tokens**2
    return f, mean, tokens, np.where(tokens > 0, gap_var, np.inf)


def prefill_first_points(batch: np.ndarray, decode_step_s: np.ndarray, prefill_one_s: float,
                         extra_prompt_s: float, most: int, ranks: int, osl: float) -> OperatingPoints:
    """Fluid steady state of a replica whose ``ranks`` ranks (one, or attention DP's) each run
    their prompts before their decodes, at each concurrency of ``batch`` (see the module's notes).

    Parameters
    ----------
    batch : array [request]
    decode_step_s : array [s]
        A decode iteration at each concurrency.
    prefill_one_s, extra_prompt_s : float [s]
        A prefill iteration with one prompt, and what each further prompt adds to it (on another
        rank under attention DP; beside it in one rank's token budget otherwise), at the mean
        number a prefill iteration carries, at most ``most``.
    most : int
        Prompts one prefill iteration takes (one a rank under attention DP; a token budget's worth).
    ranks : int
    osl : float [token]

    Returns
    -------
    OperatingPoints
        Its ``prefill_share`` is a rank's prompts' prefilled one by one, ``lambda p_1 / g`` (above
        one where batching them is what keeps up, as :func:`~.fluid.admission_wait_s` reads it);
        ``stall_share`` ``1 - d / TPOT``; its ``iteration_s`` the iteration an arrival waits in,
        ``E[L^2] / E[L]`` over the chain's
        lengths (an arrival is more likely to land in a long one), and the token-gap variance.
    """
    b = np.asarray(batch, float)
    d = np.asarray(decode_step_s, float)
    g = max(int(ranks), 1)

    def at(lam: np.ndarray) -> tuple[np.ndarray, ...]:
        mu = lam * prefill_one_s  # prompts a prefill iteration carries, at least one
        prompts = np.minimum(np.where(mu > 1e-9, mu / -np.expm1(-np.maximum(mu, 1e-9)), 1.0), max(most, 1))
        p = prefill_one_s + extra_prompt_s * (prompts - 1.0)
        _, mean, tokens, gap_var = chain(lam, d, p, g)
        with np.errstate(divide="ignore"):
            tpot = np.where(tokens > 0, mean / tokens, np.inf)
        return p, tpot, mean, gap_var

    lo, hi = np.full(b.shape, 1e-6), np.full(b.shape, 1e6)
    for _ in range(RATE_BISECTIONS):  # every point at once, in log
        mid = np.sqrt(lo * hi)
        p, tpot = at(mid)[:2]
        over = mid * (p + max(osl - 1.0, 0.0) * tpot) > b
        lo, hi = np.where(over, lo, mid), np.where(over, mid, hi)
    p, tpot, mean, gap_var = at(lo)
    f = chain(lo, d, p, g)[0]
    # an arrival lands in an iteration as long as E[L^2] / E[L] on average (longer ones take more time)
    seen = (f * p**2 + (1.0 - f) * d**2) / mean
    return OperatingPoints(b, lo, tpot, p, lo * prefill_one_s / g, 1.0 - d / tpot,
                           iteration_s=seen, gap_variance_s2=gap_var)
