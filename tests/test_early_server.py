"""The fork server that `profile-all run` and `model` start as the command starts (its
`import torch` begins before the CLI's own imports): a run forks its passes from it, and a
command that does not use it leaves nothing of it running."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
import uuid

import psutil

import profile_all as pa
from conftest import TARGETS, profile_all

PARENT_COMMAND = """
import os
print("parent:", open(f"/proc/{os.getppid()}/cmdline", "rb").read().replace(b"\\0", b" ").decode())
"""


def _marked() -> tuple[dict[str, str], str]:
    mark = uuid.uuid4().hex
    return {"PROFILE_ALL_TEST_MARK": mark}, mark


def _servers_marked(mark: str) -> list[int]:
    """Live fork servers whose environment holds `mark` (what one command started)."""
    found = []
    for process in psutil.process_iter(["cmdline", "status"]):
        with contextlib.suppress(psutil.Error):
            if ("profile_all.runner.starting.forkserver" in " ".join(process.info["cmdline"] or [])
                    and process.info["status"] != psutil.STATUS_ZOMBIE
                    and process.environ().get("PROFILE_ALL_TEST_MARK") == mark):
                found.append(process.pid)
    return found


def test_a_run_forks_its_passes_from_the_server_the_command_started(tmp_path):
    script = tmp_path / "parent.py"
    script.write_text(PARENT_COMMAND)
    env, mark = _marked()
    done = profile_all("run", script, "-b", "wallclock", "-b", "cprofile", "-o",
                       tmp_path / "run", env=env)
    assert done.returncode == 0, done.stderr
    parents = [line for line in done.stdout.splitlines() if line.startswith("parent:")]
    # the first pass's output is shown: its parent, the server begun with `import torch`
    # alone that then took the run's other modules
    assert len(parents) == 1
    assert "profile_all.runner.starting.forkserver" in parents[0]
    assert "--more-later torch" in parents[0]
    assert _servers_marked(mark) == []


def test_a_refused_run_leaves_no_server_running(tmp_path):
    env, mark = _marked()
    done = profile_all("run", tmp_path / "missing.py", env=env)
    assert done.returncode == 2
    assert "script not found" in done.stderr
    assert _servers_marked(mark) == []


def test_a_run_of_fresh_interpreters_forks_nothing(tmp_path):
    script = tmp_path / "parent.py"
    script.write_text(PARENT_COMMAND)
    env, mark = _marked()
    done = profile_all("run", script, "-b", "wallclock", "--fresh-processes", "-o",
                       tmp_path / "run", env=env)
    assert done.returncode == 0, done.stderr
    parent = next(line for line in done.stdout.splitlines() if line.startswith("parent:"))
    assert "forkserver" not in parent and "profile_all" in parent
    assert _servers_marked(mark) == []


def test_a_repeated_run_whose_passes_all_start_elsewhere_starts_no_server(tmp_path):
    """`--repeat 2`: both timing passes in fresh interpreters, cProfile in a window of the
    first one's steps: no server is started, early or later (watched as the run runs)."""
    env, mark = _marked()
    command = subprocess.Popen(
        [sys.executable, "-m", "profile_all", "run", str(TARGETS / "speed.py"), "-b",
         "wallclock", "-b", "cprofile", "--repeat", "2", "-o", str(tmp_path / "run"), "--",
         "0.001"], env={**os.environ, **env}, stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE, text=True)
    seen: list[int] = []
    while command.poll() is None:
        seen += _servers_marked(mark)
        time.sleep(0.05)
    assert command.returncode == 0, command.stderr.read()
    assert seen == []
    meta = pa.load(tmp_path / "run").meta
    assert [(p.backends, p.host) for p in meta.passes] == [
        (["wallclock"], None), (["cprofile"], 1), (["wallclock"], None)]
    assert meta.process_start == "fresh interpreter"
