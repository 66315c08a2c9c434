"""A disk that fills as a run goes (a job writing checkpoints, a small tmpfs): the report is
written whole or not at all, nothing is claimed before it is, and what was measured is
kept where no later run removes it, said in one line with exit code 74."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

import profile_all as pa
from conftest import profile_all_here

FILLS = """import os, sys
import profile_all as pa
for step in range(20):
    with pa.region("work"):
        sum(range(20000))
    pa.step()
where, keep = sys.argv[1], int(sys.argv[2]) * 1024
filler = os.path.join(where, "filler")
if os.path.exists(filler):
    os.unlink(filler)
with open(filler, "wb", buffering=0) as out:  # no buffer left to flush at a full disk
    try:
        while True:
            out.write(bytes(65536))
            out.flush()
    except OSError:
        pass
    out.truncate(max(0, os.fstat(out.fileno()).st_size - keep))
"""


@pytest.fixture
def small_disk(tmp_path):
    """An 8 MiB tmpfs, mounted for the test."""
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("needs root to mount a small tmpfs")
    disk = tmp_path / "small"
    disk.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(disk)],
                             capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    yield disk
    subprocess.run(["umount", "-l", str(disk)], check=False)


def test_a_disk_that_fills_before_the_report_keeps_what_was_measured(tmp_path, small_disk):
    """The script fills the disk but for 400 KiB as it ends: the passes' results fit, the
    report's page (its charts' half a megabyte of plotly.js) does not. It said `complete,
    exit code 0`, then two tracebacks, exit 1, and left the run hidden where the next run
    deleted it."""
    script = tmp_path / "fills.py"
    script.write_text(FILLS)
    # each pass runs the script, which leaves 400 KiB free as it ends (in one process
    # with windows, the passes after it would start on a disk it left full)
    done = profile_all_here("run", "--separate-passes", script, "-o", small_disk / "run", "--",
                            small_disk, "400")
    assert done.returncode == 74, done.stderr
    assert "Traceback" not in done.stderr and "complete" not in done.stderr
    kept = small_disk / "run.unsaved"
    assert done.stderr.splitlines()[-1] == (
        f"profile-all: error: the report could not be written to {small_disk / 'run'} (No "
        f"space left on device): what was measured is kept in {kept}: its rows and meta.json "
        f"(profile-all show {kept}; with --html, once there is room, it writes report.html), "
        "each tool's files and the passes' logs in artifacts/")
    assert sorted(p.name for p in small_disk.iterdir()) == ["filler", "run.unsaved"]
    report = pa.load(kept)
    assert report.meta.passes[0].steps == 20
    assert {"wallclock", "cprofile", "torch-profiler"} <= set(report.frame["backend"])
    assert not (kept / "report.html").exists()
    again = profile_all_here("run", script, "-b", "wallclock", "-o", small_disk / "next", "--",
                             small_disk, "400")
    assert again.returncode == 74 and kept.is_dir()  # a later run leaves it alone
    (small_disk / "filler").unlink()
    shutil.rmtree(small_disk / "next.unsaved")
    page = profile_all_here("show", kept, "--html")
    assert page.returncode == 0, page.stderr
    assert "plotly" in (kept / "report.html").read_text()


def test_a_disk_full_as_a_pass_ends_is_said_and_the_run_goes_on(tmp_path, small_disk):
    """Full to the last byte as the script ends: the pass's result cannot be written
    either. One line from the pass, one from the run, exit 74, no traceback."""
    script = tmp_path / "fills.py"
    script.write_text(FILLS)
    done = profile_all_here("run", script, "-b", "wallclock", "-o", small_disk / "run", "--",
                            small_disk, "0")
    assert done.returncode == 74, done.stderr
    assert "Traceback" not in done.stderr
    assert "the worker could not write its result (the run folder's disk is full" in \
        done.stderr
    assert done.stderr.splitlines()[-1].startswith(
        f"profile-all: error: the report could not be written to {small_disk / 'run'} (")
    assert (small_disk / "run.unsaved").is_dir()
