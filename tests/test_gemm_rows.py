"""A GEMM's rows inside an engine's step (issue 10, the physics-property sweep).

The rows of a GEMM are independent: whatever tactic an engine picks, it could run ``M`` rows as
two launches of ``M / 2`` (or as launches of one 128-row tile each), reading the weights once
per launch. So inside a step doubling the rows never more than doubles a GEMM's time, and more
rows never take less. Before :func:`inferlab.core.timing.in_step_terms` took the cheaper of
those splits, the blend of the small-M tactic (up to a tile, at the format's own peak share)
into the fitted large-tile curve (whose ``m_half`` of ~110-170 rows was fitted on the H100,
where streaming the weights dominates) made a compute-poor GPU pay more per row past one tile:
on the H20 (296 dense FP8 TFLOPS next to 4.0 TB/s, a ridge of 74 FLOP/B = 37 rows of FP8
weights) an FP8 GEMM of 256 rows cost 3.2x one of 128, and Falcon-180B's FP8 decode on 4x H20
took 219 ms a step at batch 256 against 74 ms at 128.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, reject, settings, strategies as st

from inferlab import estimate
from inferlab.calibration.profile import hardware_family, load_profile
from inferlab.core.ops import Gemm
from inferlab.core.timing import time_op
from inferlab.errors import SpecError
from inferlab.specs.catalog import hardware_ids, load_hardware

#: kernel, compute precision, weight and activation bytes per element
KERNELS = (("fp8", "fp8", 1.0, 1.0), ("fp8_block", "fp8", 1.0, 1.0), ("nvfp4", "fp4", 0.5625, 0.5625),
           ("mxfp4", "fp4", 0.53125, 0.53125), ("int4_wo", "bf16", 0.5, 2.0), ("int8_wo", "bf16", 1.0, 2.0),
           ("int8_sq", "int8", 1.0, 1.0))
ENGINES = ("generic", "vllm", "trtllm", "sglang")


def _gemm_s(hw_id, engine, kernel, rows, n, k, copies, standalone=False):
    """In-step (or standalone) time of one GEMM at each of ``rows`` rows per weight [s]."""
    name, precision, weight_bytes, act_bytes = kernel
    hw = load_hardware(hw_id)
    profile = load_profile("default", engine, hw_id, hardware_family(hw.architecture))
    op = Gemm(name="g", m=np.asarray(rows, float) * copies, n=float(n), k=float(k), weight_copies=float(copies),
              weight_bytes_per_element=weight_bytes, act_bytes_per_element=act_bytes, precision=precision,
              kernel=name)
    return np.asarray(time_op(op, hw, profile, "decode", standalone=standalone).time_s, float)


@settings(max_examples=300, deadline=None)
@given(hw_id=st.sampled_from(hardware_ids()), engine=st.sampled_from(ENGINES), kernel=st.sampled_from(KERNELS),
       n=st.integers(256, 65536), k=st.integers(256, 65536), copies=st.sampled_from([1, 8, 32]),
       rows=st.floats(1.0, 8192.0))
def test_doubling_the_rows_never_more_than_doubles_a_gemm(hw_id, engine, kernel, n, k, copies, rows):
    rows = np.array([rows, 2.0 * rows, rows + 1.0])
    try:
        one, double, more = _gemm_s(hw_id, engine, kernel, rows, n, k, copies)
    except SpecError:  # the GPU has no tensor throughput at that precision (FP8 on an A100)
        reject()
    assert double <= 2.0 * one * (1.0 + 1e-9)
    assert more >= one * (1.0 - 1e-9)
    # an engine's tactic is never slower than the op-level benchmark's kernel at that shape, unless that
    # kernel's curve runs a weight-only GEMM faster than BF16 at many rows, which a step does not: then
    # never slower than the BF16 GEMM of the same shape in a step (BF16 math on wider weights)
    standalone = _gemm_s(hw_id, engine, kernel, rows[:1], n, k, copies, standalone=True)[0]
    if kernel[0].endswith("_wo"):
        standalone = max(standalone, _gemm_s(hw_id, engine, ("bf16", "bf16", 2.0, 2.0), rows[:1], n, k, copies)[0])
    assert one <= standalone * (1.0 + 1e-9)


def test_the_h20_fp8_gemm_past_one_tile_is_no_dearer_per_row():
    """Falcon-180B's tp4 MLP slice (14,848 x 14,848) in FP8 on the H20: at 128 rows the small-M
    tactic is compute-bound (2 x 128 FLOP per weight byte against a ridge of 74), so 256 rows are
    at most two such launches, and 1,024 at most eight."""
    t = _gemm_s("h20", "vllm", KERNELS[0], [128.0, 256.0, 1024.0], 14848, 14848, 1)
    assert t[1] <= 2.0 * t[0] * (1.0 + 1e-9)
    assert t[2] <= 8.0 * t[0] * (1.0 + 1e-9)


def test_falcon_180b_on_four_h20_decodes_256_sequences_in_no_more_than_two_steps_of_128():
    est = estimate("falcon-180b", "h20", num_gpus=4, tp=4, precision="fp8", engine="vllm",
                   batch_size=[64, 128, 256], isl=1024, osl=256)
    tpot = est.tpot.to("ms").magnitude
    assert tpot[2] <= 2.0 * tpot[1]  # was 219 against 74 ms
    assert tpot[1] <= 2.0 * tpot[0]


@pytest.mark.parametrize("engine", ["trtllm", "vllm"])
def test_h100_fp8_at_many_rows_keeps_the_op_rows_kernel(engine):
    """Where the op rows measured the kernel compute-bound (the H100 at 1,024+ rows, 0.62-0.66 of
    the 1,979 dense FP8 TFLOPS in TensorRT-LLM's rows), splitting into tiles reads the weights
    once per tile and buys nothing: the step keeps the fitted curve's time within its fixed cost."""
    rows = [1024.0, 4096.0]
    in_step = _gemm_s("h100-sxm", engine, KERNELS[0], rows, 14848, 14848, 1)
    alone = _gemm_s("h100-sxm", engine, KERNELS[0], rows, 14848, 14848, 1, standalone=True)
    assert np.all(in_step >= 0.95 * alone)


@settings(max_examples=100, deadline=None)
@given(hw_id=st.sampled_from(("h20", "h100-sxm", "b200", "l40s", "a100-sxm-80gb")), kernel=st.sampled_from(KERNELS),
       rows=st.floats(1.0, 16384.0))
def test_a_gemm_times_the_same_alone_and_in_a_grid(hw_id, kernel, rows):
    """Which launches a GEMM may split into is each row count's own: a point of a sweep (or of a
    serving simulation's step table, 1 to 16,384 tokens) takes as long as the same point alone."""
    grid = np.unique(np.concatenate([np.geomspace(1.0, 16384.0, 40), [rows]]))
    try:
        alone = _gemm_s(hw_id, "vllm", kernel, [rows], 5120, 8192, 1)[0]
    except SpecError:
        reject()
    in_grid = _gemm_s(hw_id, "vllm", kernel, grid, 5120, 8192, 1)[np.searchsorted(grid, rows)]
    assert in_grid == pytest.approx(alone, rel=1e-12)
