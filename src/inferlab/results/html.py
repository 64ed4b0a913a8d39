"""Results in Jupyter: HTML tables (``_repr_html_``) and pandas frames (``to_frame``).

Each result class keeps its text form (``__str__``); this module turns the same rows into an
HTML table with the text's first line as caption, and into a DataFrame whose columns are in
SI units (seconds, tokens/s, USD) with the unit in the name (``ttft_s``). pandas is the
optional ``frames`` extra and is imported only when a frame is asked for.
"""

from __future__ import annotations

import html
import math
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from ..planning.result import Plan
    from ..serving.curve import LoadCurve
    from ..serving.result import ServeResult
    from ..phases.sweep import SweepResult

#: Inline style of every table: right-aligned numbers, a caption left-aligned as a title.
_STYLE = "border-collapse:collapse;font-variant-numeric:tabular-nums"


def html_table(headers: list[str], rows: list[list[str]], caption: str = "", notes: list[str] | None = None) -> str:
    """An HTML table of text cells, escaped; ``notes`` follow it as lines of small text."""
    esc = html.escape
    head = "".join(f"<th>{esc(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td style='text-align:right'>{esc(c)}</td>" for c in r) + "</tr>"
                   for r in rows)
    cap = f"<caption style='text-align:left;font-weight:bold'>{esc(caption)}</caption>" if caption else ""
    tail = "".join(f"<div style='font-size:smaller'>{esc(n)}</div>" for n in notes or [])
    return f"<div><table style='{_STYLE}'>{cap}<tr>{head}</tr>{body}</table>{tail}</div>"


def _pandas():
    try:
        import pandas as pd
    except ImportError:  # pandas is the optional "frames" extra
        from ..errors import InferlabError

        raise InferlabError("to_frame() needs pandas: pip install 'inferlab[frames]'") from None
    return pd


def _ms(seconds: float, digits: int = 1) -> str:
    return f"{seconds * 1e3:.{digits}f}" if math.isfinite(seconds) else "-"


# --- ServeResult -------------------------------------------------------------------------
def serve_result_html(result: ServeResult) -> str:
    """Latency percentiles [ms] of a serving run, throughput and technique lines below."""
    s = result.summary()
    rows = [[name, *(_ms(s[name][k]) for k in ("mean", "p50", "p90", "p99"))]
            for name in ("queue", "ttft", "tpot", "itl", "e2e")]
    lines = str(result).splitlines()
    tail = [line for line in lines if line.startswith(("throughput", "speculative", "prefix"))]
    return html_table(["ms", "mean", "P50", "P90", "P99"], rows, lines[0], tail)


def serve_result_frame(result: ServeResult):
    """One row per simulated request: arrival, lengths and latencies [s]."""
    pd = _pandas()
    t = result.trace
    return pd.DataFrame({"arrival_s": t.arrival, "isl": t.isl, "osl": t.osl, "queue_s": result.queue_s,
                         "ttft_s": result.ttft_s, "tpot_s": result.tpot_s, "e2e_s": result.e2e_s})


def serve_result_repr(result: ServeResult) -> str:
    """``<ServeResult model on GPUs ...; N requests, load: TTFT, TPOT, tok/s>``, one line."""
    s = result.summary()
    return (f"<ServeResult {str(result).splitlines()[0]}: mean TTFT {_ms(s['ttft']['mean'])} ms, "
            f"TPOT {_ms(s['tpot']['mean'], 2)} ms, {result.output_tokens_per_s:,.0f} tok/s>")


# --- LoadCurve ---------------------------------------------------------------------------
def load_curve_html(curve: LoadCurve) -> str:
    """The curve's text table as HTML, the knee's row marked."""
    lines = str(curve).splitlines()
    table = [line for line in lines[2:-1] if line.strip()]
    headers = [*_split_cells(table[0]), ""]  # the last column marks the knee
    rows = [_split_cells(line, len(headers)) for line in table[2:]]
    return html_table(headers, rows, lines[0] + " (latencies in ms)", [lines[-1]])


def _split_cells(line: str, n: int | None = None) -> list[str]:
    """Cells of a text-table line (columns are separated by two spaces or more)."""
    import re

    cells = [c for c in re.split(r"\s{2,}", line.strip(), maxsplit=max((n or 0) - 1, 0)) if c]
    return cells + [""] * ((n or 0) - len(cells))


def load_curve_frame(curve: LoadCurve):
    """One row per load point (:meth:`LoadCurve.rows`)."""
    return _pandas().DataFrame(curve.rows())


def load_curve_repr(curve: LoadCurve) -> str:
    """One line: the deployment, the loads and the knee."""
    first = str(curve.results[0]).splitlines()[0].rsplit(";", 1)[0]
    knee = "none within the sweep" if curve.knee_load is None else f"{curve.knee_load:g}"
    loads = ", ".join(f"{x:g}" for x in curve.loads)
    return f"<LoadCurve {first}; {curve.kind} {loads}; knee {knee}>"


# --- Plan --------------------------------------------------------------------------------
def plan_html(plan: Plan, limit: int = 15) -> str:
    """The plan's ranking as HTML: the feasible candidates, cheapest first."""
    text = plan.__str__(limit)
    lines = text.splitlines()
    headers = _split_cells(lines[1])
    rows = [plan._row(c) for c in plan.feasible[:limit]]
    return html_table(headers, rows, lines[0], [plan.counts_line()])


def plan_frame(plan: Plan):
    """One row per candidate (feasible first): the fields of :meth:`Candidate.to_dict`
    without the probes."""
    rows = [{k: v for k, v in c.to_dict().items() if k != "probes"} for c in plan.candidates]
    for row in rows:
        row["simulated_without"] = ", ".join(row["simulated_without"])
    return _pandas().DataFrame(rows)


def plan_repr(plan: Plan) -> str:
    """One line: the scenario, the count of feasible candidates and the best."""
    best = plan.best
    who = "none feasible" if best is None else (f"best {best.label}, {best.gpus} GPUs at "
                                                f"${best.usd_per_hour:,.2f}/h")
    return f"<Plan '{plan.scenario.name}': {len(plan.feasible)} of {len(plan.candidates)} feasible; {who}>"


# --- SweepResult -------------------------------------------------------------------------
def sweep_html(table: SweepResult, limit: int = 20) -> str:
    """The sweep's text table as HTML (the first ``limit`` rows)."""
    lines = table.__str__(limit).splitlines()
    headers = _split_cells(lines[0])
    body = [line for line in lines[2:] if line and not line.startswith("...")]
    rows = [_split_cells(line, len(headers)) for line in body]
    notes = [line for line in lines[2:] if line.startswith("...")]
    return html_table(headers, rows, f"sweep: {len(table)} points", notes)


def sweep_repr(table: SweepResult) -> str:
    """One line: the points and how many run."""
    ok = int(np.sum(table.columns["feasible"]))
    return f"<SweepResult {len(table)} points, {ok} feasible; columns {', '.join(list(table.columns)[:6])}, ...>"
