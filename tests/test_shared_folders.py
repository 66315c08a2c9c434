"""Two runs into one folder: the first holds the folder's name while it writes, a second
is refused at once in one line, and no finished report is ever deleted or left unplaced."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

import profile_all as pa
from conftest import TARGETS, profile_all
from profile_all.errors import UsageError
from profile_all.runs.folder import RunDirectory


def test_a_second_run_into_a_folder_being_written_is_refused_at_once(tmp_path):
    out = tmp_path / "shared"
    first = subprocess.Popen([sys.executable, "-m", "profile_all", "run", str(TARGETS / "speed.py"),
                              "-b", "wallclock", "-o", str(out), "-q", "--", "0.05"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        lock = tmp_path / ".shared.lock"
        deadline = time.monotonic() + 60
        while not lock.exists() and first.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert lock.exists() and first.poll() is None, "the first run never took the folder"
        second = profile_all("run", TARGETS / "speed.py", "-b", "wallclock", "-o", out)
        assert second.returncode == 2, second.stderr
        assert second.stderr.strip().splitlines() == [
            f"profile-all: error: another profile-all is writing {out} now (it holds {lock}): "
            "give this run another -o"]
    finally:
        _stdout, stderr = first.communicate(timeout=240)
    assert first.returncode == 0, stderr
    assert pa.load(out).meta.status == "complete"
    # nothing left behind: no partial folder, no lock
    assert sorted(p.name for p in tmp_path.iterdir()) == ["shared"]


def test_a_finished_report_whose_name_was_taken_meanwhile_is_kept_beside(tmp_path, capsys):
    out = tmp_path / "report"
    folder = RunDirectory.create(out, "x")
    (folder.work / "meta.json").write_text("{}")
    out.mkdir()
    (out / "someone_elses.txt").write_text("theirs")  # made by something without the lock
    placed = folder.commit()
    assert placed == tmp_path / "report-2"
    assert (placed / "meta.json").read_text() == "{}"
    assert (out / "someone_elses.txt").read_text() == "theirs"
    assert f"{out} was taken while this run wrote: its report is in {placed}" in \
        capsys.readouterr().err
    assert not list(tmp_path.glob(".*"))


def test_the_lock_is_taken_once(tmp_path):
    holder = RunDirectory.create(tmp_path / "r", "x")
    with pytest.raises(UsageError, match="another profile-all is writing"):
        RunDirectory.create(tmp_path / "r", "x")
    holder.commit()
