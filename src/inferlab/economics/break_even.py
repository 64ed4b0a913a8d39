"""A shared per-token API against dedicated GPUs: where renting whole replicas starts to pay.

The API bills each token; a dedicated replica bills each hour, busy or not, and comes
whole, so its cost is a step function of traffic.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import SpecError
from ._common import CEIL_SLACK, jsonable, non_negative, positive, scalar_or_array, table, whole, shapes_agree
from .cost import SECONDS_PER_HOUR


@dataclass(frozen=True)
class TrafficCosts:
    """Hourly cost of the API and of dedicated replicas at each traffic level.

    Attributes
    ----------
    request_rate : numpy.ndarray
        Traffic [request/s].
    api_usd_per_hour : numpy.ndarray
        What the API bills for that traffic [USD/hour].
    replicas : numpy.ndarray
        Whole dedicated replicas that carry it, at least ``min_replicas`` [-].
    dedicated_usd_per_hour : numpy.ndarray
        What those replicas cost [USD/hour].
    """

    request_rate: np.ndarray
    api_usd_per_hour: np.ndarray
    replicas: np.ndarray
    dedicated_usd_per_hour: np.ndarray
    requests_per_s_per_replica: np.ndarray

    @property
    def dedicated_utilization(self) -> np.ndarray:
        """Traffic over the capacity of the replicas paid for [-]."""
        with np.errstate(invalid="ignore", divide="ignore"):
            return self.request_rate / (self.replicas * self.requests_per_s_per_replica)

    @property
    def cheaper(self) -> np.ndarray:
        """``"dedicated"`` where it costs no more than the API, else ``"api"``."""
        return np.where(self.dedicated_usd_per_hour <= self.api_usd_per_hour, "dedicated", "api")

    def to_dict(self) -> dict[str, Any]:
        """Every column as a list (or a float), JSON-ready."""
        return {k: jsonable(v) for k, v in (
            ("request_rate", self.request_rate), ("api_usd_per_hour", self.api_usd_per_hour),
            ("replicas", self.replicas), ("dedicated_usd_per_hour", self.dedicated_usd_per_hour),
            ("dedicated_utilization", self.dedicated_utilization), ("cheaper", self.cheaper))}

    def __str__(self) -> str:
        return table("API vs dedicated over traffic", {
            "req/s": self.request_rate, "API $/h": self.api_usd_per_hour, "replicas": self.replicas,
            "dedicated $/h": self.dedicated_usd_per_hour, "utilization": self.dedicated_utilization,
            "cheaper": self.cheaper})


@dataclass(frozen=True)
class BreakEven:
    r"""A per-token API against dedicated replicas for one workload mix.

    Attributes
    ----------
    api_usd_per_request : float or numpy.ndarray
        What the API bills for one request [USD/request].
    usd_per_replica_hour : float or numpy.ndarray
        Hourly cost of one dedicated replica (GPU-hour price x GPUs per replica) [USD/hour].
    requests_per_s_per_replica : float or numpy.ndarray
        Traffic one replica sustains within its SLOs [request/s].

    Notes
    -----
    A replica of hourly cost ``H`` and capacity ``C`` at utilization ``u`` costs
    ``H / (3600 u C)`` per request; it matches the API's ``c`` per request at

    .. math:: u^* = \frac{H}{3600 \, C \, c}

    Whole replicas: ``n = ceil(lambda / C)`` cost ``n H``, the API ``3600 lambda c``.
    Inside the ``n``-th step, ``((n-1) C, n C]``, dedicated is no dearer once
    ``lambda >= n u* C``. So it first pays at ``lambda* = u* C`` (one replica, ``u* <= 1``),
    and pays on every whole step from ``n0 = ceil(1 / (1 - u*))`` on, i.e. at any traffic
    above ``(n0 - 1) u* C``. With ``u* > 1`` dedicated never pays.
    """

    api_usd_per_request: np.ndarray | float
    usd_per_replica_hour: np.ndarray | float
    requests_per_s_per_replica: np.ndarray | float

    @property
    def dedicated_usd_per_request(self) -> np.ndarray | float:
        """Cost of a request on a fully busy replica [USD/request]."""
        return self.usd_per_replica_hour / (SECONDS_PER_HOUR * self.requests_per_s_per_replica)

    @property
    def break_even_utilization(self) -> np.ndarray | float:
        """Utilization at which a replica costs what the API does per request [-] (inf: free API)."""
        with np.errstate(divide="ignore", invalid="ignore"):
            return scalar_or_array(np.divide(self.dedicated_usd_per_request, self.api_usd_per_request))

    @property
    def break_even_request_rate(self) -> np.ndarray | float:
        """Lowest traffic at which dedicated costs no more than the API [request/s] (inf: never)."""
        u = np.asarray(self.break_even_utilization)
        return scalar_or_array(np.where(u <= 1.0, u * self.requests_per_s_per_replica, np.inf))

    @property
    def always_cheaper_request_rate(self) -> np.ndarray | float:
        """Traffic above which dedicated never costs more than the API, whole replicas counted
        [request/s] (inf: never)."""
        u = np.asarray(self.break_even_utilization, dtype=float)
        with np.errstate(divide="ignore", invalid="ignore"):
            n0 = np.ceil(1.0 / (1.0 - np.minimum(u, 1.0)) - CEIL_SLACK)
            rate = (n0 - 1.0) * u * self.requests_per_s_per_replica
        return scalar_or_array(np.where(u < 1.0, rate, np.inf))

    def costs(self, request_rate: Any, *, min_replicas: int = 1) -> TrafficCosts:
        """Hourly costs of both options at each traffic level (for a plot or a table).

        Parameters
        ----------
        request_rate : float or array_like or pint.Quantity
            Traffic [request/s], >= 0.
        min_replicas : int
            Replicas kept even without traffic [-] (0 allows scale to zero).

        Notes
        -----
        API: ``3600 lambda c``; dedicated: ``max(ceil(lambda / C), min_replicas) H``.
        """
        rate = non_negative(request_rate, "request/second", "request_rate", "traffic cannot be negative")
        if isinstance(min_replicas, bool) or not isinstance(min_replicas, (int, np.integer)) or min_replicas < 0:
            raise SpecError(f"min_replicas must be a whole number >= 0, got {min_replicas!r}")
        cap = np.asarray(self.requests_per_s_per_replica, dtype=float)
        if any(np.ndim(v) for v in (cap, self.api_usd_per_request, self.usd_per_replica_hour)) and np.ndim(rate):
            raise SpecError("costs() takes a traffic axis for one set of prices: with arrays of prices or capacities, "
                            "call it for each (or give one traffic level)")
        replicas = np.maximum(whole(rate / cap), float(min_replicas))
        return TrafficCosts(
            request_rate=rate,
            api_usd_per_hour=SECONDS_PER_HOUR * rate * self.api_usd_per_request,
            replicas=replicas,
            dedicated_usd_per_hour=replicas * np.asarray(self.usd_per_replica_hour, dtype=float),
            requests_per_s_per_replica=np.broadcast_to(cap, replicas.shape),
        )

    def to_dict(self) -> dict[str, Any]:
        """Inputs and break-even figures, JSON-ready."""
        names = ("api_usd_per_request", "usd_per_replica_hour", "requests_per_s_per_replica",
                 "dedicated_usd_per_request", "break_even_utilization", "break_even_request_rate",
                 "always_cheaper_request_rate")
        return {n: jsonable(np.asarray(getattr(self, n), dtype=float)) for n in names}

    def __str__(self) -> str:
        return table("API vs dedicated: break-even", {
            "API $/req": self.api_usd_per_request, "dedicated $/req at 100%": self.dedicated_usd_per_request,
            "break-even util": self.break_even_utilization, "pays from req/s": self.break_even_request_rate,
            "always pays from req/s": self.always_cheaper_request_rate})


@shapes_agree
def api_usd_per_request(usd_per_million_input: Any, usd_per_million_output: Any, isl: Any,
                        osl: Any) -> np.ndarray | float:
    """What a per-token API bills for one request [USD/request]: ``(isl p_in + osl p_out) / 1e6``."""
    p_in = non_negative(usd_per_million_input, "USD/Mtok", "usd_per_million_input", "API price of 1M input tokens")
    p_out = non_negative(usd_per_million_output, "USD/Mtok", "usd_per_million_output",
                         "API price of 1M output tokens")
    i = non_negative(isl, "token", "isl", "input tokens per request")
    o = non_negative(osl, "token", "osl", "output tokens per request")
    if np.any(i + o <= 0):
        raise SpecError("isl + osl must be > 0 tokens: a request with no tokens costs nothing on either side")
    return scalar_or_array((i * p_in + o * p_out) / 1e6)


@shapes_agree
def api_vs_dedicated(*, usd_per_million_input: Any, usd_per_million_output: Any, isl: Any, osl: Any,
                     usd_per_replica_hour: Any, requests_per_s_per_replica: Any = None,
                     output_tokens_per_s_per_replica: Any = None) -> BreakEven:
    """Compare a per-token API with dedicated replicas for one workload mix.

    Parameters
    ----------
    usd_per_million_input, usd_per_million_output : float or array_like or pint.Quantity
        API prices [USD/Mtok].
    isl, osl : float or array_like
        Input and output tokens per request [token]. A mix known as token rates maps to
        ``isl = input tokens/s / requests/s`` (and the same for ``osl``).
    usd_per_replica_hour : float or array_like or pint.Quantity
        Hourly cost of one dedicated replica [USD/hour] (GPU-hour price x GPUs per replica).
    requests_per_s_per_replica : float or array_like, optional
        Traffic one replica sustains within its SLOs [request/s].
    output_tokens_per_s_per_replica : float or array_like, optional
        The same capacity as output tokens [token/s]; ``C = tokens/s / osl``. Give one of the two.

    Returns
    -------
    BreakEven
        Break-even utilization and traffic; ``.costs(request_rate)`` gives both hourly costs.

    Examples
    --------
    >>> be = api_vs_dedicated(usd_per_million_input=3.0, usd_per_million_output=15.0, isl=1000, osl=200,
    ...                       usd_per_replica_hour=8 * 2.95, requests_per_s_per_replica=10.0)
    >>> round(be.api_usd_per_request, 6), round(be.break_even_utilization, 4)   # 0.003 + 0.003; 23.6 / 216
    (0.006, 0.1093)
    >>> round(be.break_even_request_rate, 3)
    1.093
    """
    cost = api_usd_per_request(usd_per_million_input, usd_per_million_output, isl, osl)
    price = non_negative(usd_per_replica_hour, "USD/hour", "usd_per_replica_hour",
                         "hourly cost of one replica; a price cannot be negative")
    if (requests_per_s_per_replica is None) == (output_tokens_per_s_per_replica is None):
        raise SpecError("give the capacity of one replica as exactly one of requests_per_s_per_replica "
                        "[request/s] or output_tokens_per_s_per_replica [token/s]")
    if requests_per_s_per_replica is not None:
        cap = positive(requests_per_s_per_replica, "request/second", "requests_per_s_per_replica",
                       "traffic one replica sustains within its SLOs")
    else:
        tok = positive(output_tokens_per_s_per_replica, "token/second", "output_tokens_per_s_per_replica",
                       "output tokens one replica sustains within its SLOs")
        o = positive(osl, "token", "osl", "output tokens per request, needed to turn tokens/s into requests/s")
        cap = tok / o
    return BreakEven(scalar_or_array(cost), scalar_or_array(price), scalar_or_array(cap))


@shapes_agree
def traffic_costs(request_rate: Any, *, min_replicas: int = 1, **offer: Any) -> TrafficCosts:
    """Hourly cost of the API and of dedicated replicas over a range of traffic.

    ``offer`` takes the keyword arguments of :func:`api_vs_dedicated`; see
    :meth:`BreakEven.costs` for ``request_rate`` and ``min_replicas``.

    Examples
    --------
    >>> t = traffic_costs([0.5, 1.5, 10.0], usd_per_million_input=3.0, usd_per_million_output=15.0, isl=1000,
    ...                   osl=200, usd_per_replica_hour=23.6, requests_per_s_per_replica=10.0)
    >>> t.cheaper.tolist()
    ['api', 'dedicated', 'dedicated']
    """
    return api_vs_dedicated(**offer).costs(request_rate, min_replicas=min_replicas)
