"""`profile-all attach PID` on real processes this test starts: a training loop sampled
without a restart (and asked for a torch.profiler window where it listens), and every
way an attach can go wrong: one line, a clear exit code, what was sampled kept, nothing
left running."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

import profile_all as pa
from conftest import AS_NOBODY, TARGETS, processes_with, profile_all, second_user_cannot


class Loop:
    """tests/targets/long_train.py in a process of its own, training until told to stop.
    `pace`: what it waits after each step (by default 5 ms, as for its data: the suite's
    two workers share two cores, and a loop that spins takes one whole for as long as its
    test waits); 0: it spins, for what samples its hottest functions."""

    def __init__(self, tmp_path, marks: str = "pa.step", env: dict[str, str] | None = None,
                 limit: float = 120, pace: float = 0.005) -> None:
        self.stop_file = tmp_path / f"stop-{marks}"
        self.process = subprocess.Popen(
            [sys.executable, str(TARGETS / "long_train.py"), str(self.stop_file), str(limit),
             marks, str(pace)], stdout=subprocess.PIPE, text=True,
            env={**os.environ, "OMP_NUM_THREADS": "1", **(env or {})})
        assert self.process.stdout.readline().strip() == "ready"
        self.pid = self.process.pid

    def finish(self) -> str:
        self.stop_file.touch()
        out, _ = self.process.communicate(timeout=60)
        return out

    def __enter__(self) -> Loop:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()


@pytest.fixture(scope="module")
def attached(tmp_path_factory):
    """A listening loop (it calls pa.step()) that spins, attached to for 2 s."""
    tmp_path = tmp_path_factory.mktemp("attach")
    with Loop(tmp_path, pace=0) as loop:
        time.sleep(0.5)
        done = profile_all("attach", loop.pid, "--duration", "2", "-o", tmp_path / "run")
        alive = loop.process.poll() is None
        out = loop.finish()
    return done, alive, out, tmp_path / "run", loop.pid


def test_attach_samples_a_running_loop_without_stopping_it(attached):
    done, alive, out, run, pid = attached
    assert done.returncode == 0, done.stderr
    assert f"sampling process {pid}" in done.stderr
    assert alive and int(out.split("steps=")[1]) > 0  # it trained on, and ended well
    report = pa.load(run)
    assert report.meta.target["kind"] == "process" and report.meta.target["pid"] == pid
    assert "long_train.py" in report.meta.target["command"]
    hottest = report.sampled_functions().head(3)["name"].tolist()
    assert any("torch/" in name for name in hottest), hottest
    run_rows = report.frame[report.frame["scope"] == "run"].set_index(["backend", "metric"])
    wall = run_rows.loc[("os", "wall_time"), "value"]
    assert 1.5 < wall < 10 and run_rows.loc[("os", "cpu_time"), "value"] > 0
    assert run_rows.loc[("memory", "peak_rss"), "value"] > 50 * 2**20
    names = {a.path for a in report.meta.artifacts}
    assert {"artifacts/py_spy.speedscope.json", "artifacts/py_spy.svg"} <= names
    assert processes_with(f"--pid {pid}") == []  # py-spy is gone
    viewed = profile_all("view", run, "--no-browser")  # (attach cannot take -b cprofile)
    assert viewed.returncode == 2 and viewed.stderr.strip() == (
        f"profile-all: error: {run} has no cProfile file: attach samples a running process "
        "with py-spy, which writes no cProfile file: its artifacts/py_spy.speedscope.json "
        "opens at https://www.speedscope.app")


def test_a_listening_loop_gives_a_torch_window_of_its_steps(attached):
    _done, _alive, _out, run, _pid = attached
    report = pa.load(run)
    steps = report.summary().set_index("name")
    assert steps.loc["ProfilerStep", "torch-profiler.calls.total"] == 5
    assert report.meta.passes[0].steps == 5 and report.meta.passes[0].step_source == "pa.step()"
    assert "aten::addmm" in set(report.operators()["name"])
    assert "artifacts/torch_trace.pt.trace.json.gz" in {a.path for a in report.meta.artifacts}


def test_a_loop_that_does_not_listen_is_sampled_and_said_so(tmp_path):
    with Loop(tmp_path, env={"PROFILE_ALL_LISTEN": "0"}) as loop:
        done = profile_all("attach", loop.pid, "--duration", "1", "-o", tmp_path / "run")
        loop.finish()
    assert done.returncode == 0, done.stderr
    report = pa.load(tmp_path / "run")
    assert "torch-profiler" not in set(report.frame["backend"])
    assert any(doubt.startswith("no operator or kernel trace: the process does not listen")
               for doubt in report.meta.doubts)
    from profile_all import on_demand  # its lock, in this user's folder, went with it
    from profile_all.runner.attaching.listen_folder import file_name

    assert not (on_demand.folder() / f"{file_name(loop.pid)}.attach.lock").exists()


def test_pa_listen_marks_a_window_by_optimizer_steps(tmp_path):
    with Loop(tmp_path, marks="listen") as loop:
        done = profile_all("attach", loop.pid, "--duration", "2", "--torch-steps", "3",
                           "-o", tmp_path / "run")
        loop.finish()
    assert done.returncode == 0, done.stderr
    record = pa.load(tmp_path / "run").meta.passes[0]
    assert (record.steps, record.step_source) == (3, "optimizer.step()")


def test_a_process_that_ends_during_the_attach_keeps_what_was_sampled(tmp_path):
    """The loop is told to end a second after the attach says it samples (a fixed time
    from the loop's start raced the attach's own start on a loaded machine)."""
    with Loop(tmp_path) as loop:
        started = time.monotonic()
        attach = subprocess.Popen(
            [sys.executable, "-m", "profile_all", "attach", str(loop.pid), "--duration", "30",
             "-o", str(tmp_path / "run")], stderr=subprocess.PIPE, text=True)
        assert f"sampling process {loop.pid}" in attach.stderr.readline()
        time.sleep(1.0)
        loop.finish()
        _out, err = attach.communicate(timeout=60)
        took = time.monotonic() - started
    assert attach.returncode == 0, err
    assert took < 25  # it did not wait out its duration
    report = pa.load(tmp_path / "run")
    assert any(doubt.startswith("the process ended after") for doubt in report.meta.doubts)
    assert not report.sampled_functions().empty


def test_ctrl_c_ends_the_attach_and_keeps_what_was_sampled(tmp_path):
    with Loop(tmp_path) as loop:
        attach = subprocess.Popen(
            [sys.executable, "-m", "profile_all", "attach", str(loop.pid), "--duration", "60",
             "-o", str(tmp_path / "run")], stderr=subprocess.PIPE, text=True)
        first = attach.stderr.readline()  # said once it samples
        assert f"sampling process {loop.pid}" in first
        time.sleep(1.0)
        attach.send_signal(signal.SIGINT)
        _out, err = attach.communicate(timeout=60)
        loop.finish()
    assert attach.returncode == 130, err
    report = pa.load(tmp_path / "run")
    assert report.meta.status == "interrupted" and report.meta.stopped_by == "SIGINT"
    assert not report.sampled_functions().empty
    assert processes_with(f"--pid {loop.pid}") == []


@pytest.mark.parametrize("who, message", [
    ("missing", "no process {pid} is running"),
    ("not python", "is not a Python program"),
    ("itself", "is profile-all itself or runs it"),
])
def test_bad_targets_are_refused_in_one_line(tmp_path, who, message):
    other = None
    if who == "missing":
        pid = 2**22 + 12345
    elif who == "not python":
        other = subprocess.Popen(["sleep", "60"])
        pid = other.pid
    else:
        pid = os.getpid()  # profile-all's parent: this test
    try:
        done = profile_all("attach", pid, "--duration", "1", "-o", tmp_path / "run")
    finally:
        if other is not None:
            other.kill()
            other.wait()
    assert done.returncode == 2
    line, = done.stderr.strip().splitlines()
    assert line.startswith("profile-all: error: ") and message.format(pid=pid) in line
    assert not (tmp_path / "run").exists()
    assert [p for p in tmp_path.iterdir()] == []  # no partial folder either


def test_another_user_s_process_is_refused(tmp_path):
    """Run as a user who is not root (nobody), attaching to root's process."""
    cannot = second_user_cannot()
    if cannot:
        pytest.skip(cannot)
    with Loop(tmp_path) as loop:
        done = subprocess.run(
            [*AS_NOBODY, sys.executable,
             "-m", "profile_all", "attach", str(loop.pid), "-o", "/tmp/never"],
            capture_output=True, text=True, timeout=120, cwd="/tmp")
        loop.finish()
    assert done.returncode == 2, done.stderr
    assert f"process {loop.pid} belongs to another user (uid 0)" in done.stderr


def test_a_stopped_process_and_a_second_attach_are_refused(tmp_path):
    with Loop(tmp_path) as loop:
        os.kill(loop.pid, signal.SIGSTOP)
        try:
            stopped = profile_all("attach", loop.pid, "--duration", "1", "-o", tmp_path / "a")
        finally:
            os.kill(loop.pid, signal.SIGCONT)
        first = subprocess.Popen(
            [sys.executable, "-m", "profile_all", "attach", str(loop.pid), "--duration", "10",
             "--torch-steps", "0", "-o", str(tmp_path / "first")], stderr=subprocess.PIPE,
            text=True)  # long enough for the second to start on a loaded machine (3 s: once not)
        assert "sampling process" in first.stderr.readline()
        second = profile_all("attach", loop.pid, "--duration", "1", "-o", tmp_path / "second")
        _out, first_err = first.communicate(timeout=60)
        loop.finish()
    assert stopped.returncode == 2
    assert f"process {loop.pid} is stopped (Ctrl-Z, SIGSTOP" in stopped.stderr
    assert f"kill -CONT {loop.pid}" in stopped.stderr
    assert second.returncode == 2, second.stderr
    assert f"another profile-all attach is attached to process {loop.pid}" in second.stderr
    assert first.returncode == 0, first_err
    assert not (tmp_path / "a").exists() and not (tmp_path / "second").exists()


def test_a_listening_process_s_files_are_gone_with_it(tmp_path):
    """A listener killed by SIGTERM (no atexit) leaves its marker; the next process that
    listens clears the files of processes that are gone."""
    from profile_all import on_demand

    with Loop(tmp_path) as loop:
        marker = on_demand.folder() / f"{on_demand.pid_namespace()}-{loop.pid}.json"
        assert marker.exists()
        loop.process.terminate()
        loop.process.wait()
    assert marker.exists()
    # and what an attach killed outright left: a request never taken, an answer unread
    left = [marker.with_name(marker.name.replace(".json", end))
            for end in (".request.json", ".0123456789abcdef.done.json")]
    for one in left:
        one.write_text("{}")
    with Loop(tmp_path, limit=0.5) as again:
        again.process.wait(60)
    assert not marker.exists() and not any(one.exists() for one in left)
