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


def test_a_cell_magic_profiles_the_cell_as_a_script(tmp_path):
    """`%load_ext profile_all`, then `%%profile_all -b wallclock -b cprofile -- 7`: the cell
    runs as a script with its own argument, its progress shows, the Report displays."""
    cell = ("%%profile_all -b wallclock -b cprofile -o run -- 7\n"
            "import sys\nimport profile_all as pa\n"
            "for _ in range(int(sys.argv[1])):\n"
            "    with pa.region('cell_work'):\n"
            "        sum(i * i for i in range(20000))\n"
            "    pa.step()\n"
            "print('steps', sys.argv[1])\n")
    notebook = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell("%load_ext profile_all"), nbformat.v4.new_code_cell(cell),
        nbformat.v4.new_code_cell("%%profile_all -b wallclock --timeout nonsense\npass")])
    nbclient.NotebookClient(notebook, timeout=300, kernel_name="python3", allow_errors=True,
                            resources={"metadata": {"path": str(tmp_path)}}).execute()
    _load, ran, refused = notebook.cells
    text = "".join(output.get("text", "") for output in ran.outputs)
    assert "steps 7" in text and "pass 2/2 cprofile: ok" in text, text
    assert "\x1b[" not in text  # plain lines: the kernel's FORCE_COLOR drew a live spinner
    page = next(output["data"]["text/html"] for output in ran.outputs
                if "text/html" in output.get("data", {}))
    assert "cell_work" in page and '<section id="findings">' in page
    assert (tmp_path / "run" / "meta.json").is_file()
    error = next(output for output in refused.outputs if output["output_type"] == "error")
    assert error["ename"] == "UsageError" and "%%profile_all wrote no report (exit code 2)" \
        in error["evalue"] and "nonsense" in error["evalue"]
