"""The result of :func:`inferlab.serve`: per-request latencies and their distributions."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..inputs.record import inputs_dict
from ..inputs.workload import Workload
from ..phases.interval import interval_dict
from ..results.render import json_ready, text_table
from ..techniques.step import ResolvedDeployment
from .explain import explain_serving
from .overheads import ClientOverheads, UserLatencies, user_latencies
from .simulator import Trace
from ..results.record import array_record

PERCENTILES = (50, 90, 99)


def _weighted_quantile(values: np.ndarray, weights: np.ndarray, q: float) -> float:
    keep = weights > 0
    if not np.any(keep):
        return float("nan")
    v, w = values[keep], weights[keep]
    order = np.argsort(v)
    cum = np.cumsum(w[order])
    return float(v[order][np.searchsorted(cum, q * cum[-1])])


@array_record
@dataclass(frozen=True)
class ServeResult:
    """Latencies of every request [s] and the load they saw.

    ``ttft`` counts from arrival (queueing included); ``tpot`` is a request's decode time
    over its output tokens after the first; ``itl`` the gaps between tokens of all
    requests, weighted by tokens; the simulated stream stands for ``replicas`` of them (data-
    parallel replicas, pipeline batches in flight; fractional when a closed loop's clients do
    not split evenly over them);
    ``overheads`` (network, tokenizer, client, streaming) give the user-side view in :attr:`user`;
    ``speculative`` and ``prefix`` are the speculative decoding and the shared prefixes
    simulated, if any.
    """

    deployment: ResolvedDeployment
    engine: str
    workload: Workload
    trace: Trace
    replicas: float
    overheads: ClientOverheads | None = None
    speculative: Any = None
    prefix: Any = None
    #: The Deployment and Workload of a ``serve(deployment, workload)`` call (None otherwise).
    inputs: Any = None
    #: Drawn requests longer than the engine takes (its max_model_len or the model's positions),
    #: which it answers with an error; they are not in the trace (per stream, as the trace).
    refused: int = 0
    #: The simulated stream's scheduler limits (None where not recorded: pools, fleets).
    limits: Any = None
    #: Requests the run was asked for, every stream together (None: the simulated stream's count
    #: times ``replicas``, for pools and fleets).
    asked: int | None = None

    # --- per request ----------------------------------------------------------------
    @property
    def request_overhead_s(self) -> float:
        """The server's time per request outside the GPU iterations [s] (HTTP, tokenization,
        hand-off; the profile's ``request_overhead_s``), part of every TTFT."""
        return float(self.deployment.profile.request_overhead_s) if self.deployment is not None else 0.0

    @property
    def num_gpus(self) -> int:
        """GPUs serving the load (every replica's)."""
        return self.deployment.num_gpus

    @property
    def queue_s(self) -> np.ndarray:
        """Reaching the scheduler to the first scheduled iteration [s]: waiting for admission."""
        return np.maximum(self.trace.first_scheduled - self.trace.arrival - self.request_overhead_s, 0.0)

    @property
    def ttft_s(self) -> np.ndarray:
        """Arrival to first token [s]."""
        return self.trace.first_token - self.trace.arrival

    @property
    def e2e_s(self) -> np.ndarray:
        """Arrival to last token [s]."""
        return self.trace.finish - self.trace.arrival

    @property
    def tpot_s(self) -> np.ndarray:
        """Mean time per output token after the first, per request [s] (NaN for one-token outputs)."""
        steps = self.trace.osl - 1.0
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(steps > 0, (self.trace.finish - self.trace.first_token) / steps, np.nan)

    @property
    def user(self) -> UserLatencies:
        """TTFT, TPOT and end-to-end latency as the user sees them (GPU-side without overheads)."""
        return user_latencies(self)

    # --- aggregate -------------------------------------------------------------------
    @property
    def duration_s(self) -> float:
        """First arrival to last finish [s]; for a closed loop, the time its clients keep a request
        in flight (the sum of the requests' end-to-end times over the clients).

        Notes
        -----
        A closed loop's clients send their next request as the last one ends, so each always has
        one in flight and the run's throughput is ``clients x tokens / end-to-end time``
        (Little's law). The simulation's clients do not all do so: the second round's requests
        wait a share of one request's duration (:meth:`~inferlab.inputs.workload.Workload.turnaround`),
        which sets the steady state's clients out of step; that wait is not the benchmark's and
        would count as idle time in a short run (16 clients over 3 rounds: 12.6 in flight on average).
        A run of fewer than two requests per client is its one burst: first arrival to last finish.
        A stream of one request at a rate lasts at least the time it takes to be offered it (one
        over its rate): its own latency alone would stand for the streams' whole run
        (3 requests at 0.01/s over 4 streams had read 399 tokens/s).
        """
        clients = getattr(self.workload, "concurrency", None) or 0
        if clients and len(self.trace.osl) >= 2 * clients:  # the clients send again: their steady state
            return float(np.nansum(self.e2e_s)) / clients
        span = float(np.nanmax(self.trace.finish) - np.nanmin(self.trace.arrival))
        rate = getattr(self.workload, "rate", None)
        return max(span, 1.0 / rate) if rate and len(self.trace.osl) < 2 else span

    @property
    def output_tokens_per_s(self) -> float:
        """Generated tokens per second of all replicas."""
        return float(np.sum(self.trace.osl)) / self.duration_s * self.replicas

    @property
    def output_tokens_per_s_per_gpu(self) -> float:
        """Generated tokens per second per GPU."""
        return self.output_tokens_per_s / self.num_gpus

    @property
    def requests_per_s(self) -> float:
        """Completed requests per second of all replicas."""
        return len(self.trace.osl) / self.duration_s * self.replicas

    @property
    def mean_in_flight(self) -> float:
        """Requests in the system on average (arrival to finish), per simulated stream: a
        replica, or with ``pp`` pipeline stages one of its ``pp`` batches in flight."""
        return float(np.nansum(self.e2e_s)) / self.duration_s

    @property
    def max_concurrency(self) -> int | None:
        """The client's cap on requests in flight, all replicas (None: uncapped); each simulated
        stream holds its share (``workload.max_concurrency``)."""
        cap = getattr(self.workload, "max_concurrency", None)
        return None if cap is None else round(cap * self.replicas)

    @property
    def served_and_refused(self) -> tuple[int, int]:
        """Requests served and refused, all streams: the asked count split as the simulated
        stream splits its share (10 over 7 streams are 10, not the 14 of 7 streams of 2; a
        conversation's turns after a refused one are neither)."""
        mine, refused, wl = len(self.trace.osl), self.refused, self.workload
        share = len(wl.trace) if wl.trace is not None else wl.num_requests
        if self.asked is None or not share:
            return round(mine * self.replicas), round(refused * self.replicas)
        served = round(self.asked * mine / share)
        return served, (self.asked - served if mine + refused == share else round(self.asked * refused / share))

    @property
    def preemptions(self) -> int:
        """Requests preempted (their KV freed, recomputed later), all replicas: the simulated
        stream's times the streams it stands for, as the request count and throughput."""
        return round(self.trace.preemptions * self.replicas)

    @property
    def evicted_blocks(self) -> int:
        """Prefix-cache blocks evicted, all replicas (as :attr:`preemptions`)."""
        return round(self.trace.evicted_blocks * self.replicas)

    @property
    def prefix_hit_rate(self) -> float:
        """Share of prompt tokens found in the prefix cache at each request's first admission [1]
        (0 without shared prefixes; vLLM reports it as ``prefix_cache_hit_rate``)."""
        if self.trace.cached is None or self.prefix is None or not self.prefix.cache:
            return 0.0
        return float(np.sum(self.trace.cached) / np.sum(self.trace.isl))

    @property
    def tokens_per_step(self) -> float:
        """Output tokens per decode step of a request, measured over the run [token]: 1
        without speculation, about the acceptance model's mean with it."""
        chunks = float(np.sum(self.trace.itl_weights))
        return float(np.sum(self.trace.osl - 1.0)) / chunks if chunks else 1.0

    def itl_percentile(self, q: float) -> float:
        """Inter-token latency at percentile ``q`` (0, or above 1 and at most 100: 99 for P99) over
        every generated token [s]."""
        from ..checks import percentile, real

        q = real("percentile", q, minimum=0.0, maximum=100.0)
        q = percentile(q) if q else q  # (0.99 for P99 is refused)
        return _weighted_quantile(self.trace.itl_values, self.trace.itl_weights, q / 100.0)

    def summary(self) -> dict[str, dict[str, float]]:
        """Mean and P50/P90/P99 of queueing, TTFT, TPOT, ITL and end-to-end latency [s]."""
        out: dict[str, dict[str, float]] = {}
        for name, values in (("queue", self.queue_s), ("ttft", self.ttft_s), ("tpot", self.tpot_s),
                             ("e2e", self.e2e_s)):
            out[name] = _stats(values)
        w = self.trace.itl_weights
        out["itl"] = {"mean": float(np.sum(self.trace.itl_values * w) / max(np.sum(w), 1e-300)),
                      **{f"p{p}": self.itl_percentile(p) for p in PERCENTILES}}
        return out

    def at_percentile(self, q: float) -> dict[str, float]:
        """Queueing, TTFT, TPOT, ITL and end-to-end latency at percentile ``q`` [s] (NaN where none
        is defined), for a percentile :meth:`summary` leaves out (``q`` as :meth:`itl_percentile` takes it)."""
        from ..checks import percentile, real

        q = real("percentile", q, minimum=0.0, maximum=100.0)
        q = percentile(q) if q else q
        out = {name: _stats(values, (q,))[f"p{q}"] for name, values in
               (("queue", self.queue_s), ("ttft", self.ttft_s), ("tpot", self.tpot_s), ("e2e", self.e2e_s))}
        out["itl"] = self.itl_percentile(q) if len(self.trace.itl_values) else float("nan")
        return {k: out[k] for k in ("queue", "ttft", "tpot", "itl", "e2e")}  # (summary's order)

    def interval(self, level: float = 0.8):
        """Intervals at ``level`` (0.5, 0.8 or 0.9) of the mean TTFT, the mean TPOT and the output
        throughput, from the validation residuals of serving cases on this GPU family with this
        engine (a :class:`~inferlab.phases.interval.PredictionInterval`; wider for a GPU or engine
        with no calibration data). Percentiles have no interval: the cases measure means.

        Raises
        ------
        InferlabError
            Another level, or a profile without an error-band table (``roofline``).
        """
        from ..phases.interval import prediction_interval

        return prediction_interval(self.deployment, self.engine, "serving", level,
                                   ttft_s=_stats(self.ttft_s)["mean"], tpot_s=_stats(self.tpot_s)["mean"],
                                   output_tokens_per_s=self.output_tokens_per_s, tpot_floor_s=self._tpot_floor_s,
                                   ttft_floor_s=self._ttft_floor_s)

    @property
    def _ttft_floor_s(self) -> float:
        """Least mean TTFT physics allows [s]: one prompt of the mean uncached length prefilled
        alone, its matrix FLOPs at the dense tensor rate or its weight reads at the memory
        bandwidth (a prompt's FLOPs grow at least linearly with its length, so the mean
        prompt's floor is below the mean of the prompts' floors)."""
        from ..phases.interval import ttft_floor_s
        from ..techniques.step import prefill

        tokens = max(float(np.mean(self.trace.isl)) * (1.0 - self.prefix_hit_rate), 1.0)
        return float(ttft_floor_s(self.deployment, prefill(self.deployment, np.asarray(1.0), np.asarray(tokens)).ops))

    @property
    def _tpot_floor_s(self) -> float:
        """Least mean TPOT physics allows [s]: the weight reads of a one-sequence decode step
        (the fewest experts any step touches) at the memory bandwidth, over the most tokens a
        step gives (k + 1 with speculation)."""
        from ..phases.interval import tpot_floor_s
        from ..techniques.step import decode

        step = decode(self.deployment, np.asarray(1.0), np.asarray(1.0))
        return float(tpot_floor_s(self.deployment, step.ops, self.speculative))

    def to_dict(self) -> dict[str, Any]:
        """Summaries and throughput, JSON-ready (seconds, tokens/s; a summary that does not
        exist, the TPOT of one-token outputs, is None)."""
        dep = self.deployment
        return {
            "model": dep.model.id or dep.model.name, "hardware": dep.hardware.id, "layout": str(dep.parallel),
            "num_gpus": self.num_gpus, "precision": str(dep.precision), "engine": self.engine,
            "profile": dep.profile.name, **({"profile_note": dep.profile.note} if dep.profile.note else {}),
            "mode": self.workload.mode,
            **({"max_concurrency": self.max_concurrency} if self.max_concurrency is not None else {}),
            **dict(zip(("num_requests", "refused"), self.served_and_refused)),
            "output_tokens_per_s": self.output_tokens_per_s,
            "output_tokens_per_s_per_gpu": self.output_tokens_per_s_per_gpu,
            "requests_per_s": self.requests_per_s, "preemptions": self.preemptions,
            "latency_s": json_ready(self.summary()),  # one-token outputs have no TPOT: None
            **({"speculative": str(self.speculative), "tokens_per_step": self.tokens_per_step}
               if self.speculative is not None else {}),
            **({"prefix": str(self.prefix), "prefix_hit_rate": self.prefix_hit_rate,
                "prefix_evicted_blocks": self.evicted_blocks} if self.prefix is not None else {}),
            **({"user_latency_s": json_ready(_summary(self.user))} if self.overheads else {}),
            "interval": interval_dict(self),
            **inputs_dict(self.inputs),
        }

    def stream_words(self) -> str:
        """What the simulated stream stands for: "one of 3 streams", or, where a closed loop's
        clients do not split evenly, "one stream, 7 of the 20 clients" (its share rounded up)."""
        n, clients = self.replicas, self.workload.concurrency
        if float(n).is_integer() or not clients:
            return f"one of {n:g} streams"
        return f"one stream, {clients} of the {round(clients * n)} clients"

    def __str__(self) -> str:
        dep = self.deployment
        wl = self.workload
        n = self.replicas  # the workload is one stream's share (a replica's, a pipeline batch's)
        simulated = len(self.trace.osl)
        clients = round((wl.concurrency or 0) * n)
        served, refused = self.served_and_refused
        load = {"offline": "offline (all queued)", "online": f"{wl.rate * n:g} req/s" if wl.rate else "trace",
                "closed_loop": f"{clients} clients" + (f" (only {served} send a request: fewer "
                                                       "requests than clients)" if served < clients else "")
                }[wl.mode]
        if wl.max_concurrency is not None:
            load += f", at most {wl.max_concurrency} in flight" + (" a stream" if n != 1 else "")
        requests = (f"{simulated} request{'s' * (simulated != 1)}" if n == 1 else
                    f"{served} request{'s' * (served != 1)} ({simulated} simulated on {self.stream_words()})")
        head = (f"{dep.model.id or dep.model.name} on {dep.num_gpus}x {dep.hardware.id} ({dep.parallel}), "
                f"{dep.precision}, engine {self.engine}; {requests}, {load}")
        s = self.summary()
        if not len(self.trace.itl_values) or not math.isfinite(s["itl"]["p50"]):  # one-token outputs: no gaps
            s = {**s, "itl": {k: float("nan") for k in s["itl"]}}
        rows = [[name, *(_ms_cell(s[name][k]) for k in ("mean", "p50", "p90", "p99"))]
                for name in ("queue", "ttft", "tpot", "itl", "e2e")]
        if self.overheads:
            u = _summary(self.user)
            rows += [[f"{name} (user)", *(_ms_cell(u[name][k]) for k in ("mean", "p50", "p90", "p99"))]
                     for name in ("ttft", "tpot", "e2e")]
        table = text_table(["ms", "mean", "P50", "P90", "P99"], rows, right={1, 2, 3, 4})
        per = f"{self.output_tokens_per_s_per_gpu:,.0f} per {self.deployment.hardware.device_word}"
        tail = (f"throughput {self.output_tokens_per_s:,.0f} tok/s ({per}), "
                f"{self.requests_per_s:.2f} req/s; preemptions {self.preemptions}")
        if self.refused:
            tail += (f"\n{refused} drawn request(s) longer than the engine takes (prompt plus "
                     "output beyond its max_model_len or the model's positions, or a prompt beyond an unchunked budget) refused with an error, not served")
        return "\n".join([head, table, tail, *self._technique_lines()])

    def _technique_lines(self) -> list[str]:
        note = self.deployment.profile.note  # a calibration written for another engine or GPU
        lines = [note] if note else []
        if self.speculative is not None:
            lines.append(f"speculative {self.speculative}: {self.tokens_per_step:.2f} tokens per decode step "
                         f"(expected {self.speculative.tokens_per_step:.2f})")
        if self.prefix is not None:
            lines.append(f"prefix {self.prefix}: hit rate {self.prefix_hit_rate:.1%} of prompt tokens, "
                         f"{self.evicted_blocks:,} blocks evicted")
        return lines

    def explain(self) -> str:
        """Where the time goes: queueing vs prefill vs decode, and what sets each."""
        return explain_serving(self)

    def to_frame(self):
        """One row per simulated request (arrival, lengths, latencies [s]) as a pandas DataFrame."""
        from ..results.html import serve_result_frame

        return serve_result_frame(self)

    def _repr_html_(self) -> str:
        from ..results.html import serve_result_html

        return serve_result_html(self)

    def __repr__(self) -> str:
        from ..results.html import serve_result_repr

        return serve_result_repr(self)

    def plot(self, path: Any = None, **kwargs: Any) -> Any:
        """Distributions of TTFT, TPOT and end-to-end latency (needs matplotlib); see
        :func:`~.plot.plot_result`."""
        from .plot import plot_result

        return plot_result(self, path, **kwargs)


def _ms_cell(seconds: float) -> str:
    """A latency in ms for a table, ``-`` where there is none (the TPOT of one-token outputs)."""
    return f"{seconds * 1e3:.1f}" if math.isfinite(seconds) else "-"


def _summary(u: UserLatencies) -> dict[str, dict[str, float]]:
    return {name: _stats(v) for name, v in (("ttft", u.ttft_s), ("tpot", u.tpot_s), ("e2e", u.e2e_s))}


def _stats(values: np.ndarray, percentiles: tuple[float, ...] = PERCENTILES) -> dict[str, float]:
    """Mean and ``percentiles`` of the defined values; NaN, without numpy's empty-slice
    warning, when none is (the TPOT of one-token outputs)."""
    defined = np.asarray(values, float)
    defined = defined[~np.isnan(defined)]
    if not defined.size:
        return {"mean": float("nan"), **{f"p{p}": float("nan") for p in percentiles}}
    return {"mean": float(np.mean(defined)), **{f"p{p}": float(np.percentile(defined, p)) for p in percentiles}}
