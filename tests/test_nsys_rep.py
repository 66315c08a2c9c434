"""`.nsys-rep` reports: only the `nsys` program reads them, and it cannot be installed here.
So the refusal is tested without nsys on PATH, and the wiring with a small `nsys` script put
on PATH that records its arguments and writes the real saxpy export where it is asked to
(the command line and the reading of its output are checked; nothing of a GPU is mocked)."""

from __future__ import annotations

import json
import sys
import textwrap

import pytest

from conftest import measured_frame
from profile_all.readers import IngestError
from profile_all.readers.detect import read_any
from profile_all.readers.nsys_sqlite import read_export


def fake_nsys(directory, export, argv_file, fail: bool = False):
    """An `nsys` executable in `directory`: it saves its argv to `argv_file` and copies
    `export` to the path after --output (or fails as nsys does, on stderr)."""
    directory.mkdir(exist_ok=True)
    script = directory / "nsys"
    script.write_text(textwrap.dedent(f"""\
        #!{sys.executable}
        import json, shutil, sys
        with open({str(argv_file)!r}, "w") as saved:
            json.dump(sys.argv[1:], saved)
        if {fail!r}:
            sys.exit("Error: the report file is corrupt.\\nSee the log for details.")
        shutil.copy({str(export)!r}, sys.argv[sys.argv.index("--output") + 1])
        """))
    script.chmod(0o755)
    return script


@pytest.fixture
def report(fixtures):
    return fixtures / "nsys" / "pdl_2p2c.nsys-rep"


@pytest.fixture
def saxpy(fixtures):
    return fixtures / "nsys" / "saxpy_mpi_cuda_2022.sqlite"


def test_without_nsys_the_report_is_refused_in_one_line(report, tmp_path, monkeypatch):
    (tmp_path / "bin").mkdir()
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    with pytest.raises(IngestError) as refused:
        read_any(report)
    message = str(refused.value)
    assert "\n" not in message and "Nsight Systems" in message
    assert f"nsys export --type sqlite {report}" in message


def test_with_nsys_the_report_is_exported_to_sqlite_and_read(report, saxpy, tmp_path,
                                                              monkeypatch):
    argv_file = tmp_path / "argv.json"
    fake_nsys(tmp_path / "bin", saxpy, argv_file)
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    ingested = read_any(report)
    argv = json.loads(argv_file.read_text())
    output = argv[argv.index("--output") + 1]
    assert argv == ["export", "--type", "sqlite", "--force-overwrite", "true",
                    "--output", output, str(report.resolve())]
    assert output.endswith("/pdl_2p2c.sqlite")
    assert ingested.backend == "nsys" and ingested.facts["report"] == "nsys-rep"
    rows, _ = read_export(saxpy)
    assert measured_frame(ingested.rows).equals(measured_frame(rows))
    assert not (tmp_path / "bin" / "pdl_2p2c.sqlite").exists()


def test_a_failed_export_is_one_line_with_what_nsys_said(report, saxpy, tmp_path,
                                                         monkeypatch):
    fake_nsys(tmp_path / "bin", saxpy, tmp_path / "argv.json", fail=True)
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    with pytest.raises(IngestError) as refused:
        read_any(report)
    assert str(refused.value) == (
        f"{report}: nsys export --type sqlite failed (exit code 1): Error: the report file "
        "is corrupt. See the log for details.")
