"""A catalog name given where the other kind belongs (a GPU as the model, a model as the GPU)."""

from __future__ import annotations

import pytest

from inferlab.cli.main import main
from inferlab.errors import UnknownNameError
from inferlab.specs.catalog import load_hardware, load_model


def test_a_gpu_given_as_the_model_is_said_so():
    with pytest.raises(UnknownNameError) as err:
        load_model("h200")
    assert str(err.value) == ("unknown model 'h200': 'h200' is hardware in the catalog, not a model: "
                              "check the order of the arguments")
    with pytest.raises(UnknownNameError, match="'llama-3.1-8b' is a model in the catalog, not hardware"):
        load_hardware("llama-3.1-8b")
    # a name of neither kind keeps its closest names and the list
    with pytest.raises(UnknownNameError, match="did you mean 'llama-3.1-8b'"):
        load_model("llama-3.1-8x")


@pytest.mark.parametrize("argv", [["estimate", "h100-sxm", "llama-3.1-8b"],
                                  ["serve", "h100-sxm", "llama-3.1-8b", "--rate", "1"],
                                  ["slices", "llama-3.1-8b", "h100-sxm"]])
def test_swapped_arguments_are_one_line(capsys, argv):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.endswith("check the order of the arguments\n")


def test_a_name_in_another_case_is_offered_as_itself(capsys):
    # '--engine VLLM' had got no suggestion (difflib compares the case too)
    from inferlab.errors import closest

    assert closest("VLLM", ["generic", "sglang", "vllm"])[0] == "vllm"
    assert main(["estimate", "llama-3.1-8b", "h100-sxm", "--engine", "VLLM"]) == 2
    assert "unknown engine 'VLLM'; did you mean 'vllm'?" in capsys.readouterr().err
