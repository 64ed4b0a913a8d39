"""Results compare by content and their arrays are read-only (results/record.py)."""

import dataclasses

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from inferlab import estimate, serve, sweep
from inferlab.results.record import array_record, same


@array_record
@dataclasses.dataclass(frozen=True)
class _Toy:
    values: np.ndarray
    label: str = ""


def test_two_runs_of_one_estimate_are_equal_and_another_batch_is_not():
    grid = dict(batch_size=[1, 8], isl=512, osl=128)
    a = estimate("llama-3.1-8b", "h100-sxm", **grid)
    assert a == estimate("llama-3.1-8b", "h100-sxm", **grid)  # raised "truth value of an array"
    assert a != estimate("llama-3.1-8b", "h100-sxm", batch_size=[1, 16], isl=512, osl=128)
    assert a != "an estimate" and a.memory == estimate("llama-3.1-8b", "h100-sxm", **grid).memory


def test_sweeps_and_serve_runs_compare_by_content():
    kw = dict(batch_size=[1, 4], isl=[256], osl=[64])
    assert sweep("llama-3.1-8b", "h100-sxm", **kw) == sweep("llama-3.1-8b", "h100-sxm", **kw)
    run = dict(concurrency=2, num_requests=4, isl=256, osl=16, seed=3)
    assert serve("llama-3.1-8b", "h100-sxm", **run) == serve("llama-3.1-8b", "h100-sxm", **run)


def test_result_arrays_are_read_only_and_the_callers_array_is_not():
    res = sweep("llama-3.1-8b", "h100-sxm", batch_size=[1, 64], isl=[512], osl=[128])
    best = res.best("output_tokens_per_s")
    with pytest.raises(ValueError, match="read-only"):
        res["tpot_s"][0] = 1e-9  # had changed what best() answered
    assert res.best("output_tokens_per_s")["batch_size"] == best["batch_size"]
    mine = np.array([1.0, 2.0])
    _Toy(mine)
    mine[0] = 3.0  # the caller's array stays theirs
    assert mine[0] == 3.0


def test_results_are_unhashable():
    with pytest.raises(TypeError):
        hash(_Toy(np.zeros(2)))


@given(st.lists(st.one_of(st.floats(allow_nan=True), st.just(float("nan"))), min_size=1, max_size=6))
def test_content_equality_is_reflexive_with_nan_and_sees_one_changed_element(xs):
    a = np.array(xs)
    assert _Toy(a) == _Toy(a.copy())
    changed = a.copy()
    changed[0] = 1.0 if a[0] != 1.0 else 2.0
    assert _Toy(a) != _Toy(changed)
    assert not same(a, a[:-1]) or len(xs) == 0  # another shape is another content


def test_string_arrays_and_nested_containers():
    assert same({"a": [np.array(["x", "y"])]}, {"a": [np.array(["x", "y"])]})
    assert not same({"a": (1, 2)}, {"a": [1, 2]})  # a tuple is not a list
    assert _Toy(np.zeros(2), "p") != _Toy(np.zeros(2), "q")


def test_results_stay_read_only_through_pickle_and_own_their_values():
    """A Dask worker's result comes back pickled; and an array given to estimate() and changed
    afterwards must not change the result (it had been a view of the caller's array)."""
    import copy
    import pickle

    b = np.array([1.0, 8.0])
    est = estimate("llama-3.1-8b", "h100-sxm", batch_size=b)
    b[0] = 64.0
    assert est.batch_size.tolist() == [1.0, 8.0]
    for again in (pickle.loads(pickle.dumps(est)), copy.deepcopy(est)):
        assert again == est and not again.ttft_s.flags.writeable
