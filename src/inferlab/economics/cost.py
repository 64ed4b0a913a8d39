"""What a token costs on rented GPUs: the hourly price spread over the tokens served.

A GPU is paid for every hour, busy or not, so the price of a token scales with one over
the share of time the GPU does useful work.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ._common import non_negative, positive, scalar_or_array, share, shapes_agree

SECONDS_PER_HOUR = 3600.0


@shapes_agree
def cost_per_million_tokens(usd_per_gpu_hour: Any, num_gpus: Any, tokens_per_s: Any,
                            utilization: Any = 1.0) -> np.ndarray | float:
    r"""Dollars per million tokens of a deployment paid by the GPU-hour.

    Parameters
    ----------
    usd_per_gpu_hour : float or array_like or pint.Quantity
        Price of one GPU for one hour [USD/hour].
    num_gpus : float or array_like
        GPUs paid for [-] (fractions allowed for shared or MIG slices).
    tokens_per_s : float or array_like or pint.Quantity
        Tokens the deployment produces while busy [token/s].
    utilization : float or array_like
        Share of paid time the deployment is busy at ``tokens_per_s``, in (0, 1] [-].

    Returns
    -------
    float or numpy.ndarray
        Cost [USD/Mtok]; arrays broadcast.

    Raises
    ------
    SpecError
        For a negative price, a non-positive GPU count or throughput, or a utilization
        outside (0, 1].

    Notes
    -----
    .. math:: c = \frac{p \, N}{3600 \, r \, u} \times 10^6

    with ``p`` the GPU-hour price, ``N`` the GPUs, ``r`` the tokens per second while busy
    and ``u`` the utilization. Cost per token is inversely proportional to utilization:
    a GPU busy 30% of the time costs three times per token what one busy 90% costs.

    Examples
    --------
    >>> round(cost_per_million_tokens(2.95, 1, 1000.0), 4)   # 2.95 / 3.6
    0.8194
    >>> round(cost_per_million_tokens(2.95, 1, 1000.0, 0.3) / cost_per_million_tokens(2.95, 1, 1000.0, 0.9), 12)
    3.0
    """
    price = non_negative(usd_per_gpu_hour, "USD/hour", "usd_per_gpu_hour",
                         "the hourly price of one GPU; a price cannot be negative")
    gpus = positive(num_gpus, "dimensionless", "num_gpus", "the GPUs paid for")
    rate = positive(tokens_per_s, "token/second", "tokens_per_s", "tokens produced per second while busy")
    util = share(utilization, "utilization", "the share of paid time the GPUs are busy")
    return scalar_or_array(price * gpus / (rate * SECONDS_PER_HOUR * util) * 1e6)


@shapes_agree
def utilization_for_cost(usd_per_million_tokens: Any, usd_per_gpu_hour: Any, num_gpus: Any,
                         tokens_per_s: Any) -> np.ndarray | float:
    r"""Utilization at which a deployment reaches a target cost per token (the inverse of
    :func:`cost_per_million_tokens`).

    Parameters
    ----------
    usd_per_million_tokens : float or array_like
        Target cost [USD/Mtok], > 0.
    usd_per_gpu_hour, num_gpus, tokens_per_s
        As in :func:`cost_per_million_tokens`.

    Returns
    -------
    float or numpy.ndarray
        Utilization [-]; above 1 when the target cannot be met even fully busy.

    Notes
    -----
    .. math:: u = \frac{p \, N}{3600 \, r \, c} \times 10^6

    Examples
    --------
    >>> round(utilization_for_cost(2.0, 2.95, 1, 1000.0), 4)   # 0.8194 / 2.0
    0.4097
    """
    target = positive(usd_per_million_tokens, "USD/Mtok", "usd_per_million_tokens", "the target cost per token")
    price = non_negative(usd_per_gpu_hour, "USD/hour", "usd_per_gpu_hour",
                         "the hourly price of one GPU; a price cannot be negative")
    gpus = positive(num_gpus, "dimensionless", "num_gpus", "the GPUs paid for")
    rate = positive(tokens_per_s, "token/second", "tokens_per_s", "tokens produced per second while busy")
    return scalar_or_array(price * gpus / (rate * SECONDS_PER_HOUR * target) * 1e6)
