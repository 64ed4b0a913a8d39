"""The explorer's ``/api/estimate``: a URL query of knobs (text, as a browser sends it), valid
values from the catalogs mixed with junk, through :class:`Knobs` into the estimate view."""

from __future__ import annotations

from hypothesis import strategies as st

from inferlab.explore.config import Knobs
from inferlab.explore.views import estimate_view
from inferlab.specs.catalog import hardware_ids, model_ids

from . import Entry, finite_numbers

_TEXT = st.one_of(st.text(max_size=8), st.sampled_from(["", " ", "nan", "inf", "-1", "1e400", "0x10", "2.5", "1e30"]))
_FORMATS = st.sampled_from(["checkpoint", "bf16", "fp8", "nvfp4", "mxfp4", "int4", "fp4", ""])
VALID = {
    "model": st.sampled_from(["llama-3.1-8b", "qwen3-8b", "qwen3-30b-a3b", "llama-3.1-70b"]),
    "gpu": st.sampled_from(["h100-sxm", "h200-sxm", "l40s", "b200"]),
    "engine": st.sampled_from(["generic", "vllm", "trtllm"]),
    "tp": st.sampled_from(["1", "2", "4", "8"]), "pp": st.sampled_from(["1", "2"]), "ep": st.sampled_from(["1", "2"]),
    "dp": st.sampled_from(["1", "2"]), "weights": _FORMATS, "activations": _FORMATS, "kv": _FORMATS,
    "batch": st.integers(1, 2000).map(str), "isl": st.integers(1, 140_000).map(str),
    "osl": st.integers(1, 4096).map(str),
    "spec": st.sampled_from(["", "eagle:k=4,accept=0.7", "eagle3-llama-3.1-8b", "eagle:k=0", "draft:model=x"]),
    "prefix_hit": st.sampled_from(["0", "0.5", "0.9", "1", "-0.1"]),
    "disagg": st.sampled_from(["", "", "prefill=h200x4,decode=h200x8", "nope"]),
}
ANY = {**{k: st.one_of(v, _TEXT) for k, v in VALID.items()},
       "model": st.one_of(st.sampled_from(model_ids()), _TEXT), "gpu": st.one_of(st.sampled_from(hardware_ids()), _TEXT)}


def inputs():
    return st.one_of(st.fixed_dictionaries({}, optional=VALID), st.fixed_dictionaries({}, optional=ANY))


def call(query):
    return estimate_view(Knobs.from_query(query))


def _numbers(view):
    return finite_numbers({"metrics": {k: v for k, v in view["metrics"].items() if v is not None},
                           "memory": view["memory"]})


ENTRY = Entry("explore", inputs, call, outputs=_numbers)
