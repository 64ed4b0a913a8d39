"""Prefix caching against hand derivations, and its invariants."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from inferlab import SpecError
from inferlab.core.ops import Attention, Gemm
from inferlab.techniques.step import prefill
from inferlab.inputs.resolve import deployment
from inferlab.techniques.prefix_cache import (PrefixCache, effective_cached_tokens, kv_resident_tokens,
                                              prefill_with_cache)

#: Linear-layer parameters of Llama-3.1-8B: total 8,030,261,248 - embedding and LM head
#: 2 x 128,256 x 4,096 - norms 65 x 4,096 (see tests/test_core.py).
LLAMA_8B_LINEAR = 6_979_321_856


@pytest.fixture(scope="module")
def dep():
    return deployment("llama-3.1-8b", "h100-sxm", profile="roofline")


def test_cached_prefix_step_by_hand(dep):
    """A 4096-token prompt with 1024 tokens cached: 3072 tokens are computed.

    GEMMs: 2 x 3072 x 6,979,321,856 = 4.2882e13 FLOP (vs 5.7174e13 without the cache).
    Attention: the new tokens attend to the cached ones and, causally, to each other:
      pairs = 3072 x 1024 + 3072 x 3073 / 2 = 7,865,344 per head
      2 x 32 heads x 7,865,344 x (128 + 128) x 32 layers = 4.1237e12 FLOP
    The attention still reads the whole cache: 4096 tokens x (2 x 8 x 128) x 2 B = 16,777,216 B
    per layer, and writes only the 3072 new tokens' KV: 12,582,912 B.
    """
    step = prefill_with_cache(dep, 1, 4096, PrefixCache(cached_tokens=1024))
    gemm = sum(float(op.flops) * op.count for op in step.ops if isinstance(op, Gemm) and op.name != "lm_head")
    assert gemm == pytest.approx(2 * 3072 * LLAMA_8B_LINEAR, rel=1e-9)
    attn = next(op for op in step.ops if isinstance(op, Attention))
    pairs = 3072 * 1024 + 3072 * 3073 / 2
    assert float(attn.flops) * attn.count == pytest.approx(2 * 32 * pairs * 256 * 32, rel=1e-12)
    assert float(attn.byte_parts()["kv_read"]) == 4096 * 4096
    assert float(attn.byte_parts()["kv_write"]) == 3072 * 4096


def test_hit_rate_zero_is_the_identity(dep):
    plain = prefill(dep, np.array([1.0, 8.0]), np.array([512.0, 4096.0]))
    for cache in (None, PrefixCache(hit_rate=0.0), PrefixCache(cached_tokens=0)):
        cached = prefill_with_cache(dep, np.array([1.0, 8.0]), np.array([512.0, 4096.0]), cache)
        np.testing.assert_array_equal(cached.time_s, plain.time_s)


def test_cached_tokens_cut_prefill_monotonically(dep):
    times = [float(prefill_with_cache(dep, 4, 8192, PrefixCache(cached_tokens=c)).time_s)
             for c in (0, 1024, 2048, 4096, 8000)]
    assert all(a > b for a, b in zip(times, times[1:]))


def test_effective_cached_tokens_by_hand():
    isl = np.array([1000.0, 4096.0])
    # hit rate x isl
    np.testing.assert_allclose(effective_cached_tokens(isl, PrefixCache(hit_rate=0.6)), [600.0, 2457.6])
    # a stable prefix matches whole 16-token pages: floor(1500 / 16) x 16 = 1488; a 1000-token
    # prompt is all prefix, but its last token is recomputed for the logits: 999
    np.testing.assert_allclose(effective_cached_tokens(isl, PrefixCache(cached_tokens=1500), block_size=16),
                               [999.0, 1488.0])
    # 4 replicas, routing that ignores the cache: the prefix's replica is hit 1 time in 4
    blind = PrefixCache(hit_rate=0.6, replicas=4, cache_aware_routing=False)
    np.testing.assert_allclose(effective_cached_tokens(isl, blind), [150.0, 614.4])
    aware = PrefixCache(hit_rate=0.6, replicas=4, cache_aware_routing=True)
    np.testing.assert_allclose(effective_cached_tokens(isl, aware), [600.0, 2457.6])


def test_a_stable_part_that_is_not_first_caches_nothing(dep):
    later = PrefixCache(cached_tokens=3000, stable_prefix_first=False)
    np.testing.assert_array_equal(effective_cached_tokens([4096.0], later), [0.0])
    assert float(prefill_with_cache(dep, 1, 4096, later).time_s) == float(prefill(dep, 1.0, 4096.0).time_s)


def test_memory_is_unchanged():
    np.testing.assert_array_equal(kv_resident_tokens([1024, 2048], [128, 256], PrefixCache(hit_rate=0.9)),
                                  [1152, 2304])


@settings(max_examples=25, deadline=None)
@given(a=st.floats(0.0, 1.0), b=st.floats(0.0, 1.0), isl=st.integers(2, 16384))
def test_a_higher_hit_rate_never_slows_prefill(dep, a, b, isl):
    lo, hi = sorted((a, b))
    t_lo = prefill_with_cache(dep, 2, isl, PrefixCache(hit_rate=lo)).time_s
    t_hi = prefill_with_cache(dep, 2, isl, PrefixCache(hit_rate=hi)).time_s
    assert float(t_hi) <= float(t_lo) * (1 + 1e-12)
    assert np.isfinite(t_hi) and t_hi > 0


@pytest.mark.parametrize("text, expected", [
    ("0.5", PrefixCache(hit_rate=0.5)),
    ("50%", PrefixCache(hit_rate=0.5)),
    ("hit=0.25", PrefixCache(hit_rate=0.25)),
    ("tokens=1500", PrefixCache(cached_tokens=1500.0)),
    ("tokens=1500, replicas=4, routing=random, prefix=later",
     PrefixCache(cached_tokens=1500.0, replicas=4, cache_aware_routing=False, stable_prefix_first=False)),
])
def test_parse(text, expected):
    assert PrefixCache.parse(text) == expected


@pytest.mark.parametrize("text, fragment", [
    ("", "expected a hit rate"),
    ("1.5", "outside [0, 1]"),
    ("abc", "must be a number in [0, 1]"),
    ("tokens=abc", "tokens must be a number"),
    ("tokens=-5", "cached_tokens must be a finite number >= 0"),
    ("replicas=4", "unexpected first item"),
    ("0.5,replicas=0", "replicas must be an integer >= 1"),
    ("0.5,replicas=2.5", "whole number"),
    ("0.5,routing=smart", "routing must be one of aware, random"),
    ("0.5,tokens=100", "unexpected item"),
])
def test_parse_errors_say_what_is_allowed(text, fragment):
    with pytest.raises(SpecError, match=None) as err:
        PrefixCache.parse(text)
    assert fragment in str(err.value)


def test_exactly_one_amount():
    with pytest.raises(SpecError, match="exactly one"):
        PrefixCache()
    with pytest.raises(SpecError, match="exactly one"):
        PrefixCache(cached_tokens=10, hit_rate=0.5)
    with pytest.raises(SpecError, match="must be a number"):
        PrefixCache(cached_tokens="1500")  # type: ignore[arg-type]


def test_a_mapping_of_fields_is_the_text_it_spells():
    from inferlab import estimate
    from inferlab.errors import SpecError

    assert PrefixCache.of({"cached_tokens": 1500, "replicas": 4}) == PrefixCache.parse("tokens=1500,replicas=4")
    assert PrefixCache.of({"hit_rate": 0.5}) == PrefixCache.of(0.5)
    half = estimate("llama-3.1-8b", "h100-sxm", isl=2048, prefix_cache={"hit_rate": 0.5})
    assert half.ttft < estimate("llama-3.1-8b", "h100-sxm", isl=2048).ttft
    with pytest.raises(SpecError, match="unknown field 'hit' \\(did you mean 'hit_rate'\\?\\); allowed: cached_tokens, hit_rate"):
        PrefixCache.of({"hit": 0.5})


def test_a_prefix_longer_than_the_prompt_is_refused_and_a_grid_marks_those_points():
    # a 5,000-token prefix cannot sit in a 1,024-token prompt: it had been read as a full hit
    # (TTFT 7.9 ms, the same as hit_rate=1); in a grid only the shorter prompts are marked
    from inferlab import estimate, serve
    from inferlab.cli.main import main
    from inferlab.errors import CombinationError

    with pytest.raises(CombinationError, match="cached prefix of 5,000 tokens is longer than the 1,024-token prompt"):
        estimate("llama-3.1-8b", "h100-sxm", isl=1024, prefix_cache={"cached_tokens": 5000})
    grid = estimate("llama-3.1-8b", "h100-sxm", isl=np.array([1024, 8192]), prefix_cache={"cached_tokens": 5000})
    assert list(np.ravel(grid.feasible)) == [False, True] and np.isnan(np.ravel(grid.ttft_s)[0])
    assert main(["estimate", "llama-3.1-8b", "h100-sxm", "--prefix-cache", "tokens=5000", "--isl", "1024"]) == 2
    with pytest.raises(SpecError, match="shared prefix of 5,000 tokens is longer than every prompt"):
        serve("llama-3.1-8b", "h100-sxm", prefix="shared:tokens=5000,groups=2", isl=1000, rate=2, num_requests=20)


def test_data_parallel_ranks_each_hold_their_own_cache():
    """--dp 4 with routing that ignores the cache: each of the four ranks caches apart, so a
    request finds its prefix 1 time in 4, as four replicas of one rank do (it had been found
    every time: TTFT 203 ms, the cache-aware figure, against 619 ms for replicas=4). Cache-aware
    routing is unchanged, and replicas multiply the ranks."""
    import inferlab

    blind = PrefixCache(hit_rate=0.6, cache_aware_routing=False)
    assert blind.over_ranks(4).routing_hit_probability == pytest.approx(0.25)
    assert PrefixCache(hit_rate=0.6, replicas=2, cache_aware_routing=False).over_ranks(4).replicas == 8
    assert PrefixCache(hit_rate=0.6).over_ranks(4).routing_hit_probability == 1.0

    def ttft(**kw):
        return float(inferlab.estimate("llama-3.1-8b", "h100-sxm", isl=4096, osl=256, **kw).ttft_s)

    dp = ttft(dp=4, batch_size=32, prefix_cache="tokens=3072,routing=random")
    assert dp == pytest.approx(ttft(batch_size=8, prefix_cache="tokens=3072,routing=random,replicas=4"), rel=1e-6)
    assert dp > 2 * ttft(dp=4, batch_size=32, prefix_cache="tokens=3072,routing=aware")


def test_a_disaggregated_prefill_pool_caches_on_each_replica_apart():
    """A prefill pool of four H100s as four replicas, routing that ignores the cache: a
    request finds its prefix 1 time in 4, as a one-replica pool with replicas=4 finds it (the
    pool's replicas had shared one cache: the cache-aware time)."""
    import inferlab

    def ttft(pool: str, cache: str) -> float:
        return float(inferlab.estimate("llama-3.1-8b", disaggregation=f"prefill={pool},decode=h100-sxmx1",
                                       isl=4096, osl=256, prefix_cache=cache).ttft_s)

    four = ttft("h100-sxmx4:tp1", "tokens=3072,routing=random")
    assert four == pytest.approx(ttft("h100-sxmx1", "tokens=3072,routing=random,replicas=4"), rel=1e-6)
    assert four > 2 * ttft("h100-sxmx4:tp1", "tokens=3072,routing=aware")
