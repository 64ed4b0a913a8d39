"""Name lookups and the refusals a user reads: short hardware names, a model's local folder,
the calculator's missing count unit, speak's advice, a dense model's ``ep`` and a card without
a scale-out NIC. Expected texts are written from the requirement, not from the code's output."""

from __future__ import annotations

import shutil

import pytest

from inferlab.cli.main import main
from inferlab.errors import InfeasibleError, InferlabError, SpecError, UnknownNameError


def run(capsys, *args):
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


# --- 1. one rule for a short hardware name: the id, else the one id that is NAME-... ---------

@pytest.mark.parametrize("name, resolved", [
    ("h200", "h200-sxm"), ("H200", "h200-sxm"), ("h200-sxm", "h200-sxm"), ("h20", "h20"),
])
def test_a_unique_short_name_is_its_id_in_the_catalog_and_the_pools_alike(name, resolved):
    from inferlab.specs.catalog import hardware_id, load_hardware
    from inferlab.techniques.disaggregation import resolve_hardware

    assert hardware_id(name) == resolved
    assert resolve_hardware(name) == resolved  # --disagg's pools: the same rule
    assert load_hardware(name).id == resolved


def test_estimate_and_the_api_take_h200_and_print_h200_sxm(capsys):
    import inferlab

    assert inferlab.estimate("llama-3.1-8b", "h200").deployment.hardware.id == "h200-sxm"
    code, out, err = run(capsys, "estimate", "llama-3.1-8b", "h200")
    assert code == 0, err
    assert "h200-sxm" in out and "unknown hardware" not in err


def test_serve_takes_h200_and_prints_h200_sxm(capsys):
    code, out, err = run(capsys, "serve", "llama-3.1-8b", "h200", "--rate", "1", "--num-requests", "5")
    assert code == 0, err
    assert "1x h200-sxm" in out


def test_a_mig_slice_of_a_short_name():
    from inferlab.specs.catalog import load_hardware

    assert load_hardware("h200:1g.18gb").id == "h200-sxm:1g.18gb"


@pytest.mark.parametrize("name", ["h100"])
def test_an_ambiguous_short_name_names_every_candidate(name):
    from inferlab.specs.catalog import load_hardware
    from inferlab.techniques.disaggregation import Pool

    with pytest.raises(UnknownNameError) as err:
        load_hardware(name)
    for candidate in ("h100-sxm", "h100-pcie", "h100-nvl"):
        assert repr(candidate) in str(err.value)
    assert "ambiguous" in str(err.value)
    with pytest.raises(SpecError, match="ambiguous"):  # the pools' error, as before
        Pool.parse(f"{name}x4")


@pytest.mark.parametrize("name", ["rtx-3090", "rtx-2080", "m2", "m4", "a100-sxm", "a100-pcie", "snapdragon", "ryzen"])
def test_a_sibling_part_is_not_read_as_the_catalogs_one(name):
    """Only a form factor completes a name: an RTX 3090 is not a 3090 Ti, an M2 not an M2 Ultra
    (8x its bandwidth), an A100 SXM not necessarily the 80 GB one: did-you-mean, not a guess."""
    from inferlab.specs.catalog import load_hardware

    with pytest.raises(UnknownNameError, match=f"unknown hardware '{name}'; did you mean"):
        load_hardware(name)


def test_a_prefix_without_the_dash_is_not_taken():
    """'mi300' names no whole word of 'mi300x' (MI300A is another part): did-you-mean, not a guess."""
    from inferlab.specs.catalog import load_hardware

    with pytest.raises(UnknownNameError, match="unknown hardware 'mi300'; did you mean 'mi300x'"):
        load_hardware("mi300")


def test_the_calculator_reads_a_short_name_and_shows_the_id():
    from inferlab.calc.evaluator import evaluate

    result = evaluate("h200.memory_bandwidth", to="TB/s")
    assert result.value.magnitude == pytest.approx(4.8)  # the H200's 4.8 TB/s
    assert [r.text for r in result.references] == ["h200-sxm.memory_bandwidth"]


# --- 2. a local Hugging Face folder as MODEL ------------------------------------------------

@pytest.fixture
def model_folder(tmp_path, monkeypatch, data_dir):
    folder = tmp_path / "mymodel"
    folder.mkdir()
    shutil.copy(data_dir / "hf-configs" / "meta-llama--Meta-Llama-3.1-8B.json", folder / "config.json")
    (tmp_path / "empty").mkdir()
    monkeypatch.chdir(tmp_path)
    return folder


def test_a_folder_name_holding_config_json_is_the_model(model_folder, capsys):
    from inferlab.specs.catalog import load_model

    by_folder, by_file = load_model("mymodel"), load_model("mymodel/config.json")
    assert by_folder.num_hidden_layers == by_file.num_hidden_layers == 32  # Llama 3.1 8B
    code, out, err = run(capsys, "estimate", "mymodel", "h100-sxm")
    assert code == 0, err
    assert "unknown model" not in err


def test_an_unknown_model_says_a_config_json_path_is_accepted(model_folder):
    from inferlab.specs.catalog import load_model

    with pytest.raises(UnknownNameError) as err:
        load_model("nosuch")
    assert str(err.value).startswith("unknown model 'nosuch'")
    assert "config.json" in str(err.value) and "folder" in str(err.value)


def test_a_folder_without_config_json_says_so(model_folder):
    from inferlab.specs.catalog import load_model

    with pytest.raises(SpecError, match="holds no config.json"):
        load_model("empty")


# --- 3. calc: a count with no unit ----------------------------------------------------------

_TIME = "2 * llama-3.1-70b.total_params * 2048 / (h100-sxm.flops.fp8 * 0.6)"


def test_a_missing_flop_is_named_with_the_fix():
    from inferlab.calc.evaluator import evaluate

    with pytest.raises(InferlabError) as err:
        evaluate(_TIME, to="ms")
    message = str(err.value)
    assert "multiply by 1 FLOP" in message and "total_params" in message
    # the suggested expression runs: 2 x 70.55e9 x 2048 FLOP / (1979e12 FLOP/s x 0.6) = 0.2434 s
    assert evaluate(f"1 FLOP * ({_TIME})", to="ms").value.magnitude == pytest.approx(243.38, rel=1e-3)


@pytest.mark.parametrize("expression, to, hint", [
    ("llama-3.1-70b.total_params / 3.35 TB/s", "ms", "multiply by 1 B"),  # bytes per parameter left out
    ("3 tok * 4 tok / 2 s", "tok/s", "divide by 1 token"),
    ("1 s / (2 FLOP * 3 FLOP)", "ms", "multiply by 1 FLOP**2"),
])
def test_the_hint_follows_the_dimension(expression, to, hint):
    from inferlab.calc.evaluator import evaluate

    with pytest.raises(InferlabError, match="cannot be expressed") as err:
        evaluate(expression, to=to)
    assert hint in str(err.value)


@pytest.mark.parametrize("expression, to", [("2 TFLOP * 5", "s"), ("5 GB", "ms")])
def test_no_hint_when_no_count_is_missing(expression, to):
    from inferlab.calc.evaluator import evaluate

    with pytest.raises(InferlabError, match="cannot be expressed") as err:
        evaluate(expression, to=to)
    assert "multiply by" not in str(err.value) and "divide by" not in str(err.value)


# --- 4. speak names only what speak takes ---------------------------------------------------

def test_speak_advice_names_only_speak_options(capsys):
    code, _, err = run(capsys, "speak", "orpheus-3b", "rtx-4090", "--llm", "qwen3-8b")
    assert code != 0
    assert "narrower format" not in err and "precision" not in err  # speak has no --precision
    assert "--llm" in err and "GPU with more memory" in err


# --- 5. ep on a dense model: the missing experts first --------------------------------------

def test_the_dense_model_is_the_reason_before_any_divisibility():
    from inferlab.core.parallelism import Parallelism, check_experts
    from inferlab.errors import CombinationError
    from inferlab.specs.catalog import load_model

    dense = load_model("llama-3.1-70b")
    with pytest.raises(CombinationError, match="llama-3.1-70b has no experts"):
        check_experts(dense, 2, False)
    with pytest.raises(CombinationError, match="llama-3.1-70b has no experts"):  # not "tp=3 does not divide"
        Parallelism(tp=3, ep=3).check(dense)
    check_experts(dense, 1, False)  # no expert parallelism asked: nothing to refuse


def test_estimate_refuses_ep_on_a_dense_model_for_its_missing_experts():
    import inferlab

    with pytest.raises(InferlabError, match="llama-3.1-70b has no experts"):
        inferlab.estimate("llama-3.1-70b", "h100-sxm", ep=2)


# --- 6. a card without a scale-out NIC ------------------------------------------------------

def test_the_missing_nic_is_the_limit_and_no_format_is_offered_that_would_not_fit(capsys):
    # INT4 weights of 405B are about 210 GB: 26 GB a GPU over one machine's 8, over the 23.2 GB usable
    code, _, err = run(capsys, "estimate", "llama-3.1-405b", "rtx-4090", "--tp", "8")
    assert code != 0
    assert "scale-out NIC" in err and "at most 8 GPUs" in err
    assert "narrower weight format" not in err and "GPU with more memory" in err


def test_a_narrower_format_is_offered_where_one_fits():
    # H20 (96 GB, no NIC): 405B in BF16 is 811 GB, 101 GB a GPU over 8; in FP8 about 51 GB, which fits
    import inferlab

    with pytest.raises(InfeasibleError) as err:
        inferlab.estimate("llama-3.1-405b", "h20", isl=1024)
    assert "scale-out NIC" in str(err.value) and "narrower weight format" in str(err.value)
    assert "precision={'weights': 'fp8'} as tp=8" in str(err.value)
    assert inferlab.estimate("llama-3.1-405b", "h20", isl=1024, precision={"weights": "fp8"},
                             tp=8).deployment.hardware.id == "h20"


def test_a_scenario_reads_short_gpu_names_as_their_ids_in_the_list_and_the_prices():
    # h200 is h200-sxm, the only H200: the plan lists and prices it under its id (it had kept the
    # label h200 and refused prices: {h200-sxm: ...}); an ambiguous name is kept as given (the plan refuses it)
    from inferlab.planning.scenario import load_scenario

    base = {"name": "h", "models": ["llama-3.1-8b"], "traffic": {"rate": 5, "isl": 1000, "osl": 200},
            "slo": {"ttft_ms": 1000, "tpot_ms": 50}}
    sc = load_scenario({**base, "hardware": ["h200", "b200"], "prices": {"h200": 3.0}})
    assert sc.hardware == ("h200-sxm", "b200") and sc.prices == {"h200-sxm": 3.0}
    assert load_scenario({**base, "hardware": ["h200"], "prices": {"h200-sxm": 3.0}}).prices == {"h200-sxm": 3.0}
    assert load_scenario({**base, "hardware": ["h100"]}).hardware == ("h100",)  # as given: the plan says why


def test_a_gpu_priced_under_its_short_name_and_its_id_is_refused():
    # both read as h200-sxm: one of the two prices had been dropped without a word
    from inferlab.planning.scenario import load_scenario

    base = {"name": "h", "models": ["llama-3.1-8b"], "hardware": ["h200"], "traffic": {"rate": 5, "isl": 1000, "osl": 200},
            "slo": {"ttft_ms": 1000, "tpot_ms": 50}}
    with pytest.raises(InferlabError, match=r"h200 and h200-sxm are the same GPU \(h200-sxm\); price it once"):
        load_scenario({**base, "prices": {"h200": 3.0, "h200-sxm": 4.5}})
