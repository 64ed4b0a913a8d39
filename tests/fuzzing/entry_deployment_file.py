"""Deployment files (``inferlab estimate --file``): YAML text written to a file, valid and not.

YAML alias bombs of a few hundred bytes, non-UTF-8 bytes, wrong types and unknown keys must
be refused quickly, in one line.
"""

from __future__ import annotations

import os
import tempfile

import yaml
from hypothesis import strategies as st

from . import Entry
from .entry_cli_estimate import CleanExit, run_cli
from .entry_estimate import JUNK


def _bomb(levels: int, key: str, mapping: bool) -> str:
    """Under ``key``, each level a list of nine aliases of the one before: ``9**levels``
    values in a few hundred bytes (as a list, or as a mapping's values)."""
    lines = ["model: llama-3.1-8b", "hardware: h100-sxm", f"{key}:"]
    item = (lambda i: f"  l{i}: ") if mapping else (lambda i: "  - ")
    lines.append(item(0) + "&a0 [1, 1, 1, 1, 1, 1, 1, 1, 1]")
    for i in range(1, levels):
        lines.append(item(i) + f"&a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]")
    return "\n".join(lines) + "\n"


SCALARS = st.one_of(st.integers(-3, 10**6), st.floats(allow_nan=True, allow_infinity=True), st.booleans(),
                    st.text(max_size=6), st.none())
FIELDS = {
    "model": st.sampled_from(["llama-3.1-8b", "qwen3-8b", "lama", "llama-3.1-70b"]),
    "hardware": st.sampled_from(["h100-sxm", "h200-sxm", "h100"]),
    "tp": st.one_of(st.sampled_from([1, 2, 4]), SCALARS), "pp": SCALARS,
    "isl": st.one_of(st.integers(1, 300_000), st.lists(st.integers(1, 4096), max_size=3), SCALARS),
    "osl": st.one_of(st.integers(1, 2048), SCALARS),
    "batch_size": st.one_of(st.integers(1, 3000), st.lists(st.integers(1, 256), max_size=3), SCALARS,
                            st.just([[1, 2], [3]]), st.just({"a": 1})),
    "precision": st.one_of(st.sampled_from(["bf16", "fp8"]), st.just({"weights": "fp8"}), st.just({"weights": [1]}),
                           SCALARS),
    "speculative": st.one_of(st.just({"method": "eagle", "k": 4, "acceptance": 0.7}), st.just({"method": "eagle"}),
                             st.just({"k": [1, 2]}), st.just("eagle:k=100000,accept=0.5"), SCALARS),
    "prefix_cache": st.one_of(st.just({"hit_rate": 0.5}), st.just({"hit_rate": "x"}), SCALARS),
    "disaggregation": st.one_of(st.just({"prefill": "h200x4", "decode": "h200x8"}), st.just({"prefill": 3}),
                                st.just("prefill=h200x4,decode=h200x8"), SCALARS),
    "waves": st.one_of(st.booleans(), SCALARS), "gpu_memory_utilization": SCALARS, "price_per_gpu_hour": SCALARS,
    "kv_block_size": SCALARS, "bogus_key": SCALARS,
}


def _document():
    required = {"model": FIELDS["model"], "hardware": FIELDS["hardware"]}
    valid = {"tp": st.sampled_from([1, 2, 4]), "isl": st.one_of(st.integers(1, 8192), st.lists(
        st.integers(1, 4096), min_size=1, max_size=3)), "osl": st.integers(1, 1024),
        "batch_size": st.one_of(st.integers(1, 512), st.lists(st.integers(1, 256), min_size=1, max_size=3)),
        "precision": st.sampled_from(["bf16", "fp8"]), "waves": st.booleans(),
        "speculative": st.just({"method": "eagle", "k": 4, "acceptance": 0.7}),
        "prefix_cache": st.just({"hit_rate": 0.5})}
    good = st.fixed_dictionaries(required, optional=valid)
    anything = st.fixed_dictionaries(required, optional={k: v for k, v in FIELDS.items() if k not in required})
    return st.one_of(good, anything, st.fixed_dictionaries({}, optional=FIELDS)).map(
        lambda d: yaml.safe_dump(d).encode())


def inputs():
    bombs = st.tuples(st.integers(2, 9), st.sampled_from(["batch_size", "isl", "precision", "speculative", "tp",
                                                         "prefix_cache", "disaggregation", "bogus"]),
                      st.booleans()).map(lambda t: _bomb(*t).encode())
    return st.one_of(_document(), bombs, st.binary(max_size=60),
                     st.just(b"model: llama-3.1-8b\nhardware: h100-sxm\nisl: \xff\xfe\n"),
                     st.text(max_size=80).map(str.encode), JUNK.map(lambda j: yaml.safe_dump({"model": str(j)}).encode()))


def call(data: bytes):
    fd, path = tempfile.mkstemp(suffix=".yaml")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        return run_cli(["estimate", "--file", path, "--json"])
    finally:
        os.unlink(path)


def _numbers(out: str):
    import json

    from . import finite_numbers

    return finite_numbers(json.loads(out))


ENTRY = Entry("deployment_file", inputs, call, outputs=_numbers, clean=(CleanExit,))
