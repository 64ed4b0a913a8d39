"""``inferlab serve`` run in-process: argv lists with loads, speculation (``--spec``), prefixes
(``--prefix``), precision flags per tensor kind and scheduler limits, valid and invalid mixed.

Every argv starts with ``--num-requests 40`` so that a run is fast; a drawn ``--num-requests``
comes later and wins, and is at most 200 or out of range: a run simulates every request it
is asked for (100,000 take ~15 s, by design). A clean refusal is exit status 1 or 2 with
exactly one line on stderr.
"""

from __future__ import annotations

import json

from hypothesis import strategies as st

from . import Entry
from .entry_cli_estimate import CleanExit, run_cli

VALUES = st.one_of(st.sampled_from(["1", "2", "4", "0", "-1", "1.5", "nan", "inf", "1e30", "x", "", "1,8",
                                    "99999999999999999999", "0.5"]),
                   st.integers(-10, 10**12).map(str), st.text(max_size=8))
#: Prompt and output lengths: up to 4,096 tokens or refused (a run of 40 requests with
#: --allow-long-context and 10^7-token outputs would simulate 4 x 10^8 decode steps, by design).
LENGTHS = st.one_of(st.integers(-3, 4096).map(str), st.sampled_from(["200000", "10**9", "1e3", "", "x", "1,,2",
                                                                     "uniform:9-3", "lognormal:mean=-1"]))
REQUESTS = st.one_of(st.integers(-3, 200).map(str), st.sampled_from(["10000001", "1e3", "", "x", "2.5", "nan"]))
FLAGS = st.sampled_from(["--tp", "--pp", "--dp", "--seed", "--precision",
                         "--weights", "--moe-weights", "--activations", "--kv-cache-dtype", "--spec", "--prefix",
                         "--max-num-seqs", "--max-num-batched-tokens", "--gpu-memory-utilization", "--ttft-slo",
                         "--tpot-slo", "--percentile", "--network-rtt", "--engine", "--disagg"])
SWITCHES = st.sampled_from(["--json", "--explain", "--no-chunked-prefill", "--allow-long-context", "--attention-dp",
                            "--no-streaming", "--bogus"])
SPECIAL = st.sampled_from([
    ["--spec", "eagle:k=4,accept=0.7"], ["--spec", "eagle:k=100000,accept=0.5"], ["--spec", "eagle3-llama-3.1-8b"],
    ["--spec", "mtp:k=1,length=1.85"], ["--prefix", "shared:tokens=500,groups=4"], ["--prefix", "sessions:turns=3"],
    ["--prefix", "sessions:turns=10000"], ["--prefix", "shared:tokens=100,groups=1000000000000"],
    ["--precision", "fp8"], ["--kv-cache-dtype", "fp8_e5m2"], ["--weights", "int4"], ["--moe-weights", "mxfp4"],
    ["--activations", "fp4"], ["--precision", ""], ["--disagg", "prefill=h100-sxmx1,decode=h100-sxmx1"],
    ["--plot", "/nonexistent-folder/x.png"], ["--isl", "200000"], ["--isl", "lognormal:mean=512,sigma=0.5"],
    ["--isl", "uniform:128-1024"], ["--tp", "2"], ["--pp", "2"],
])
LOADS = st.one_of(st.sampled_from([["--rate", "5"], ["--rates", "2,8"], ["--concurrency", "4"], ["--offline"],
                                   ["--concurrency", "2,8"]]),
                  st.tuples(st.sampled_from(["--rate", "--rates", "--concurrency"]), VALUES).map(list),
                  st.just([]), st.just(["--rate", "5", "--offline"]))
MODELS = st.sampled_from(["llama-3.1-8b", "llama-3.1-8b", "gpt-oss-20b", "qwen3-30b-a3b", "lama-3", "--rate"])
HARDWARE = st.sampled_from(["h100-sxm", "h100-sxm", "h200-sxm", "b200", "h100", ""])


def inputs():
    option = st.one_of(st.tuples(FLAGS, VALUES).map(list), SWITCHES.map(lambda s: [s]), SPECIAL, SPECIAL,
                       REQUESTS.map(lambda n: ["--num-requests", n]),
                       st.tuples(st.sampled_from(["--isl", "--osl"]), LENGTHS).map(list))
    return st.tuples(MODELS, HARDWARE, LOADS, st.lists(option, max_size=4)).map(
        lambda t: ["serve", t[0], *([t[1]] if t[1] else []), "--num-requests", "40", *t[2],
                   *(x for opt in t[3] for x in opt)])


def call(argv):
    out = run_cli(argv)
    return json.loads(out) if "--json" in argv else {}


def _numbers(result):
    """Every number of the JSON output but the signed and undefined ones: TPOT and ITL of
    one-token outputs are null there; a knee's slope may be any sign."""
    from . import finite_numbers

    return finite_numbers(result)


ENTRY = Entry("cli.serve", inputs, call, outputs=_numbers, clean=(CleanExit,))
