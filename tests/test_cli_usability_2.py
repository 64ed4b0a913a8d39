"""CLI usability: unknown options named per command, list and suffix hints, help text, the
price line, SLOs typed in seconds, and readable small numbers and durations."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from inferlab.cli.main import build_parser, main
from inferlab.cli.unknown_options import ENGINE_SPELLINGS, command_parser
from inferlab.results.render import duration_text, significant

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "scenarios"


def run(capsys, *args):
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


# -- 1. an unknown option: the command's own name for it, or its closest options ------------

@pytest.mark.parametrize("argv, line", [
    (["estimate", "llama-3.1-8b", "h100-sxm", "--batch-size", "8"],
     "estimate has no option --batch-size (use --batch); see inferlab estimate --help"),
    (["estimate", "llama-3.1-8b", "h100-sxm", "--tensor-parallel-size", "2"],
     "estimate has no option --tensor-parallel-size (use --tp); see inferlab estimate --help"),
    (["estimate", "llama-3.1-8b", "h100-sxm", "--tp_size", "2"],
     "estimate has no option --tp_size (use --tp); see inferlab estimate --help"),
    (["estimate", "llama-3.1-8b", "h100-sxm", "--pipeline-parallel-size", "2"],
     "estimate has no option --pipeline-parallel-size (use --pp); see inferlab estimate --help"),
    (["estimate", "llama-3.1-8b", "h100-sxm", "--max-num-batched-tokens", "4096"],
     "estimate has no option --max-num-batched-tokens (use --max-num-tokens); see inferlab estimate --help"),
    (["serve", "llama-3.1-8b", "h100-sxm", "--rate", "4", "--max-num-tokens", "4096"],
     "serve has no option --max-num-tokens (use --max-num-batched-tokens); see inferlab serve --help"),
    (["serve", "llama-3.1-8b", "h100-sxm", "--rate", "4", "--tp-size", "2", "--num-prompts", "10"],
     "serve has no options --tp-size (use --tp), --num-prompts (use --num-requests); see inferlab serve --help"),
    (["estimate", "llama-3.1-8b", "h100-sxm", "--precison", "fp8"],
     "estimate has no option --precison (did you mean --precision?); see inferlab estimate --help"),
    (["serve", "h100-sxm", "--rate", "4", "--model", "llama-3.1-8b"],
     "serve has no option --model (MODEL goes without a flag: inferlab serve MODEL HARDWARE); "
     "see inferlab serve --help"),
    (["plan", "scenario.yaml", "--hour", "3"], "plan has no option --hour; see inferlab plan --help"),
])
def test_unknown_option_names_the_commands_own(capsys, argv, line):
    code, _, err = run(capsys, *argv)
    assert code == 2 and err == f"inferlab: error: {line}\n"


def test_a_stray_argument_is_still_listed(capsys):
    code, _, err = run(capsys, "estimate", "llama-3.1-8b", "h100-sxm", "extra")
    assert code == 2 and err == "inferlab: error: unrecognized arguments: extra (see inferlab estimate --help)\n"


def test_every_engine_spelling_leads_to_an_option_that_exists():
    """The table names only options estimate or serve really have, and only spellings neither has."""
    parser = build_parser()
    offered = {name: set(command_parser(parser, argparse.Namespace(command=name))._option_string_actions)
               for name in ("estimate", "serve")}
    for spelling, targets in ENGINE_SPELLINGS.items():
        assert any(t.split()[0] in opts for t in targets for opts in offered.values()), (spelling, targets)
        assert all(spelling not in opts or all(t.split()[0] not in opts for t in targets)
                   for opts in offered.values()), spelling


# -- 2. a list given to --rate; a k suffix on a length --------------------------------------

def test_rate_with_a_list_points_to_rates(capsys):
    code, _, err = run(capsys, "serve", "llama-3.1-8b", "h100-sxm", "--rate", "4,8,16")
    assert code == 2 and err == ("inferlab: error: argument --rate: one rate, got '4,8,16'; a sweep of rates is "
                                 "--rates 4,8,16 (see inferlab serve --help)\n")


@pytest.mark.parametrize("command", [["serve", "llama-3.1-8b", "h100-sxm", "--rate", "4"],
                                     ["estimate", "llama-3.1-8b", "h100-sxm"]])
def test_a_k_suffix_is_refused_with_both_readings(capsys, command):
    code, _, err = run(capsys, *command, "--isl", "128k")
    assert code == 2 and err.count("\n") == 1
    assert "; write whole numbers: 128k is 128000 (k = 1000) or 131072 (k = 1024)" in err


# -- 4. --attention has help --------------------------------------------------------------

def test_attention_flag_has_help(capsys):
    with pytest.raises(SystemExit):
        main(["estimate", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "--attention {flash,naive} attention kernel: flash keeps the score matrix on chip (default); naive" in out


# -- 6 and 9. small numbers keep their digits; durations in the unit that reads -----------

@pytest.mark.parametrize("value, digits, text", [
    (0.3412, 2, "0.34"), (0.02713, 2, "0.027"), (3.46, 2, "3.5"), (1564.4, 2, "1564"), (77.0, 2, "77"),
    (0.0, 2, "0"), (float("nan"), 2, "-"), (11.5741, 3, "11.6"), (2.0, 3, "2"),
])
def test_significant(value, digits, text):
    assert significant(value, digits) == text


@pytest.mark.parametrize("seconds, text", [(45, "45 s"), (300, "5 min"), (299.9, "5 min"), (5400, "1.5 h"),
                                           (86400, "24 h")])
def test_duration_text(seconds, text):
    assert duration_text(seconds) == text


def test_fleet_progress_counts_a_short_horizon_in_minutes(capsys, monkeypatch):
    notes = []

    class Recorder:
        def __init__(self, total, label="", **kwargs):
            self.done = 0

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return None

        def step(self, note=""):
            self.done += 1
            notes.append(note)

    monkeypatch.setattr("inferlab.serving.progress.Progress", Recorder)
    code, _, _ = run(capsys, "fleet", str(EXAMPLES / "fleet-day.yaml"), "--hours", "0.0833333", "--rate-scale", "0.05")
    assert code == 0 and notes
    assert all(n.endswith((" s", " min")) for n in notes) and "0.0 h" not in notes


# -- 7. no price: said under the table ------------------------------------------------------

def test_missing_price_is_explained(capsys):
    code, out, _ = run(capsys, "estimate", "llama-3.1-8b", "b300")
    assert code == 0
    assert "\nno catalog price for b300, so no $/M out; set one with --price USD_PER_GPU_HOUR\n" in out
    _, out, _ = run(capsys, "estimate", "llama-3.1-8b", "b300", "--price", "5")
    assert "no catalog price" not in out
    _, out, _ = run(capsys, "estimate", "llama-3.1-8b", "h100-sxm")
    assert "no catalog price" not in out


# -- 8. an SLO under a millisecond: seconds typed for milliseconds --------------------------

def test_slo_in_seconds_is_warned(capsys):
    code, _, err = run(capsys, "serve", "llama-3.1-8b", "h100-sxm", "--rate", "4", "--num-requests", "20",
                       "--ttft-slo", "0.5", "--tpot-slo", "0.05")
    assert code == 0
    assert ("inferlab: warning: --ttft-slo 0.5 is 0.5 ms (the SLO flags take milliseconds); for 0.5 s write "
            "--ttft-slo 500\n") in err
    assert ("inferlab: warning: --tpot-slo 0.05 is 0.05 ms (the SLO flags take milliseconds); for 0.05 s write "
            "--tpot-slo 50\n") in err
    _, _, err = run(capsys, "serve", "llama-3.1-8b", "h100-sxm", "--rate", "4", "--num-requests", "20",
                    "--ttft-slo", "500", "--tpot-slo", "50")
    assert "warning: --t" not in err


def test_an_engine_only_flag_points_to_the_launch_command_not_a_lookalike(capsys):
    # SGLang's --max-total-tokens sizes the KV pool: not --max-num-tokens, the token budget
    code, _, err = run(capsys, "estimate", "llama-3.1-8b", "h100-sxm", "--max-total-tokens", "1000")
    assert code == 2
    assert err.strip().endswith("estimate has no option --max-total-tokens (an engine's flag? give the launch "
                                "command whole: --engine-args); see inferlab estimate --help")
