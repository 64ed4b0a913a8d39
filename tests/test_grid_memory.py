"""A grid too big for memory is refused in one line before it is evaluated, saying how many
points it has, the limit, about how much memory it would take and what to do instead; a sweep
that runs peaks at its table."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

import inferlab
from inferlab import SpecError
from inferlab.cli.main import main


def test_a_sweep_too_big_for_memory_is_refused_with_its_size_and_what_to_do():
    # 10^4 batches x 10^4 ISLs x 2 OSLs = 2 x 10^8 points at 600 B a point = 1.2e11 B = 111.8 GiB; the
    # limit is 4 GiB / 600 B = 4,294,967,296 / 600 = 7,158,278 points.
    with pytest.raises(SpecError) as err:
        inferlab.sweep("llama-3.1-8b", "h100-sxm", batch_size=np.arange(1, 10_001), isl=np.arange(1, 10_001),
                       osl=[128, 256])
    msg = str(err.value)
    assert msg.startswith("the sweep has 200,000,000 points, which would take about 111.8 GiB of memory")
    assert "at most 7,158,278 points (4 GiB) per call" in msg
    assert "split the sweep into several calls" in msg


def test_the_sweep_limit_counts_every_configuration():
    # 2 models x 2 GPUs x 2,000 x 1,000 = 8,000,000 points > 7,158,278
    with pytest.raises(SpecError, match=r"the sweep has 8,000,000 points, which would take about 4\.5 GiB"):
        inferlab.sweep(["llama-3.1-8b", "qwen3-8b"], ["h100-sxm", "h200-sxm"], batch_size=np.arange(1, 2_001),
                       isl=np.arange(1, 1_001), osl=[128])


def test_an_estimate_grid_too_big_for_memory_is_refused_and_pointed_to_sweep():
    # estimate() evaluates its grid at once, 3,000 B a point: 1,500 x 1,000 = 1,500,000 points
    # = 4.5e9 B = 4.2 GiB; the limit is 4,294,967,296 / 3,000 = 1,431,655 points.
    with pytest.raises(SpecError) as err:
        inferlab.estimate("llama-3.1-8b", "h100-sxm", batch_size=np.arange(1, 1_501)[:, None],
                          isl=np.arange(1, 1_001), osl=128)
    msg = str(err.value)
    assert msg.startswith("the grid has 1,500,000 points, which would take about 4.2 GiB of memory")
    assert "at most 1,431,655 points (4 GiB) per call" in msg and "inferlab.sweep" in msg


def test_a_disaggregated_grid_too_big_for_memory_is_not_pointed_to_sweep():
    # 1,200 prefill x 1,200 decode batches = 1,440,000 points at 3,000 B: past 1,431,655; sweep
    # takes one pool, so the advice is smaller grids
    from inferlab.phases.disaggregated import estimate_disaggregated

    with pytest.raises(SpecError) as err:
        estimate_disaggregated("llama-3.1-8b", "prefill=h100-sxmx1,decode=h100-sxmx1",
                               prefill_batch=np.arange(1, 1_201), decode_batch=np.arange(1, 1_201)[:, None])
    msg = str(err.value)
    assert msg.startswith("the grid has 1,440,000 points") and "inferlab.sweep does not take two pools" in msg


def test_the_cli_says_so_in_one_line(capsys):
    code = main(["estimate", "llama-3.1-8b", "h100-sxm", "--batch", ",".join(map(str, range(1, 1_201))),
                 "--isl", ",".join(map(str, range(1, 1_201)))])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1
    assert "1,440,000 points" in err and "at most 1,431,655 points" in err


def test_a_sweep_peaks_at_its_table():
    # Every point of this 100 x 100 x 100 grid runs, so its row is 11 float64 columns (3
    # inputs, 8 metrics) + 4 label and 1 reason references of 8 B + 1 B of feasible = 129 B;
    # the evaluation runs in blocks of 16,384 rows. The table is neither copied when it is
    # made nor joined beside its parts, so the peak stays within 1.25 x 129 = 161 B a point.
    grid = {"batch_size": np.arange(1, 101), "isl": np.arange(1, 101) * 40, "osl": np.arange(1, 101) * 20}
    inferlab.sweep("llama-3.1-70b", "h100-sxm", tp=4, precision="fp8", batch_size=[1, 2], isl=[64], osl=[8])
    tracemalloc.start()
    try:
        t = inferlab.sweep("llama-3.1-70b", "h100-sxm", tp=4, precision="fp8", **grid)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert len(t) == 1_000_000 and t["feasible"].all()
    assert peak / len(t) <= 161


def test_one_axis_longer_than_any_grid_that_fits_is_refused_saying_why():
    with pytest.raises(SpecError, match=r"^isl has 10,000,001 values; at most 10,000,000 per call, as a grid of more "
                                        r"points takes more than the 4 GiB a call may use: give fewer values$"):
        inferlab.sweep("llama-3.1-8b", "h100-sxm", isl=np.arange(1, 10_000_002))
