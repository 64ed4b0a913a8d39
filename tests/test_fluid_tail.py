"""The fluid model's TPOT percentile under mixed prefill: a request's decode as an M/G/1 busy
period stretched by the prompts that arrive meanwhile (planning.fluid.tpot_percentile_s)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from inferlab.inputs.workload import Lengths
from inferlab.planning.fluid import OperatingPoints, tpot_percentile_s


def _points(d: float, x: float) -> OperatingPoints:
    one = np.array([1.0])
    return OperatingPoints(one, one * x / 0.1, np.array([d / (1.0 - x)]), one, np.array([x]))


def test_length_moments_by_hand():
    assert Lengths("fixed", value=300).second_moment_ratio == 1.0
    # lognormal: E[X^2] / E[X]^2 = exp(sigma^2)
    assert Lengths("lognormal", mean=1500, sigma=0.6).second_moment_ratio == pytest.approx(np.exp(0.36))
    # uniform over 1, 2, 3: mean 2, variance (3^2 - 1) / 12 = 2/3, ratio 1 + (2/3) / 4
    assert Lengths("uniform", low=1, high=3).second_moment_ratio == pytest.approx(1.0 + 2.0 / 3.0 / 4.0)
    assert Lengths("empirical", values=(1, 3)).second_moment_ratio == pytest.approx(5.0 / 4.0)
    # the median of a lognormal of mean m is m exp(-sigma^2 / 2)
    assert Lengths("lognormal", mean=300, sigma=0.5).quantiles(np.array([0.5]))[0] == pytest.approx(
        300 * np.exp(-0.125))
    assert list(Lengths("uniform", low=100, high=200).quantiles(np.array([0.25, 0.75]))) == [125.0, 175.0]


def test_a_fixed_length_percentile_by_hand():
    # d = 20 ms decode steps, prefill share x = 0.4 (TPOT 33.33 ms), prompts of 100 ms alike,
    # 300 decode steps: the stretch per token has mean d x / (1 - x) = 13.333 ms and variance
    # d x E[P] / ((1 - x)^3 n) = 0.02 x 0.4 x 0.1 / (0.216 x 300) = 1.2346e-5 s^2 (sd 3.514 ms); as a
    # gamma variable, shape 13.333^2 / 12.346 = 14.40, scale 0.9259 ms: P99 = 20 + 0.9259 x 24.66
    # (the gamma(14.40) quantile) = 42.83 ms (a normal one would say 33.33 + 2.3263 x 3.514 = 41.51)
    from scipy.stats import gamma

    shape, scale = (13.3333e-3) ** 2 / 1.23457e-5, 1.23457e-5 / 13.3333e-3
    assert gamma.ppf(0.99, shape) == pytest.approx(24.66, abs=0.02)
    p99 = tpot_percentile_s(_points(0.02, 0.4), 0.1, 1.0, np.array([301.0]), 99.0)
    assert float(p99[0]) == pytest.approx(0.02 + scale * gamma.ppf(0.99, shape), rel=1e-4)
    # no prefill mixed in: every request runs at the decode step
    assert float(tpot_percentile_s(_points(0.02, 0.0), 0.1, 1.0, np.array([301.0]), 99.0)[0]) == pytest.approx(0.02)


@settings(max_examples=40, deadline=None)
@given(x=st.floats(0.05, 0.8), osl=st.integers(2, 2000), spread=st.floats(1.0, 3.0), p=st.floats(1.0, 99.9))
def test_a_percentile_is_never_faster_than_a_decode_step_and_grows_with_the_percentile(x, osl, spread, p):
    # (a larger spread or a shorter answer is not always a slower percentile: the stretch is skewed,
    # so a wider one can put its median, and at extreme skew even its P99, lower)
    pts = _points(0.02, x)
    lengths = np.array([float(osl), 3.0 * osl])
    base = float(tpot_percentile_s(pts, 0.1, spread, lengths, p)[0])
    assert base >= 0.02 * (1 - 1e-9)
    assert float(tpot_percentile_s(pts, 0.1, spread, lengths, min(p + 0.5, 99.95))[0]) >= base * (1 - 1e-9)


def test_the_fluid_tail_matches_the_simulated_one():
    # Llama-3.1-70B FP8 on one B200 under vLLM, 4 req/s of 1,500-token prompts and 300-token answers:
    # the simulation's P99 TPOT is 1.27x its mean (33.7 / 26.5 ms when written); the busy-period tail
    # gives 1.26x, where the former 10% prior gave 1.10x
    import inferlab

    sim = inferlab.serve("llama-3.1-70b", "b200", precision="fp8", engine="vllm", rate=4.0, isl=1500, osl=300,
                         num_requests=3000)
    t = sim.tpot_s[np.isfinite(sim.tpot_s)]
    ratio_sim = float(np.percentile(t, 99) / np.mean(t))
    x = 4.0 * 0.0973  # the rate times one prompt's prefill (97.3 ms when written)
    d = float(np.mean(t)) * (1.0 - x)
    fluid = tpot_percentile_s(_points(d, x), 0.0973, 1.0, np.array([300.0]), 99.0)
    assert float(fluid[0]) / float(np.mean(t)) == pytest.approx(ratio_sim, rel=0.06)
