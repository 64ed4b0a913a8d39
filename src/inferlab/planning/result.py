"""A plan: the ranked candidates of a scenario, as a table, a dict and in words.

The columns are defined in :mod:`.candidate`; the table's legend repeats them briefly.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..results.render import significant, text_table
from .candidate import Candidate
from .operations import carried_per_replica, day_plan
from .scenario import Scenario
from .limits import SEED_OVERESTIMATE
from .search import job_s
from ..results.record import array_record

#: Ruled-out configurations the table lists with their reason (the others: to_dict()).
RULED_OUT_SHOWN = 10


def _ms(value: float, digits: int) -> str:
    return "-" if math.isnan(value) else ("sat" if math.isinf(value) else f"{value * 1e3:.{digits}f}")


def _fluid_ms(value: float, digits: int) -> str:
    return "fluid model saturated" if math.isinf(value) else f"fluid model {_ms(value, digits)} ms"


@array_record
@dataclass(frozen=True)
class Plan:
    """Ranked candidates (feasible first, by cost), with the scenario they answer."""

    scenario: Scenario
    candidates: tuple[Candidate, ...]
    #: Feasible candidates sized by the fluid model alone that could still cost less than the
    #: simulated best once simulated (the ``verify`` budget ran out first): their labels.
    unsettled: tuple[str, ...] = ()

    @property
    def feasible(self) -> tuple[Candidate, ...]:
        """Candidates that meet the SLOs within the limits, cheapest first."""
        return tuple(c for c in self.candidates if c.feasible)

    @property
    def best(self) -> Candidate | None:
        """The cheapest feasible candidate (sized by simulation when ``verify`` > 0)."""
        return self.feasible[0] if self.feasible else None

    def deployment(self, candidate: Candidate | int = 0) -> Any:
        """A candidate (by default the best one) as the :class:`~inferlab.Deployment` that
        :func:`inferlab.estimate`, :func:`inferlab.serve` and :func:`inferlab.fleet` take,
        with the scenario's engine, profile and sequence limit.

        Raises
        ------
        SpecError
            No feasible candidate, or an index past the feasible ones.
        """
        from ..errors import SpecError
        from .search import scenario_deployment

        if isinstance(candidate, int):
            if not 0 <= candidate < len(self.feasible):
                raise SpecError(f"the plan has {len(self.feasible)} feasible candidate(s); candidate {candidate} "
                                "is not one of them")
            candidate = self.feasible[candidate]
        sc = self.scenario
        return scenario_deployment(sc, candidate)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready ranking (and the winner's day, with an ``operations`` section); the
        fields are those of :class:`~inferlab.planning.candidate.Candidate`."""
        day = day_plan(self.scenario, self.best)
        return {"scenario": self.scenario.model_dump(mode="json"),
                "candidates": [dict(c.to_dict(), **({"deployment": self.deployment(c).to_dict()} if c.feasible
                                                    else {})) for c in self.candidates],
                **({"operations": day.to_dict()} if day is not None else {}),
                **({"unsettled": list(self.unsettled)} if self.unsettled else {}),
                # the offline job's cost, and every line explain() prints (the API comparison, the sizing)
                **({"job_usd": self._job_usd(self.best)} if self.best is not None and self.scenario.traffic.offline
                   else {}),
                "explanation": self.explain().splitlines()}

    def operating_table(self) -> dict[str, np.ndarray]:
        """Every operating point of every aggregated candidate that fits (one row per
        concurrency), for Pareto fronts: tokens/s per user, per GPU and per dollar-hour, whether
        the SLOs hold in the fluid model."""
        keys = ("batch_size", "output_tokens_per_s_per_user", "output_tokens_per_s_per_gpu", "output_tokens_per_usd",
                "meets_slo")
        cols: dict[str, list] = {k: [] for k in ("label", *keys, "chosen")}
        best = self.best
        for c in self.candidates:
            if "batch_size" not in c.curve:
                continue
            cols["label"] += [c.label] * len(c.curve["batch_size"])
            for key in keys:
                cols[key] += list(c.curve[key])
            cols["chosen"] += list((c is best) & (c.curve["batch_size"] == c.batch))
        return {k: np.asarray(v) for k, v in cols.items()}

    def _row(self, c: Candidate) -> list[str]:
        if self.scenario.traffic.offline:
            lat = ["-" if math.isnan(c.simulated_job_s) else _hours(c.simulated_job_s / 3600), _hours(c.fluid_job_s / 3600)]
        else:
            lat = [_ms(c.simulated_ttft_s, 0), _ms(c.fluid_ttft_s, 0), _ms(c.simulated_tpot_s, 1),
                   _ms(c.fluid_tpot_s, 1)]
        sized = "fluid" if not c.simulated else ("sim*" if c.simulated_without else "sim")
        return [c.label, str(c.replicas), str(c.gpus), f"{c.usd_per_hour:,.2f}", f"{c.usd_per_million_output:.3f}",
                *lat, f"{c.headroom:.0%}", c.binding, sized]

    def __str__(self, limit: int = 15) -> str:
        sc = self.scenario
        slo, tr = sc.slo, sc.traffic
        p = f"P{slo.percentile:g}"
        head = (f"plan '{sc.name}': {significant(tr.request_rate)} req/s, ISL ~{tr.isl.expected:.0f}, OSL ~{tr.osl.expected:.0f}"
                + (f"; SLO {p} " + ", ".join(f"{name} {bound} ms" for name, bound in (("TTFT", slo.ttft_ms),
                                                                                      ("TPOT", slo.tpot_ms)) if bound)
                   if slo.ttft_ms or slo.tpot_ms else ""))
        lat = (["job h sim", "fluid"] if tr.offline else
               [f"{p} TTFT ms sim", "fluid", f"{p} TPOT ms sim", "fluid"])
        shown = self.feasible[:limit]
        table = text_table(["configuration", "replicas", "GPUs", "$/h", "$/M out", *lat, "headroom", "binding",
                            "sized by"], [self._row(c) for c in shown], right=set(range(1, 6 + len(lat))))
        legend = ("replicas: the fewest the request-level simulation shows meeting the SLOs (sized by sim), "
                  "else the fluid model's estimate (fluid)\n"
                  + ("job h: the job's duration on those replicas, simulated and by the fluid model\n" if tr.offline
                     else f"{p} TTFT/TPOT: at those replicas, simulated (sim) and the fluid model's estimate (fluid)\n")
                  + "headroom: traffic growth those replicas absorb before "
                  + ("the deadline" if tr.offline else "an SLO") + " "
                    "is missed (sim: simulated, a lower bound); binding: what is missed first")
        if any(math.isinf(x) for c in shown for x in (c.fluid_ttft_s, c.fluid_tpot_s)):
            legend += "\nsat: the fluid model's queue does not settle at that load (the simulation decides)"
        if any(c.simulated_without for c in shown):
            kinds = sorted({k for c in shown for k in c.simulated_without})
            legend += f"\nsim*: verified without {' / '.join(kinds)} (the two-pool simulation does not model it yet)"
        out = [c for c in self.candidates if not c.feasible]
        reasons = "".join(f"\n  {c.label}: {c.reason}" for c in out[:RULED_OUT_SHOWN])
        more = f"\n  ... {len(out) - RULED_OUT_SHOWN} more (to_dict(), --json: each one's reason)" \
            if len(out) > RULED_OUT_SHOWN else ""
        named = ", ".join(self.unsettled[:3]) + (f" and {len(self.unsettled) - 3} more" if len(self.unsettled) > 3 else "")
        unsettled = (f"\nnot simulated: {named} could cost less than the best once simulated (the fluid model's "
                     f"count can be up to {SEED_OVERESTIMATE:g}x the simulated one, or more where its SLOs bind "
                     f"before its throughput; verify {sc.verify} was spent): "
                     "raise verify to size them") if self.unsettled else ""
        return (f"{head}\n{table}\n{legend}{unsettled}\n{self.counts_line()}"
                + (":" + reasons + more if out else ""))

    def counts_line(self) -> str:
        """``N feasible, M ruled out``."""
        return f"{len(self.feasible)} feasible, {len(self.candidates) - len(self.feasible)} ruled out"

    def to_frame(self):
        """One row per candidate (feasible first, cheapest first) as a pandas DataFrame."""
        from ..results.html import plan_frame

        return plan_frame(self)

    def _repr_html_(self) -> str:
        from ..results.html import plan_html

        return plan_html(self)

    def __repr__(self) -> str:
        from ..results.html import plan_repr

        return plan_repr(self)

    def explain(self) -> str:
        """Why the winner wins, against the runner-up, and what the simulation showed."""
        best = self.best
        if best is None:
            return "no configuration meets the scenario: " + "; ".join(f"{c.label}: {c.reason}"
                                                                         for c in self.candidates[:6])
        lines = [f"best: {best.label}, {best.replicas} replica(s) = {best.gpus} GPUs at ${best.usd_per_hour:,.2f}/h "
                 f"(${best.usd_per_million_output:.3f} per 1M output tokens); the binding constraint is {best.binding}"]
        offline = self.scenario.traffic.offline
        if offline:  # a job is paid for its GPU-hours: per job, not per hour
            lines.append(f"  the job: ${_usd(self._job_usd(best))} over {_hours(job_s(self.scenario, best) / 3600.0)} h, "
                         "its replicas let go when it is done")
        for c in self.feasible[1:3]:
            if offline:
                cost = self._job_usd(c)
                lines.append(f"  vs {c.label}: ${cost:,.2f} for the job{_relative(cost, self._job_usd(best))}, "
                             f"{_hours(job_s(self.scenario, c) / 3600.0)} h at ${c.usd_per_hour:,.2f}/h")
                continue
            lines.append(f"  vs {c.label}: ${c.usd_per_hour:,.2f}/h{_relative(c.usd_per_hour, best.usd_per_hour)}, "
                         f"bound by {c.binding}")
        lines += self._api_lines(best) + self._sizing_lines(best)
        day = day_plan(self.scenario, best)
        return "\n".join(lines + (day.lines() if day is not None else []))

    def _job_usd(self, c: Candidate) -> float:
        """What an offline job costs on ``c``'s replicas [USD]."""
        return c.usd_per_hour * job_s(self.scenario, c) / 3600.0

    def _sizing_lines(self, best: Candidate) -> list[str]:
        sc = self.scenario
        p = f"P{sc.slo.percentile:g}"
        if not best.simulated:
            why = ("verify: 0" if sc.verify == 0 else
                   f"verify: {sc.verify}; the configurations simulated were ruled out and this one was not simulated")
            return [f"sized by the fluid model only ({why}): {best.replicas} replica(s), each running up to "
                    f"~{best.batch:.0f} requests at once"]
        counts = ", ".join(f"{q.pd or q.replicas} {'meet' if q.meets else 'miss' + _missed_by(sc, q)}"
                           for q in sorted(best.probes, key=lambda q: q.replicas) if q.growth == 0)
        out = [f"sized by simulation: the fluid model's {best.seed_replicas} replica(s) seeded the search; "
               f"simulated at the scenario's rate, {counts}"]
        if sc.traffic.offline:
            out.append(f"simulated job: {_hours(best.simulated_job_s / 3600)} h of the {sc.traffic.deadline_h:g} h "
                       f"deadline (fluid model: {_hours(best.fluid_job_s / 3600)} h)")
        else:
            out.append(f"at {best.replicas} replica(s): {p} TTFT {_ms(best.simulated_ttft_s, 0)}"
                       f"{_se(best.simulated_ttft_se_s, 0)} ms simulated ({_fluid_ms(best.fluid_ttft_s, 0)}), "
                       f"{p} TPOT {_ms(best.simulated_tpot_s, 1)}{_se(best.simulated_tpot_se_s, 1)} ms "
                       f"simulated ({_fluid_ms(best.fluid_tpot_s, 1)}); the SLOs hold up to "
                       f"+{best.headroom:.0%} traffic")
            out += _unsure_lines(sc, best)
        if best.simulated_without:
            out.append(f"verified without {' and '.join(best.simulated_without)}: the two-pool (disaggregated) "
                       "simulation does not model it yet, so the count is that of plain serving")
        return out

    def _api_lines(self, best: Candidate) -> list[str]:
        api = self.scenario.api_price
        if api is None:
            return []
        from ..economics import api_usd_per_request, api_vs_dedicated

        tr = self.scenario.traffic
        if best.disaggregated and not tr.offline:  # two kinds of replica: no one replica's break-even
            api_h = float(api_usd_per_request(api.input_per_million, api.output_per_million, tr.isl.expected,
                                              tr.osl.expected)) * tr.request_rate * 3600.0
            return [f"vs the API at ${api.input_per_million:g}/${api.output_per_million:g} per 1M in/out tokens: "
                    f"${api_h:,.2f}/h for this traffic, against ${best.usd_per_hour:,.2f}/h for these pools (no "
                    "break-even rate: the prefill and decode replicas carry different shares of a request)"]
        if tr.offline:  # a job's replicas are let go when it is done: the job's cost on either side
            api_job = float(api_usd_per_request(api.input_per_million, api.output_per_million, tr.isl.expected,
                                                tr.osl.expected)) * tr.requests
            return [f"vs the API at ${api.input_per_million:g}/${api.output_per_million:g} per 1M in/out tokens: "
                    f"${api_job:,.2f} for the job's {tr.requests:,} requests, against ${self._job_usd(best):,.2f} "
                    "on these replicas"]
        per_replica = carried_per_replica(best, tr.request_rate)
        be = api_vs_dedicated(usd_per_million_input=api.input_per_million,
                              usd_per_million_output=api.output_per_million, isl=tr.isl.expected,
                              osl=tr.osl.expected, usd_per_replica_hour=best.usd_per_hour / best.replicas,
                              requests_per_s_per_replica=per_replica)
        api_h = float(be.api_usd_per_request) * tr.request_rate * 3600.0
        head = (f"vs the API at ${api.input_per_million:g}/${api.output_per_million:g} per 1M in/out tokens: "
                f"${api_h:,.2f}/h for this traffic; ")
        if api_h == 0.0:
            return [head + "the API costs nothing at this price: no dedicated replica pays off"]
        if float(be.break_even_utilization) > 1.0:  # a replica at its capacity still bills more per request
            return [head + f"these replicas never pay off at this price: one would need to serve "
                           f"{float(be.break_even_utilization) * per_replica:.2f} req/s, "
                           f"{float(be.break_even_utilization):.0%} of the {per_replica:.2f} it sustains"]
        return [head + f"dedicated replicas pay off from {float(be.break_even_request_rate):.2f} req/s "
                       f"(each replica {float(be.break_even_utilization):.0%} busy)"]


def _relative(cost: float, best: float) -> str:
    """`` (+12%)`` against the best's cost; nothing to compare against a free best."""
    return f" ({cost / best - 1:+.0%})" if best > 0 else ""


def _se(se_s: float, digits: int) -> str:
    """`` ± x`` of a standard error in ms (empty where there is none)."""
    return f" \u00b1 {se_s * 1e3:.{digits}f}" if math.isfinite(se_s) else ""


def _missed_by(sc: Any, probe: Any) -> str:
    """`` (P99 TPOT 52.1 ± 1.6 ms)``: what a probe read of the objectives it missed."""
    p = f"P{sc.slo.percentile:g}"
    parts = [f"{p} {name} {_ms(value, digits)}{_se(se, digits)} ms"
             for name, value, se, digits in (("TTFT", probe.ttft_s, probe.ttft_se_s, 0),
                                             ("TPOT", probe.tpot_s, probe.tpot_se_s, 1)) if name in probe.missed]
    if probe.missed.endswith("throughput") and not math.isfinite(probe.ttft_s):  # decided before a run: the rate
        pools = probe.missed.removesuffix("throughput").split()  # alone (a disaggregated pool's: "decode", or both)
        one = " or ".join(f"a {p} replica" for p in pools if p != "and") or "a replica"
        parts = [f"more arrives than {one} completes with every request queued"]
    return f" ({', '.join(parts)})" if parts else ""


def _unsure_lines(sc: Any, best: Candidate) -> list[str]:
    """A line for each objective the chosen count meets by less than two standard errors: a
    longer run may read it over (and the count one short)."""
    out = []
    for name, value, se, bound in (("TTFT", best.simulated_ttft_s, best.simulated_ttft_se_s, sc.slo.ttft_ms),
                                   ("TPOT", best.simulated_tpot_s, best.simulated_tpot_se_s, sc.slo.tpot_ms)):
        if bound and math.isfinite(se) and se > 0 and bound / 1e3 - value < 2.0 * se:
            z = (bound / 1e3 - value) / se
            out.append(f"  {name} meets its {bound:g} ms by {z:.1f} standard errors of the simulation: a longer run "
                       f"may read it over (one replica more: {best.replicas + 1})")
    fewer = [q for q in best.probes if q.growth == 0 and q.replicas == best.replicas - 1 and not q.meets
             and q.missed and "throughput" not in q.missed]
    for q in fewer[:1]:
        over = [(value - bound / 1e3) / se for name, value, se, bound in
                (("TTFT", q.ttft_s, q.ttft_se_s, sc.slo.ttft_ms), ("TPOT", q.tpot_s, q.tpot_se_s, sc.slo.tpot_ms))
                if name in q.missed and bound and math.isfinite(se) and se > 0]
        if over and max(over) < 2.0:
            out.append(f"  {q.replicas} replica(s) miss by {max(over):.1f} standard errors of the simulation: at the "
                       f"objective within its noise; {best.replicas} meet with a margin")
    return out


def _usd(x: float) -> str:
    """Dollars with cents, or two significant digits below a cent (0.0024, not 0.00)."""
    return f"{x:.2g}" if 0 < abs(x) < 0.01 else f"{x:,.2f}"


def _hours(h: float) -> str:
    """Hours for the table: one decimal, two significant digits below one hour (0.0042, not 0.0)."""
    return f"{h:.2g}" if 0 < abs(h) < 1 else f"{h:.1f}"

