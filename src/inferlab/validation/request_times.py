"""What a serving case's metric is, from the request times one simulation leaves: TTFT, TPOT,
ITL and throughput, a closed loop's later rounds weighted as the benchmark's remaining ones."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

#: Closed loop: requests per client in the benchmark when the case does not say (InferenceMAX
#: runs ``--num-prompts`` ten times ``--max-concurrency``, its README), and in the simulation.
BENCHMARK_ROUNDS = 10


@dataclass(frozen=True)
class RequestTimes:
    """What one simulation leaves for the case metrics: per-request times [s] and lengths.

    ``first_round`` requests (a closed loop's first burst, 0 otherwise) stand for themselves;
    the later ones stand for the benchmark's remaining ``rounds - 1`` rounds (:func:`latency_weights`).
    """

    arrival: np.ndarray
    first_token: np.ndarray
    finish: np.ndarray
    osl: np.ndarray
    replicas: int
    first_round: int = 0
    rounds: float = BENCHMARK_ROUNDS

    def shifted(self, steps: Sequence[tuple[RequestTimes, float]]) -> RequestTimes:
        """These times plus ``weight x (t - self)`` for each ``(t, weight)``: a first-order step."""
        times = {k: getattr(self, k) + sum(w * (getattr(t, k) - getattr(self, k)) for t, w in steps)
                 for k in ("arrival", "first_token", "finish")}
        return replace(self, **times)


def latency_weights(times: RequestTimes) -> np.ndarray:
    """Weight of each request in the latency means: 1, except in a closed loop, where the
    requests after the first round share the weight of the benchmark's other rounds."""
    n, first = len(times.osl), times.first_round
    w = np.ones(n)
    if 0 < first < n:
        w[first:] = max(times.rounds - 1.0, 0.0) * first / (n - first)
    return w


def _weighted_median(values: np.ndarray, weights: np.ndarray) -> float:
    keep = np.isfinite(values)
    v, w = values[keep], weights[keep]
    if not v.size:
        return float("nan")
    order = np.argsort(v)
    cum = np.cumsum(w[order])
    return float(v[order][np.searchsorted(cum, 0.5 * cum[-1])])


def serving_metric(times: RequestTimes, metric: str, num_gpus: int, preamble: int = 0) -> float:
    """A case metric (ms for times, tokens/s for rates) from simulated request times.

    Throughput is over the whole run, for a closed loop its clients' tokens over their requests'
    end-to-end time (Little's law, with the rounds weighted as the benchmark's: a client always
    has one request in flight; see :attr:`~inferlab.serving.result.ServeResult.duration_s`);
    latencies are weighted means over the requests (:func:`latency_weights`), the ITL their decode time
    over their gaps; a TTFT counts ``preamble`` tokens at the request's pace (``load.preamble_tokens``)."""
    w = latency_weights(times)
    gaps = times.osl - 1.0
    decode = times.finish - times.first_token
    with np.errstate(invalid="ignore", divide="ignore"):
        tpot = np.where(gaps > 0, decode / gaps, np.nan)
    has_tpot = np.isfinite(tpot)
    if times.first_round and len(times.osl) >= 2 * times.first_round:  # a closed loop of first_round clients
        duration = float(np.sum((times.finish - times.arrival) * w)) / times.first_round
        tokens = float(np.sum(times.osl * w))
    else:
        duration, tokens = float(np.max(times.finish) - np.min(times.arrival)), float(np.sum(times.osl))
    throughput = tokens / duration * times.replicas if duration > 0 else float("nan")
    mean_tpot = float(np.sum(np.where(has_tpot, tpot, 0.0) * w) / np.sum(w * has_tpot)) if has_tpot.any() \
        else float("nan")
    values = {
        "output_tokens_per_s": lambda: throughput,
        "output_tokens_per_s_per_gpu": lambda: throughput / num_gpus,
        "output_tokens_per_s_per_user": lambda: 1.0 / mean_tpot,
        "ttft_ms": lambda: np.sum((times.first_token - times.arrival + np.minimum(preamble, np.maximum(gaps, 0.0))
                                   * np.nan_to_num(tpot)) * w) / np.sum(w) * 1e3,
        "tpot_ms": lambda: mean_tpot * 1e3,
        "itl_ms": lambda: np.sum(np.where(has_tpot, decode, 0.0) * w)
        / max(float(np.sum(np.maximum(gaps, 0.0) * w)), 1.0) * 1e3,
        "tpot_p50_ms": lambda: _weighted_median(tpot, w) * 1e3,
    }
    return float(values[metric]())
