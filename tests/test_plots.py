"""Plots: the Pareto front (hand-made points, domination properties), figures that render, and
the message when matplotlib is missing."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import inferlab
from inferlab.errors import InferlabError, UnknownNameError
from inferlab.plots import pareto_front, pareto_mask

# --- Pareto front -------------------------------------------------------------------------

#: Eight points; (1, 5) twice, so both copies are on the front (equal points do not dominate).
X = [1.0, 2.0, 3.0, 4.0, 2.0, 3.0, 1.0, 4.0]
Y = [5.0, 4.0, 4.0, 1.0, 3.0, 2.0, 5.0, 0.0]


@pytest.mark.parametrize(("maximize", "front"), [
    # (2, 4) loses to (3, 4); (2, 3), (3, 2) to (3, 4); (4, 0) to (4, 1).
    ((True, True), [0, 2, 3, 6]),
    # Smallest x with largest y: (1, 5) beats every other point.
    ((False, True), [0, 6]),
    # Largest x with smallest y: (4, 0) beats every other point.
    ((True, False), [7]),
    # Smallest of both: (1, 5), (2, 3), (3, 2), (4, 0); (2, 4) loses to (2, 3), (3, 4) to (3, 2), (4, 1) to (4, 0).
    ((False, False), [0, 4, 5, 6, 7]),
])
def test_pareto_mask_hand_made(maximize, front):
    assert np.flatnonzero(pareto_mask(X, Y, maximize)).tolist() == front


def test_pareto_mask_skips_nan_and_empty():
    assert pareto_mask([1.0, np.nan, 2.0], [1.0, 9.0, np.nan]).tolist() == [True, False, False]
    assert pareto_mask([], []).tolist() == []


def test_pareto_mask_rejects_bad_shapes():
    with pytest.raises(InferlabError, match="equal length"):
        pareto_mask([1.0, 2.0], [1.0])


def _dominates(qx, qy, px, py):
    """q dominates p: at least as good on both (larger), better on one. Broadcasts."""
    return (qx >= px) & (qy >= py) & ((qx > px) | (qy > py))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 6), st.integers(0, 6)), min_size=1, max_size=40),
       st.tuples(st.booleans(), st.booleans()))
def test_pareto_mask_domination_properties(points, maximize):
    x, y = (np.array(v, float) for v in zip(*points))
    on = pareto_mask(x, y, maximize)
    sx, sy = (x if maximize[0] else -x), (y if maximize[1] else -y)
    dom = _dominates(sx[:, None], sy[:, None], sx[None, :], sy[None, :])  # dom[q, p]: q dominates p
    assert not dom[:, on].any(), "a front point is dominated"
    assert dom[np.ix_(on, ~on)].any(axis=0).all(), "an off-front point is dominated by no front point"


def test_pareto_front_of_plain_dict_sorted_by_x_and_feasible_only():
    table = {"a": np.array([3.0, 1.0, 2.0, 5.0]), "b": np.array([1.0, 3.0, 2.0, 9.0]),
             "feasible": np.array([True, True, True, False])}
    assert pareto_front(table, "a", "b").tolist() == [1, 2, 0]
    with pytest.raises(UnknownNameError, match="did you mean 'a'"):
        pareto_front(table, "aa", "b")


@pytest.fixture(scope="module")
def table():
    return inferlab.sweep(["llama-3.1-8b"], ["h100-sxm", "l40s"], precision=["bf16", "fp8"],
                          batch_size=[1, 8, 64, 256], isl=[2048], osl=[256], engine="vllm")


def test_pareto_front_of_a_sweep_holds_the_best_per_gpu_point(table):
    front = pareto_front(table)
    best = np.nanargmax(np.where(table["feasible"], table["output_tokens_per_s_per_gpu"], np.nan))
    assert best in front and table["feasible"][front].all()
    assert np.all(np.diff(table["output_tokens_per_s_per_user"][front]) >= 0)


# --- figures ------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def est():
    return inferlab.estimate("llama-3.1-70b", "h100-sxm", tp=4, precision="fp8", isl=2048, osl=256,
                             batch_size=[8, 64], engine="trtllm")


@pytest.fixture(scope="module")
def mpl():
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    return matplotlib


@pytest.mark.parametrize("suffix", [".png", ".svg", ".jpg"])  # every format serve --plot writes
def test_write_estimate_plot(mpl, est, tmp_path, suffix):
    path = inferlab.plots.write_estimate_plot(est, tmp_path / f"roofline{suffix}")
    assert path.stat().st_size > 10_000
    if suffix == ".svg":
        text = path.read_text()
        assert "<svg" in text and "mlp_up" in text and "all_reduce_mlp" in text


def test_roofline_places_every_op_with_flops(mpl, est):
    from matplotlib.collections import PathCollection

    fig = inferlab.plots.roofline_chart(est, point=1)
    main = fig.axes[0]
    placed = sum(len(c.get_offsets()) for c in main.collections if isinstance(c, PathCollection))
    expected = sum(r["flops"] > 0 for phase in ("prefill", "decode") for r in est.op_table(phase, 1))
    assert placed == expected
    assert main.get_xscale() == "log" and main.get_yscale() == "log"
    assert "batch 64" in fig._suptitle.get_text()


def test_roofline_of_a_speculative_estimate(mpl, tmp_path):
    spec = inferlab.estimate("llama-3.1-70b", "h100-sxm", tp=4, precision="fp8", batch_size=4, engine="trtllm",
                             speculative="draft:model=llama-3.1-8b,k=4,accept=0.7")
    fig = inferlab.plots.roofline_chart(spec)
    assert "speculative decode step" in fig._suptitle.get_text()
    fig.savefig(tmp_path / "spec.png")


def test_plot_arguments_are_checked(mpl, est, tmp_path):
    with pytest.raises(InferlabError, match=r"roofline.xyz: its suffix names no image format; use one of \.png, .*\.pdf"):
        inferlab.plots.write_estimate_plot(est, tmp_path / "roofline.xyz")
    with pytest.raises(InferlabError, match="point=2 is outside"):
        inferlab.plots.roofline_chart(est, point=2)
    with pytest.raises(InferlabError, match="takes the Estimate"):
        inferlab.plots.roofline_chart({"not": "an estimate"})


def test_memory_breakdown_renders(mpl, est, tmp_path):
    fig = inferlab.plots.memory_breakdown(est, point=1)
    labels = fig.axes[0].get_legend_handles_labels()[1]
    assert any(t.startswith("weights 18.2 GB") for t in labels) and any(t.startswith("budget") for t in labels)
    fig.savefig(tmp_path / "memory.png")
    assert (tmp_path / "memory.png").stat().st_size > 5_000


def test_memory_breakdown_of_a_disaggregated_estimate(mpl):
    est = inferlab.estimate("llama-3.1-70b", "h200-sxm", precision="fp8", isl=4096, osl=256, batch_size=16,
                            disaggregation="prefill=h200x4,decode=h200x8")
    ticks = [t.get_text() for t in inferlab.plots.memory_breakdown(est).axes[0].get_yticklabels()]
    assert ticks == ["prefill GPU\nh200-sxm", "decode GPU\nh200-sxm"]


@pytest.mark.parametrize("as_dict", [False, True])
def test_pareto_plot_renders_sweep_and_dict(mpl, table, tmp_path, as_dict):
    data = table.columns if as_dict else table
    chosen = int(pareto_front(table)[0])
    fig = inferlab.plots.pareto_plot(data, chosen=chosen)
    ax = fig.axes[0]
    labels = ax.get_legend_handles_labels()[1]
    assert "Pareto front" in labels
    assert any(t.startswith("chosen: llama-3.1-8b") for t in labels)
    fig.savefig(tmp_path / "pareto.svg")
    assert (tmp_path / "pareto.svg").stat().st_size > 10_000


def test_pareto_plot_rejects_an_infeasible_choice(mpl, table):
    bad = int(np.flatnonzero(~table["feasible"])[0])
    with pytest.raises(InferlabError, match="infeasible"):
        inferlab.plots.pareto_plot(table, chosen=bad)


# --- without matplotlib -------------------------------------------------------------------

def test_missing_matplotlib_is_a_clear_error(monkeypatch, est):
    for name in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")] + ["matplotlib"]:
        monkeypatch.setitem(sys.modules, name, None)  # a None entry makes "import matplotlib..." fail
    for plot, arg in ((inferlab.plots.roofline_chart, est), (inferlab.plots.memory_breakdown, est),
                      (inferlab.plots.pareto_plot, {"output_tokens_per_s_per_user": [1.0],
                                                    "output_tokens_per_s_per_gpu": [1.0]})):
        with pytest.raises(InferlabError, match=r"needs matplotlib: pip install 'inferlab\[plot\]'"):
            plot(arg)
    assert pareto_mask([1.0, 2.0], [2.0, 1.0]).all()  # numpy only


def test_importing_plots_does_not_import_matplotlib():
    code = "import sys, inferlab.plots; print('matplotlib' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
