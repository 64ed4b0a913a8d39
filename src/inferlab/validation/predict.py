"""Predicting validation cases: static batches evaluated as one grid per deployment, serving
cases simulated once per run (:mod:`.serving`), each case's metric in its unit."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from ..engines.window_options import WINDOW_LIMITS
from ..errors import InferlabError
from .cases import Case, InvalidCase, case_engine, case_layout, case_precision, case_speculative
from .support import unsupported_reason


def metric_value(metric: str, *, ttft_s: Any, tpot_s: Any, tpot_mid_s: Any, output_tokens_per_s: Any,
                 num_gpus: Any) -> np.ndarray:
    """A case metric from the estimate's quantities (ms for times, tokens/s for rates).

    ``tpot_p50_ms`` is the decode step at mid generation; ``itl_ms`` and ``tpot_ms``
    are the mean decode step; per-user throughput is ``1 / tpot``.
    """
    values = {
        "output_tokens_per_s": lambda: output_tokens_per_s,
        "output_tokens_per_s_per_gpu": lambda: np.asarray(output_tokens_per_s) / num_gpus,
        "output_tokens_per_s_per_user": lambda: np.divide(1.0, tpot_s, out=np.full(np.shape(tpot_s), np.nan),
                                                          where=np.asarray(tpot_s) > 0),
        "ttft_ms": lambda: np.asarray(ttft_s) * 1e3,
        "tpot_ms": lambda: np.asarray(tpot_s) * 1e3,
        "itl_ms": lambda: np.asarray(tpot_s) * 1e3,
        "tpot_p50_ms": lambda: np.asarray(tpot_mid_s) * 1e3,
    }
    return np.asarray(values[metric](), float)


def static_group_key(case: Case) -> tuple:
    """What a static-batch case shares with the cases evaluated in one grid with it."""
    layout = tuple(case_layout(case).values())  # type: ignore[union-attr]
    techniques = (case_speculative(case), (case.prefix_cache or {}).get("hit_rate"))
    windows = tuple(sorted((k, v) for k, v in (case.scheduler or {}).items() if k in WINDOW_LIMITS))
    return (case.model, case.hardware, layout, tuple(sorted(case_precision(case).items())), case_engine(case),
            techniques, windows)


def predict_cases(cases: Iterable[Case | InvalidCase], profile: Any = "default",
                  swept: bool = False) -> list[tuple[float | None, str | None]]:
    """:func:`predict_case` for many cases; static cases that share a deployment are evaluated as one
    grid, serving cases that share a run as one simulation; an :class:`InvalidCase` gets its reason.
    ``swept``: the infinite-rate rows already hold their sweep's request count (a part of a set
    predicted apart, :func:`~.serving.sweep_request_counts`)."""
    from ..phases.estimate import estimate
    from .serving import predict_serving_cases

    cases = list(cases)
    valid = [i for i, case in enumerate(cases) if isinstance(case, Case)]
    if len(valid) < len(cases):  # invalid entries keep their reason; the others are predicted
        out = [(None, f"invalid case: {getattr(case, 'reason', '')}") for case in cases]
        for i, pred in zip(valid, predict_cases([cases[i] for i in valid], profile, swept)):
            out[i] = pred
        return out  # type: ignore[return-value]
    out: list[tuple[float | None, str | None]] = [(None, None)] * len(cases)
    serving = [i for i, case in enumerate(cases) if case.regime != "static_batch"]
    for i, pred in zip(serving, predict_serving_cases([cases[i] for i in serving], profile, swept=swept)):
        out[i] = pred
    groups: dict[tuple, list[int]] = {}
    for i, case in enumerate(cases):
        if case.regime != "static_batch":
            continue
        reason = unsupported_reason(case)
        if reason is not None:
            out[i] = (None, reason)
            continue
        groups.setdefault(static_group_key(case), []).append(i)
    for key, idx in groups.items():
        model, hardware, (tp, pp, ep, dp, attention_dp, attention_tp), precision, engine, (spec, hit), windows = key
        members = [cases[i] for i in idx]
        try:
            est = estimate(model, hardware, tp=tp, pp=pp, ep=ep, dp=dp, attention_dp=attention_dp, attention_tp=attention_tp,
                           precision=dict(precision), engine=engine, profile=profile, speculative=spec,
                           prefix_cache=hit,
                           isl=[c.isl for c in members], osl=[c.osl for c in members],
                           batch_size=[c.load["batch_size"] for c in members], waves=True, **dict(windows),
                           allow_long_context=True)  # a measured run: the engine served this context
            mid = est.decode_step.time_s
        except InferlabError as exc:
            if len(members) > 1:  # one case may be infeasible while the others are not
                for i in idx:
                    out[i] = predict_cases([cases[i]], profile)[0]
                continue
            out[idx[0]] = (None, str(exc))
            continue
        shape = np.shape(est.total_s)
        runs = np.ravel(np.broadcast_to(est.feasible, shape))
        for j, (i, case) in enumerate(zip(idx, members)):
            if not runs[j]:
                out[i] = (None, str(np.ravel(np.broadcast_to(est.reason, shape))[j]))
                continue
            at = lambda x: np.ravel(np.broadcast_to(np.asarray(x, float), shape))[j]
            value = metric_value(case.metric, ttft_s=at(est.ttft_s), tpot_s=at(est.tpot_s), tpot_mid_s=at(mid),
                                 output_tokens_per_s=at(est.output_tokens_per_s), num_gpus=case.num_gpus)
            out[i] = (float(value), None) if np.isfinite(value) else (None, f"{case.metric} is undefined here")
    return out


def predict_case(case: Case, profile: Any = "default") -> tuple[float | None, str | None]:
    """Predict one case's metric in the case's unit.

    Returns
    -------
    (predicted, reason)
        ``(value, None)``, or ``(None, reason)`` when the case needs something the model
        does not cover yet (a parallelism, speculation under load...) or cannot run
        (for example, the model does not fit).
    """
    return predict_cases([case], profile)[0]
