"""Two runs into one folder: the first holds the folder's name while it writes, a second
is refused at once in one line, and no finished report is ever deleted or left unplaced."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

import profile_all as pa
from conftest import TARGETS, profile_all_here
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
        second = profile_all_here("run", TARGETS / "speed.py", "-b", "wallclock", "-o", out)
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


WAITS = """import sys, time
from pathlib import Path
print("ready", flush=True)
while not Path(sys.argv[1]).exists():
    time.sleep(0.05)
"""


def _free_pid() -> int:
    """A pid that no process of this (the host's) namespace has."""
    import psutil

    taken = set(psutil.pids())
    return next(pid for pid in range(max(taken) + 1000, 2**22) if pid not in taken)


def test_a_run_in_another_pid_namespace_keeps_its_work_folder(tmp_path):
    """Two runs into one folder from two PID namespaces (containers, or hosts, on one
    volume): the run here saw the other's `.NAME.partial-PID`, found no such PID, and
    removed its work folder as it ran (it died with a traceback, its result lost). A work
    folder is removed only by whoever takes its lock."""
    import shutil

    unshare = shutil.which("unshare")
    if os.geteuid() != 0 or unshare is None:
        pytest.skip("needs root and unshare to start a run in a PID namespace of its own")
    script, go_on = tmp_path / "waits.py", tmp_path / "go-on"
    script.write_text(WAITS)
    pid = _free_pid()
    other = subprocess.Popen(
        [unshare, "--pid", "--fork", "--mount-proc", "/bin/sh", "-c",
         'echo $(($1 - 1)) > /proc/sys/kernel/ns_last_pid && "$2" -m profile_all run "$3" '
         '-b wallclock -q -o "$4" -- "$5"', "sh", str(pid), sys.executable, str(script),
         str(tmp_path / "theirs"), str(go_on)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert other.stdout.readline().strip() == "ready"
        work = tmp_path / f".theirs.partial-{pid}"
        assert work.is_dir() and not psutil_has(pid)  # its PID means nothing here
        ours = profile_all_here("run", TARGETS / "speed.py", "-b", "wallclock", "-q",
                                "-o", tmp_path / "ours")
        assert ours.returncode == 0, ours.stderr
        assert work.is_dir()  # left alone: its run holds its lock
    finally:
        go_on.touch()
        _out, err = other.communicate(timeout=120)
    assert other.returncode == 0, err
    assert "Traceback" not in err
    assert pa.load(tmp_path / "theirs").meta.status == "complete"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["go-on", "ours", "theirs", "waits.py"]


def psutil_has(pid: int) -> bool:
    import psutil

    return psutil.pid_exists(pid)


def test_a_dead_run_s_work_folder_is_removed_once_its_lock_is_free(tmp_path):
    """A work folder whose run died (SIGKILL: its lock file is left, unlocked) goes, named
    with a PID that runs here or not."""
    dead = tmp_path / f".old.partial-{os.getpid()}"  # a PID that runs: it said nothing
    (dead / "scratch").mkdir(parents=True)
    (tmp_path / ".old.lock").touch()
    RunDirectory.create(tmp_path / "new", "x").discard()
    assert not dead.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_a_link_planted_as_the_lock_is_refused(tmp_path):
    """In a folder others may write, `.NAME.lock` made a link to a file of ours: it was
    opened (and created) where the link pointed."""
    victim = tmp_path / "victim"
    shared = tmp_path / "shared"
    shared.mkdir()
    (shared / ".run.lock").symlink_to(victim)
    with pytest.raises(UsageError) as refused:
        RunDirectory.create(shared / "run", "x")
    assert str(refused.value) == (
        f"cannot write the output folder {shared / 'run'}: {shared / '.run.lock'} is a "
        "symbolic link where a lock file goes: refused")
    assert not victim.exists() and not (shared / "run").exists()
    assert sorted(p.name for p in shared.iterdir()) == [".run.lock"]
