"""A cascade: every request goes to a small model first; a share of the answers is judged
insufficient and the request is sent again, whole, to a large model's fleet.

The large fleet's traffic is the small fleet's escalated completions, so the two fleets are
simulated one after the other on the same clock (nothing flows back from the large one).
An escalated request's latency counts from its first arrival: its TTFT is the large
model's first token less the original send time.

References
----------
.. [1] Chen, Zaharia and Zou, "FrugalGPT: How to Use Large Language Models While Reducing
   Cost and Improving Performance", 2023, sec. 3 (LLM cascade with a scorer).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any, Callable

import numpy as np

from ..checks import real
from ..economics._common import fmt
from ..engines.common import known_model
from ..errors import InferlabError, SpecError, did_you_mean, placed
from ..inputs.deployment import Deployment
from ..results.render import share_text
from .api import fleet, fleet_of
from .result import FleetResult
from .simulation import OK
from .traffic import Requests, plain
from ..results.record import array_record

_CASCADE_KEYS = ("model", "hardware", "tp", "engine", "precision", "share", "replicas", "autoscaler", "router",
                 "admission", "startup", "failures", "pricing", "allow_long_context")


@array_record
@dataclass(frozen=True)
class CascadeResult:
    """The small model's fleet, the large model's, and the escalated requests' end-to-end TTFT."""

    small: FleetResult
    large: FleetResult
    share: float
    escalated_ttft: np.ndarray

    @property
    def usd(self) -> float:
        return self.small.usd + self.large.usd

    def explain(self) -> str:
        p99 = float(np.percentile(self.escalated_ttft, 99)) if len(self.escalated_ttft) else math.nan
        return (f"[small model]\n{self.small.explain()}\n\n[large model, {self.share:.0%} escalated]\n"
                f"{self.large.explain()}\n\nescalated requests: P99 TTFT end to end {fmt(p99 * 1e3)} ms; "
                f"cascade cost {fmt(self.usd)} USD")

    def to_dict(self) -> dict[str, Any]:
        p99 = float(np.percentile(self.escalated_ttft, 99)) if len(self.escalated_ttft) else None
        return {"small": self.small.to_dict(), "large": self.large.to_dict(), "share": self.share, "usd": self.usd,
                "escalated_p99_ttft_s": p99}

    def __str__(self) -> str:
        return f"{self.small}\n{self.large}"

    def _repr_html_(self) -> str:  # both fleets' headlines and the reading, as the text has them
        import html

        return f"<pre><b>{html.escape(str(self))}</b>\n\n{html.escape(self.explain())}</pre>"

    def plot(self, path: str | None = None) -> Any:
        """Both fleets over time, one line each, and their spend added up (see
        :meth:`FleetResult.plot`)."""
        from .plot import plot_fleets

        title = (f"{self.small.name} with a cascade ({self.share:.0%} escalated): {self.usd:,.0f} USD, "
                 f"goodput {share_text(self.small.goodput())} (small), {share_text(self.large.goodput())} (large)")
        return plot_fleets([("small model", self.small), ("large model", self.large)], title, path)


def escalated(small: FleetResult, share: float, seed: int) -> tuple[Requests, np.ndarray]:
    """The requests the large model gets: a ``share`` of the small model's served ones, sent
    when their small answer is complete; and their original send times [s]."""
    rng = np.random.default_rng([seed, 0xCA5C])
    served = np.flatnonzero(small.status == OK)
    pick = np.sort(served[rng.random(len(served)) < share])
    order = pick[np.argsort(small.finish[pick], kind="stable")]
    return plain(small.finish[order], small.isl[order], small.osl[order]), small.arrival[order]


def run_scenario(kwargs: dict[str, Any], progress: Callable[[float], None] | None = None) -> Any:
    """:func:`~.api.fleet` on a scenario's settings, with its cascade when it has one."""
    kwargs = dict(kwargs)
    if "pools" in kwargs:
        return fleet_of(progress=progress, **kwargs)
    spec = kwargs.pop("cascade", None)
    notes = tuple(kwargs.pop("notes", ()))  # how the scenario was read (a planning one's plan)
    small_dep = kwargs.get("model")
    share = large_kwargs = None
    if spec is not None:  # checked, and both replicas built once without requests, before either fleet runs:
        # the small fleet's first, so that an error in the settings both share is the fleet's, not the cascade's
        share, large_kwargs = _checked(spec, small_dep), _large_kwargs(kwargs, spec)
        none = plain(np.zeros(0), np.zeros(0), np.zeros(0))
        fleet(requests=none, **{**{k: v for k, v in kwargs.items() if k not in ("traffic", "trace")}, "horizon_s": 1.0})
        _large(none, {**large_kwargs, "horizon_s": 1.0})
    small = fleet(progress=progress, **kwargs)
    if notes:
        small = replace(small, notes=(*notes, *small.notes))
    if spec is None:
        return small
    requests, first_sent = escalated(small, share, kwargs.get("seed", 0))
    large = _large(requests, large_kwargs)
    late = int(np.count_nonzero(requests.arrival >= large.horizon_s))
    if late:
        large = replace(large, notes=(*large.notes, f"{late:,} escalated requests whose small-model answer ended after "
                                      "the horizon are not sent to the large model (nor counted in its goodput)"))
    ok = large.status == OK
    return CascadeResult(small, large, share, large.first_token[ok] - first_sent[ok])


def _large_kwargs(kwargs: dict[str, Any], spec: dict[str, Any]) -> dict[str, Any]:
    """The large fleet's settings: it shares the clock and the operations policies, not the small
    one's size or prices; it runs on the small one's GPUs and engine unless told."""
    large_kwargs = {k: v for k, v in kwargs.items()
                    if k in ("horizon_s", "seed", "ttft_slo_s", "tpot_slo_s", "router", "admission", "startup", "failures",
                             "hardware", "engine", "allow_long_context")}
    small_dep = kwargs.get("model")
    if isinstance(small_dep, Deployment):
        large_kwargs.update({"hardware": small_dep.hardware, "engine": small_dep.engine.name,
                             "allow_long_context": small_dep.allow_long_context})
    large_kwargs.update({k: v for k, v in spec.items() if k != "share"})
    return large_kwargs


def _large(requests: Requests, large_kwargs: dict[str, Any]) -> FleetResult:
    """The large model's fleet on ``requests``; an error it raises says it is the cascade's."""
    try:
        return fleet(requests=requests, **large_kwargs)
    except InferlabError as e:  # (an unknown name's error is a KeyError: its text is args[0])
        raise placed(e, f"fleet.cascade ({large_kwargs.get('model')})") from None


def _checked(spec: Any, small_dep: Any) -> float:
    """The cascade mapping's share, the mapping checked: its keys, and a large model other than
    the fleet's own (the same model in another format may be escalated to: its answers differ)."""
    if not isinstance(spec, dict) or "model" not in spec or "share" not in spec:
        raise SpecError("fleet.cascade: give a mapping with model and share (e.g. {model: llama-3.1-70b, tp: 4, "
                        "share: 0.2})")
    unknown = sorted(set(spec) - set(_CASCADE_KEYS))
    if unknown:
        raise SpecError(f"fleet.cascade: unknown key {unknown[0]!r}{did_you_mean(unknown[0], _CASCADE_KEYS)} "
                        f"(allowed: {', '.join(_CASCADE_KEYS)})")
    share = real("fleet.cascade.share (the share of answers escalated)", spec["share"], minimum=0.0, maximum=1.0)
    small_id = _model_id(small_dep.model if isinstance(small_dep, Deployment) else small_dep)
    if small_id is not None and small_id == _model_id(spec["model"]) and "precision" not in spec:
        raise SpecError(f"fleet.cascade: model {spec['model']!r} is the fleet's own model ({small_id}) in its own "
                        "format; a cascade escalates to a model whose answers differ: name another model (or "
                        "another precision), or drop cascade")
    return share


def _model_id(name: Any) -> str | None:
    """The catalog id ``name`` reads as (an alias or a config.json path too); None where it
    names no model (the fleet itself then says why)."""
    spec = known_model(name)
    return spec.id if spec is not None else None


__all__ = ["CascadeResult", "escalated", "run_scenario"]
