"""In a real Jupyter kernel (nbclient runs a notebook): a run shows its progress in the
cell, and the Report displays itself with the findings first."""

from __future__ import annotations

import pytest

from conftest import TARGETS

nbformat = pytest.importorskip("nbformat", reason="pip install nbclient nbformat ipykernel")
nbclient = pytest.importorskip("nbclient", reason="pip install nbclient nbformat ipykernel")
pytest.importorskip("ipykernel", reason="pip install ipykernel")


def test_a_run_in_a_notebook_shows_progress_and_its_report(tmp_path):
    notebook = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell(
            "import profile_all as pa\n"
            f"report = pa.run({str(TARGETS / 'speed.py')!r}, ['0.001'], "
            f"backends=['wallclock', 'cprofile'], out={str(tmp_path / 'run')!r})"),
        nbformat.v4.new_code_cell("report")])
    nbclient.NotebookClient(notebook, timeout=300, kernel_name="python3",
                            resources={"metadata": {"path": str(tmp_path)}}).execute()
    ran, shown = notebook.cells
    # Rich prints to a notebook as display data, the script's own output is a stream
    text = "".join(output.get("text", "") or output.get("data", {}).get("text/plain", "")
                   for output in ran.outputs)
    assert "pass 1/2 wallclock: started" in text and "pass 2/2 cprofile: ok" in text
    page = shown.outputs[0]["data"]["text/html"]
    assert page.index('<section id="findings">') < page.index('<section id="passes">')
    assert "work takes" in page  # a finding: speed.py's "work" region holds most of a step
