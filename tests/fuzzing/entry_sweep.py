"""``inferlab.sweep`` and ``SweepResult.best``: lists of deployments and small grids, junk mixed in."""

from __future__ import annotations

from hypothesis import strategies as st

from inferlab import InfeasibleError, sweep
from inferlab.phases.sweep import DIRECTIONS

from . import Entry
from .entry_estimate import GOOD_HARDWARE, GOOD_MODELS, HARDWARE, JUNK, KWARGS as ESTIMATE_KWARGS, MODELS, VALID


def _listed(strategy):
    return st.one_of(strategy, st.lists(strategy, min_size=0, max_size=2))


KWARGS = {
    "tp": _listed(st.one_of(st.sampled_from([1, 2, 4, 8]), JUNK)),
    "precision": _listed(st.one_of(st.sampled_from(["bf16", "fp8", "int4"]), VALID["precision"], JUNK)),
    **{k: ESTIMATE_KWARGS[k] for k in ("batch_size", "isl", "osl", "engine", "gpu_memory_utilization",
                                       "kv_block_size", "max_num_tokens", "price_per_gpu_hour", "utilization",
                                       "waves", "allow_long_context")},
    "chunk_size": st.one_of(st.integers(1, 4), JUNK),
}
METRICS = st.one_of(st.sampled_from(sorted(DIRECTIONS)), st.sampled_from(["usd_per_million", "tpot", "batch_size"]),
                    JUNK)


def inputs():
    valid = {"tp": st.lists(st.sampled_from([1, 2, 4, 8]), min_size=1, max_size=2),
             "precision": _listed(VALID["precision"]),
             **{k: VALID[k] for k in ("batch_size", "isl", "osl", "waves", "price_per_gpu_hour",
                                      "gpu_memory_utilization", "allow_long_context")}}
    mostly_valid = st.tuples(st.lists(GOOD_MODELS, min_size=1, max_size=2), GOOD_HARDWARE,
                             st.fixed_dictionaries({}, optional=valid), st.sampled_from(sorted(DIRECTIONS)),
                             st.sampled_from([None, None, "min", "max"]))
    anything = st.tuples(_listed(MODELS), _listed(HARDWARE), st.fixed_dictionaries({}, optional=KWARGS), METRICS,
                         st.sampled_from([None, "min", "max", "up"]))
    return st.one_of(mostly_valid, anything)


def call(value):
    model, hardware, kwargs, metric, direction = value
    res = sweep(model, hardware, **kwargs)
    str(res)
    try:
        best = res.best(metric, direction=direction)
    except InfeasibleError:
        best = None
    if best is not None and not best["feasible"]:
        raise AssertionError(f"best() returned an infeasible row: {best}")
    return {"table": res.to_dict(), "best": best}


def _numbers(result):
    from . import finite_numbers

    return finite_numbers({k: v for k, v in result["table"].items() if k not in ("tp",)})


ENTRY = Entry("sweep", inputs, call, outputs=_numbers)
