"""The example notebooks run top to bottom without an error (nbclient, the ``python3`` kernel
of this interpreter), and the figures and tables they promise are in their outputs."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import inferlab

nbclient = pytest.importorskip("nbclient", reason="nbclient is not installed (the test extra)")
nbformat = pytest.importorskip("nbformat", reason="nbformat is not installed (the test extra)")
pytest.importorskip("ipykernel", reason="ipykernel is not installed (the test extra)")

NOTEBOOKS = Path(__file__).resolve().parents[1] / "examples" / "notebooks"
#: What each notebook must show: a substring of some output, and how many figures.
EXPECTED = {
    "will_it_fit.ipynb": ("llama-3.1-70b on 4x h100-sxm (tp4), fp8", 1),
    "serving_under_load.ipynb": ("knee at", 1),
    "plan_a_deployment.ipynb": ("best:", 1),
    "techniques.ipynb": ("speculation stops paying at batch", 0),
}


def _text(output) -> str:
    if output.output_type == "stream":
        return output.text
    data = output.get("data", {})
    return data.get("text/plain", "") + data.get("text/html", "")


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_notebook_runs_top_to_bottom(name, tmp_path):
    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    client = nbclient.NotebookClient(nb, timeout=120, kernel_name="python3",
                                     resources={"metadata": {"path": str(tmp_path)}})
    # the kernel imports the inferlab this test imports (a relative PYTHONPATH would not
    # survive the kernel's working directory)
    here = str(Path(inferlab.__file__).resolve().parents[1])
    client.execute(env={**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [here, os.environ.get("PYTHONPATH")]))})
    outputs = [o for cell in nb.cells if cell.cell_type == "code" for o in cell.outputs]
    errors = [o for o in outputs if o.output_type == "error"]
    assert not errors, f"{name}: {errors[0].ename}: {errors[0].evalue}" if errors else ""
    stderr = "".join(o.text for o in outputs if o.output_type == "stream" and o.name == "stderr")
    assert "Traceback" not in stderr and "Warning" not in stderr, stderr[:500]
    fragment, figures = EXPECTED[name]
    assert any(fragment in _text(o) for o in outputs), f"{name}: no output contains {fragment!r}"
    assert sum("image/png" in o.get("data", {}) for o in outputs) >= figures
