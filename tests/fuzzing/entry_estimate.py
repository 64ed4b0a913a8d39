"""``inferlab.estimate``: every keyword, valid values from the catalogs mixed with junk."""

from __future__ import annotations

from hypothesis import strategies as st

from inferlab import estimate
from inferlab.errors import InferlabError
from inferlab.specs.catalog import hardware_ids, model_ids

from . import Entry

#: Junk any argument may receive: wrong types, non-finite, negative, huge, empty, complex.
JUNK = st.one_of(
    st.none(), st.booleans(), st.integers(-3, 3), st.integers(10**9, 10**30),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=6), st.just(1 + 2j), st.just({"a": 1}),
    st.lists(st.integers(-2, 9), max_size=3), st.just([[1, 2], [3]]), st.just(b"\xff"),
)
#: Values each keyword may take when the input is meant to be valid (or nearly so).
VALID = {
    "tp": st.sampled_from([1, 1, 2, 4, 8]), "pp": st.sampled_from([1, 1, 2]), "ep": st.sampled_from([1, 1, 2]),
    "dp": st.sampled_from([1, 2]), "micro_batches": st.sampled_from([None, 2]),
    "attention_dp": st.booleans(), "expert_imbalance": st.floats(1.0, 3.0),
    "precision": st.one_of(st.sampled_from(["bf16", "fp8", "int4", "nvfp4", "mxfp4", None, "checkpoint",
                                            "fp8 kv:bf16", "checkpoint kv:fp8", "w:int4 a:bf16 kv:fp8"]),
                           st.fixed_dictionaries({}, optional={
                               k: st.one_of(st.none(), st.sampled_from(["bf16", "fp8", "int4", "nvfp4", "mxfp4"]))
                               for k in ("weights", "moe_weights", "activations", "kv_cache")})),
    "isl": st.one_of(st.integers(1, 140_000), st.lists(st.integers(1, 9000), min_size=1, max_size=3)),
    "osl": st.one_of(st.integers(1, 4096), st.lists(st.integers(1, 2000), min_size=1, max_size=2)),
    "batch_size": st.one_of(st.integers(1, 3000), st.lists(st.integers(1, 600), min_size=1, max_size=3)),
    "engine": st.sampled_from(["generic", "vllm", "trtllm", "trtllm-pytorch", "sglang", "lmdeploy"]),
    "profile": st.sampled_from(["default", "roofline"]), "attention": st.sampled_from(["flash", "naive"]),
    "cuda_graphs": st.booleans(), "gpu_memory_utilization": st.floats(0.05, 1.0),
    "kv_block_size": st.sampled_from([1, 16, 64, 256]), "max_num_tokens": st.integers(1, 20000),
    "price_per_gpu_hour": st.floats(0, 20), "utilization": st.floats(0.01, 1.0), "waves": st.booleans(),
    "speculative": st.sampled_from(["eagle:k=4,accept=0.7", "mtp:k=1,length=1.85", "ngram:k=3,accept=0.3",
                                    "draft:model=llama-3.1-8b,k=4,accept=0.6", "eagle3-llama-3.1-8b"]),
    "prefix_cache": st.one_of(st.floats(0.0, 1.0), st.sampled_from(["tokens=1500", "tokens=100"])),
    "disaggregation": st.sampled_from(["prefill=h200x4,decode=h200x8", "prefill=h100x1,decode=h100x2:tp1"]),
    "prefill_batch": st.integers(1, 16), "allow_long_context": st.booleans(),
}
#: Values that are wrong for some keyword: out of range, meaningless, or unknown names.
WRONG = {
    "tp": st.sampled_from([0, 3, 2**40]), "isl": st.sampled_from([0, 2**31, 2**63, 10**12, [], [[1, 2], [3]]]),
    "batch_size": st.sampled_from([0, 10**10, [1, 2.5], [[1, 2], [3]]]),
    "precision": st.sampled_from(["fp7", "", " ", "kv:", "x:fp8", {"weights": 3}, {"kv_cache": ""}, {"bogus": "fp8"},
                                  ["fp8"]]), "engine": st.sampled_from(["tensorrt", ""]),
    "profile": st.sampled_from(["nope", "/nonexistent.yaml"]), "attention": st.just("paged"),
    "gpu_memory_utilization": st.sampled_from([0.0, 1.5, 2.0, -0.5]), "utilization": st.sampled_from([0.0, 2.0]),
    "speculative": st.sampled_from(["eagle:k=100000,accept=0.5", "eagle:k=0", "medusa:k=5,length=9", "eagle",
                                    "eagle:k=4,accept=1.5"]),
    "prefix_cache": st.sampled_from(["tokens=-4", "hit=0.5", "0.5", 1.5, -0.1]),
    "disaggregation": st.sampled_from(["nope", "prefill=h200x3:tp2,decode=h200"]),
    "kv_block_size": st.sampled_from([0, -16, 2**30]), "max_num_tokens": st.sampled_from([0, -5]),
    "price_per_gpu_hour": st.sampled_from([-1.0, float("inf"), float("nan")]),
}
KWARGS = {k: st.one_of(v, v, WRONG.get(k, v), JUNK) for k, v in VALID.items()}
MODELS = st.one_of(st.sampled_from(model_ids()), st.sampled_from(["lama-3.1-8b", "", "./nope/config.json"]), JUNK)
HARDWARE = st.one_of(st.sampled_from(hardware_ids()), st.sampled_from(["h100", "h100-sx", ""]), JUNK)
GOOD_MODELS = st.sampled_from(["llama-3.1-8b", "qwen3-8b", "qwen3-30b-a3b", "llama-3.1-70b", "gpt-oss-20b",
                               "mixtral-8x7b", "llama-2-7b"])
GOOD_HARDWARE = st.sampled_from(["h100-sxm", "h200-sxm", "b200", "a100-sxm-80gb", "mi300x", "l40s"])


def inputs():
    mostly_valid = st.tuples(GOOD_MODELS, GOOD_HARDWARE,
                             st.fixed_dictionaries({}, optional={k: VALID[k] for k in (
                                 "tp", "precision", "isl", "osl", "batch_size", "engine", "waves", "speculative",
                                 "prefix_cache", "gpu_memory_utilization", "price_per_gpu_hour", "allow_long_context")}))
    return st.one_of(mostly_valid, st.tuples(MODELS, HARDWARE, st.fixed_dictionaries({}, optional=KWARGS)))


LEVELS = st.one_of(st.sampled_from([0.5, 0.8, 0.9]), st.sampled_from([0.0, 1.0, 0.95, float("nan"), True, "0.8"]), JUNK)


def inputs_with_level():
    return st.tuples(inputs(), LEVELS)


def call(value):
    (model, hardware, kwargs), level = value
    est = estimate(model, hardware, **kwargs)
    str(est)  # the text table must render every result
    try:  # a level the error-band table does not hold is a clean error of interval() alone
        est.interval(level).to_dict()
    except InferlabError:
        pass
    return est


ENTRY = Entry("estimate", inputs_with_level, call)
