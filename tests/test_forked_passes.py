"""Passes forked from the fork server look to the target exactly like `python SCRIPT ARGS`,
also where the target starts processes of its own: DataLoader workers, a spawn pool, a
fork. Each case is run plain and forked, and must print the same; the DataLoader also in
fresh interpreters (--fresh-processes)."""

from __future__ import annotations

import subprocess
import sys

import pytest

import profile_all as pa
from conftest import TARGETS, profile_all_here
from profile_all import region_log

WORKERS = TARGETS / "workers.py"
EXPECTED = {"dataloader": "dataloader total 506", "spawn": "spawn squares [0, 1, 4, 9, 16]",
            "fork": "fork child exit 7"}


@pytest.mark.parametrize("how", list(EXPECTED))
def test_processes_of_the_target_work_in_forked_and_fresh_passes(tmp_path, how):
    plain = subprocess.run([sys.executable, str(WORKERS), how], capture_output=True,
                           text=True, check=True, timeout=120)
    assert EXPECTED[how] in plain.stdout
    ways = [("forked", [])] + ([("fresh", ["--fresh-processes"])] if how == "dataloader" else [])
    for name, extra in ways:
        done = profile_all_here("run", "--separate-passes", WORKERS, "-b", "wallclock", "-b",
                                "cprofile", *extra, "--show-output", "all",
                                "-o", tmp_path / name, "--", how)
        assert done.returncode == 0, done.stderr
        assert done.stdout.count(EXPECTED[how]) == 2, done.stdout  # the output of each pass
        report = pa.load(tmp_path / name)
        assert report.meta.process_start.startswith(  # its server new or kept: either
            "fork" if name == "forked" else "fresh interpreter")
        assert report.meta.region_marks == region_log.MARKS_IN
        assert list(report.passes()["status"]) == ["ok", "ok"]
        if how == "dataloader":  # 6 batches, a step each, in both passes
            assert list(report.passes()["steps"]) == [6, 6]


def test_each_forked_pass_draws_fresh_random_seeds(tmp_path):
    """A fresh interpreter seeds Python's, numpy's and torch's generators from the OS, so
    an unseeded script draws differently run after run; each forked pass does too (torch's
    seed was once the server's in every pass: an unseeded loop stopped at the same batch)."""
    script = tmp_path / "draws.py"
    script.write_text("import random, numpy, torch\n"
                      "print('DRAWS', random.random(), numpy.random.random(), "
                      "torch.initial_seed(), torch.rand(1).item())\n")
    done = profile_all_here("run", "--separate-passes", script, "-b", "wallclock", "-b",
                            "cprofile", "-b", "memory", "--show-output", "all", "-o",
                            tmp_path / "run")
    assert done.returncode == 0, done.stderr
    draws = [line.split()[1:] for line in done.stdout.splitlines() if line.startswith("DRAWS")]
    assert len(draws) == 3
    for generator in zip(*draws, strict=True):  # each generator, one draw a pass
        assert len(set(generator)) == 3, draws


WAITS = """import sys, time
from pathlib import Path
import profile_all as pa
print("ready", flush=True)
for step in range(5):
    while not Path(sys.argv[1]).exists():
        time.sleep(0.05)
    pa.step()
"""


def test_a_fork_server_killed_mid_run_loses_nothing(tmp_path):
    """The kernel's out-of-memory killer picks the biggest process: the fork server, which
    holds torch. It was exit 1, nothing said, no report, the earlier passes lost. The pass
    it forked goes on without it, the next run in fresh interpreters, and the run says so."""
    import os
    import signal

    import psutil

    from conftest import Running

    script, go_on = tmp_path / "waits.py", tmp_path / "go-on"
    script.write_text(WAITS)
    with Running("run", "--separate-passes", script, "-b", "wallclock", "-b", "cprofile",
                 "-b", "memory", "-o", tmp_path / "run", "--show-output", "all", "--",
                 go_on) as running:
        running.wait_for("ready")
        servers = [child for child in psutil.Process(running.process.pid).children()
                   if "profile_all.runner.starting.forkserver" in " ".join(child.cmdline())]
        assert len(servers) == 1
        worker = servers[0].children()
        os.kill(servers[0].pid, signal.SIGKILL)  # (a zombie until profile-all looks)
        go_on.touch()
        assert running.finish() == 0, running.stderr
    assert worker and not any(one.is_running() for one in worker)
    report = pa.load(tmp_path / "run")
    assert report.meta.status == "complete"
    assert [(p.status, p.steps) for p in report.meta.passes] == [("ok", 5)] * 3
    assert report.meta.doubts[0] == (
        "the fork server was killed by SIGKILL as pass 1 ran: the kernel's out-of-memory "
        "killer picks the biggest process (dmesg says); from pass 2 on, the passes ran in "
        "fresh interpreters, each importing torch")
    assert set(report.frame["backend"]) >= {"wallclock", "cprofile", "memory"}
    assert report.meta.process_start == \
        "fork, from pass 2: fresh interpreter (the fork server was gone)"


def test_a_fork_server_killed_as_it_starts_is_replaced(tmp_path):
    """Killed in its first 50 ms (as profile-all told it what more to import): exit 1,
    nothing said, nothing written. The run starts another, or runs its passes fresh."""
    import os
    import signal
    import time

    import psutil

    command = subprocess.Popen(
        [sys.executable, "-m", "profile_all", "run", str(TARGETS / "speed.py"), "-b",
         "wallclock", "-b", "cprofile", "-o", str(tmp_path / "run"), "-q"],
        stderr=subprocess.PIPE, text=True)
    deadline, killed = time.monotonic() + 30, None
    while killed is None and time.monotonic() < deadline:
        for child in psutil.Process(command.pid).children():
            if "profile_all.runner.starting.forkserver" in " ".join(child.cmdline()):
                os.kill(child.pid, signal.SIGKILL)
                killed = child.pid
                break
        time.sleep(0.002)
    _out, err = command.communicate(timeout=240)
    assert killed is not None
    assert command.returncode == 0, err
    assert err.splitlines()[-1] == f"profile-all: complete, exit code 0: {tmp_path / 'run'}"
    assert [p.status for p in pa.load(tmp_path / "run").meta.passes] == ["ok", "ok"]


SHORT = """import time
import profile_all as pa
for _ in range(8):
    time.sleep(0.002)
    pa.step()
"""


def test_a_repeated_run_starts_its_server_when_a_window_did_not_come(tmp_path, own_servers):
    """With --repeat every timing pass starts a fresh interpreter and the other passes run
    in windows of the first one's steps, so the run starts no server as it begins
    (test_early_server.py); a window the script does not reach (8 steps) forks its pass
    from one started then."""
    script = tmp_path / "short.py"
    script.write_text(SHORT)
    short = pa.run(script, backends=["wallclock", "cprofile"], repeat=2, out=tmp_path / "short")
    assert [(p.backends, p.host, p.status) for p in short.meta.passes] == [
        (["wallclock"], None, "ok"), (["cprofile"], None, "ok"), (["wallclock"], None, "ok")]
    assert short.meta.process_start == "fork, timing repeats: fresh interpreter"
