"""profile-all started as cron, daemons and odd but legal scripts start it: closed standard
streams, paths whose bytes are not UTF-8, a script that is a FIFO, an output folder that
is a link, names with escape sequences, exit statuses above 255. Each ends in one line or
a whole report, with the exit code the OS gives."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import profile_all as pa
from conftest import profile_all, profile_all_here

MARKS = """import sys
from pathlib import Path
import profile_all as pa
for step in range(3):
    with pa.region({name}):
        sum(range(1000))
    pa.step()
Path(sys.argv[1]).write_text("ran")
"""


def _script(folder: Path, name: str = "marks.py", region: str = "'work'") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / name
    script.write_text(MARKS.format(name=region))
    return script


def test_closed_standard_streams_are_dev_null(tmp_path):
    """As cron starts it: stdin, stdout and stderr closed. The fork server took descriptor
    1 for its socket and the run ended in tracebacks before the script ran."""
    script, ran = _script(tmp_path), tmp_path / "ran"
    done = subprocess.run(
        ["/bin/sh", "-c", 'exec "$0" -m profile_all run "$1" -b wallclock -o "$2" -- "$3" '
         "<&- >&- 2>&-", sys.executable, script, tmp_path / "run", ran], timeout=240)
    assert done.returncode == 0
    assert ran.read_text() == "ran"
    report = pa.load(tmp_path / "run")
    assert (report.meta.status, report.meta.passes[0].steps) == ("complete", 3)


SPINS_IN = """import time
import profile_all as pa
for step in range(10):
    with pa.region({name}):
        began = time.perf_counter()
        while time.perf_counter() - began < 0.03:
            pass
    pa.step()
"""


def test_paths_that_are_not_utf8_and_a_surrogate_region_name(tmp_path):
    """A folder and a script named with bytes that are not UTF-8, run from that folder
    into its default reports/ folder, and a region named with a lone surrogate: `python`
    runs them. There were tracebacks before the first pass, a timing pass killed by its
    region's name, py-spy's panic on its output's path, torch's export refusing it,
    Arrow refusing the folder's name, and a report lost."""
    folder = tmp_path / os.fsdecode(b"data\xfe")
    folder.mkdir()
    script = folder / os.fsdecode(b"train\xff.py")
    script.write_text(SPINS_IN.format(name="'bad\\udcff'"))
    done = profile_all("run", script.name, "-b", "wallclock", "-b", "cprofile", "-b",
                       "torch-profiler", "-b", "py-spy", cwd=folder)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    run, = (folder / "reports").iterdir()
    assert run.name.endswith("-train_")  # its name is text
    report = pa.load(run)
    assert report.meta.status == "complete"
    assert report.meta.target["path"] == script.name  # the bytes, kept exactly
    regions = report.frame[report.frame["scope"] == "region"]
    assert set(regions["name"]) == {"bad\\xff"}  # shown as its escape
    assert [p.status for p in report.meta.passes] == ["ok"] * 4
    functions = report.frame[report.frame["backend"] == "cprofile"]["name"]
    assert any(name.startswith("train\\xff.py:") for name in functions)
    assert (run / "artifacts" / "torch_trace.pt.trace.json.gz").is_file()
    assert (run / "artifacts" / "py_spy.svg").is_file()
    assert "py-spy leaves out the frames of code in a file whose name is not UTF-8" in \
        " ".join(f["error"] for p in report.meta.passes for f in p.backend_failures)


@pytest.mark.parametrize("kind", ["fifo", "device"])
def test_a_script_that_is_not_a_regular_file_is_one_line(tmp_path, kind):
    """A FIFO waited for ever (its reader blocked before the first pass)."""
    script = tmp_path / "script.py"
    if kind == "fifo":
        os.mkfifo(script)
    else:
        script = Path("/dev/null")
    done = profile_all("run", script, "-o", tmp_path / "run", timeout=60)
    assert done.returncode == 2
    what = "a FIFO" if kind == "fifo" else "a character device"
    assert done.stderr.splitlines() == [
        f"profile-all: error: {script} is not a regular file ({what}): profile-all runs the "
        "script once a pass, so it must be a file it can read again; save it to a file first"]
    assert not (tmp_path / "run").exists()


def test_an_output_link_to_an_empty_folder_is_followed(tmp_path):
    """`-o LINK`: the report went to LINK-2, LINK said to be taken."""
    script = _script(tmp_path)
    (tmp_path / "empty").mkdir()
    (tmp_path / "link").symlink_to("empty")
    done = profile_all_here("run", script, "-b", "wallclock", "-q", "-o", tmp_path / "link",
                            "--", tmp_path / "ran")
    assert done.returncode == 0, done.stderr
    assert pa.load(tmp_path / "empty").meta.status == "complete"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty", "link", "marks.py", "ran"]
    assert done.stderr.splitlines()[-1] == \
        f"profile-all: complete, exit code 0: {tmp_path / 'empty'}"


@pytest.mark.parametrize("quiet", [True, False])
def test_the_last_line_names_the_report_escaped(tmp_path, quiet):
    script = _script(tmp_path)
    out = tmp_path / "a\x1b[31mred\nline"
    done = profile_all_here("run", script, "-b", "wallclock", *(["-q"] if quiet else []), "-o",
                            out, "--", tmp_path / "ran")
    assert done.returncode == 0, done.stderr
    assert "\x1b" not in done.stderr
    shown = str(tmp_path) + "/a\\x1b[31mred\\nline"
    last = done.stderr.splitlines()[-1]
    assert last == (f"profile-all: complete, exit code 0: {shown}" if quiet
                    else f"Report: {shown}")
    assert pa.load(out).meta.status == "complete"


@pytest.mark.parametrize("code, status, shown", [(256, "complete", 0), (-1, "failed", 255)])
def test_the_exit_status_is_the_one_the_os_gives(tmp_path, code, status, shown):
    """sys.exit(256) ends a process with status 0: reported `failed, exit code 256` while
    profile-all exited 0."""
    script = tmp_path / "exits.py"
    script.write_text(f"import sys\nsys.exit({code})\n")
    bare = subprocess.run([sys.executable, script])
    done = profile_all("run", script, "-b", "wallclock", "-q", "-o", tmp_path / "run")
    assert bare.returncode == done.returncode == shown
    report = pa.load(tmp_path / "run")
    assert (report.meta.status, report.meta.exit_code) == (status, shown)
    assert done.stderr.splitlines()[-1] == \
        f"profile-all: {status}, exit code {shown}: {tmp_path / 'run'}"


REMOVES_ITS_FOLDER = """import os, shutil, tempfile, time
import profile_all as pa
work = tempfile.mkdtemp()
os.chdir(work)
for step in range(30):
    with pa.region("spin"):
        began = time.perf_counter()
        while time.perf_counter() - began < 0.01:
            pass
    pa.step()
shutil.rmtree(work)
"""


def test_a_target_that_removes_its_working_folder_keeps_its_py_spy_rows(tmp_path):
    """Its py-spy rows and flame graph were lost (os.getcwd() failed in their collection)."""
    script = tmp_path / "removes.py"
    script.write_text(REMOVES_ITS_FOLDER)
    done = profile_all_here("run", script, "-b", "py-spy", "-o", tmp_path / "run",
                            "--pass-steps", "all")
    assert done.returncode == 0, done.stderr
    report = pa.load(tmp_path / "run")
    assert [p.status for p in report.meta.passes] == ["ok", "ok"]
    assert (tmp_path / "run" / "artifacts" / "py_spy.svg").is_file()
    assert not report.frame[report.frame["backend"] == "py-spy"].empty


DEEP = """import sys
import profile_all as pa
sys.setrecursionlimit(50_000)
def nest(level):
    if level:
        with pa.region(f"r{level}"):
            nest(level - 1)
for step in range(3):
    with pa.region("step"):
        nest(5000)
    pa.step()
"""


def test_regions_nested_5000_deep_are_cut_at_64_and_said(tmp_path):
    """5,000 nested `pa.region`s a step (7.8 GB, 36 s and a 2.1 GB folder before the cap),
    run under a 3 GiB address-space limit: the 64 outer levels are rows, the calls inside
    them counted in a note of each pass that hears regions, the folder small."""
    script = tmp_path / "deep.py"
    script.write_text(DEEP)
    out = tmp_path / "run"
    done = subprocess.run(["prlimit", f"--as={3 * 2**30}", sys.executable, "-m", "profile_all",
                           "run", str(script), "-o", str(out), "-b", "wallclock", "-b",
                           "torch-profiler"], capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-2000:]
    report = pa.load(out)
    notes = {f["backend"]: f["error"] for p in report.meta.passes for f in p.backend_failures}
    said = "14,811 pa.region calls nested deeper than 64 levels left out of the rows " \
        "(their time is in the regions around them)"  # (5001 - 64) levels x 3 steps
    assert notes == {"wallclock": said, "torch-profiler": said}
    for backend in ("wallclock", "torch-profiler"):
        calls = report.frame[(report.frame["scope"] == "region")
                             & (report.frame["backend"] == backend)
                             & (report.frame["metric"] == "calls")]
        assert len(calls) == 64 and set(calls["value"]) == {3}
    assert sum(f.stat().st_size for f in out.rglob("*") if f.is_file()) < 50 * 2**20
