"""``inferlab estimate`` run in-process: argv lists with valid and invalid flags and values.

A clean refusal is exit status 1 or 2 with exactly one non-empty line on stderr.
"""

from __future__ import annotations

import contextlib
import io
import json

from hypothesis import strategies as st

from inferlab.cli.main import main
from inferlab.specs.catalog import hardware_ids

from . import Entry


class CleanExit(Exception):
    """The CLI refused the input as it should: exit 1 or 2, one line on stderr."""


def run_cli(argv: list[str]) -> str:
    """Run ``inferlab argv`` in-process; stdout on success, :class:`CleanExit` on a clean
    refusal, AssertionError (a foreign outcome) otherwise."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as exc:  # argparse's --help and --version
            code = exc.code if isinstance(exc.code, int) else 2
    lines = err.getvalue().splitlines()
    if code == 0:
        return out.getvalue()
    if code in (1, 2) and len(lines) == 1 and lines[0].strip():
        raise CleanExit(lines[0])
    raise AssertionError(f"exit {code} with {len(lines)} stderr lines: {err.getvalue()[:300]!r}")


VALUES = st.one_of(st.sampled_from(["1", "2", "4", "8", "0", "-1", "1.5", "nan", "inf", "1e30", "x", "", "1,8,64",
                                    "1,,2", "99999999999999999999", "0.5", "2.0"]),
                   st.integers(-10, 10**12).map(str), st.text(max_size=8))
FLAGS = st.sampled_from(["--tp", "--pp", "--ep", "--dp", "--expert-imbalance", "--micro-batches", "--precision",
                         "--isl", "--osl", "--batch", "--engine", "--profile", "--gpu-memory-utilization", "--price",
                         "--spec", "--prefix-cache", "--disagg", "--prefill-batch", "--kv-block-size",
                         "--max-num-tokens", "--file", "--ops", "--weights", "--moe-weights", "--activations",
                         "--kv-cache-dtype"])
SWITCHES = st.sampled_from(["--waves", "--attention-dp", "--explain", "--json", "--no-cuda-graphs",
                            "--allow-long-context", "--bogus"])
SPECIAL = st.sampled_from([["--spec", "eagle:k=100000,accept=0.5"], ["--disagg", "prefill=h200x4,decode=h200x8"],
                           ["--plot", "/nonexistent-folder/x.png"], ["--isl", "200000"], ["--batch", "1,5000"],
                           ["--precision", "fp8"], ["--engine", "vllm"], ["--spec", "eagle3-llama-3.1-8b"],
                           ["--kv-cache-dtype", "fp8_e5m2"], ["--weights", "int4"], ["--moe-weights", "mxfp4"],
                           ["--activations", "fp4"], ["--precision", ""], ["--precision", "checkpoint"],
                           ["--precision", "fp8 kv:bf16"], ["--kv-cache-dtype", "auto"]])
MODELS = st.sampled_from(["llama-3.1-8b", "qwen3-8b", "qwen3-30b-a3b", "llama-3.1-70b", "llama-2-7b", "lama-3",
                          "gpt-oss-20b", "--tp"])


def inputs():
    option = st.one_of(st.tuples(FLAGS, VALUES).map(list), SWITCHES.map(lambda s: [s]), SPECIAL)
    head = st.tuples(MODELS, st.sampled_from([*hardware_ids()[:12], "h100-sxm", "h200-sxm", "h100"]))
    return st.tuples(head, st.lists(option, max_size=4)).map(
        lambda t: ["estimate", *t[0], *(x for opt in t[1] for x in opt)])


def call(argv):
    out = run_cli(argv)
    return json.loads(out) if "--json" in argv else {}


ENTRY = Entry("cli.estimate", inputs, call, clean=(CleanExit,))
