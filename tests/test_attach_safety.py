"""`profile-all attach` never harms the job it watches, nor the user who attaches: links a
process's user plants in its listen folder, an attach killed with its window open, a job
that runs its own torch.profiler, two users attaching at once, a job with a TMPDIR of its
own, a job still importing. Each made for real: a second user (nobody), SIGKILL, real
torch.profiler sessions in real training loops."""

from __future__ import annotations

import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

import profile_all as pa
from conftest import AS_NOBODY, TARGETS, profile_all, second_user_cannot
from profile_all.backends import py_spy_recorder
from profile_all.runner.attaching.attach import check_target
from profile_all.runner.attaching.listen_folder import file_name

_CANNOT = second_user_cannot()
as_root_with_a_second_user = pytest.mark.skipif(bool(_CANNOT), reason=_CANNOT)


class Target:
    """A process of tests/targets (run as `user`, nobody or this one), its stdout read by
    a thread so that waiting for a line has a deadline."""

    def __init__(self, script: str, *args: str, nobody: bool = False,
                 env: dict[str, str] | None = None, cwd: Path | None = None,
                 prefix: tuple[str, ...] = ()) -> None:
        self.process = subprocess.Popen(
            [*prefix, *(AS_NOBODY if nobody else []), sys.executable, str(TARGETS / script),
             *args],
            stdout=subprocess.PIPE, text=True, cwd=cwd,
            env={**os.environ, "OMP_NUM_THREADS": "1", **(env or {})})
        self.pid = self.process.pid
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.said: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.process.stdout:
            self.lines.put(line.strip())
        self.lines.put(None)

    def wait_for(self, wanted: str, timeout: float = 60) -> str:
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self.lines.get(timeout=max(0.1, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(f"no {wanted!r} line in {timeout} s: {self.said}") from None
            if line is None:
                raise AssertionError(f"the target ended before {wanted!r}: {self.said}")
            self.said.append(line)
            if line.startswith(wanted):
                return line

    def __enter__(self) -> Target:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(30)


@pytest.fixture
def shared():
    """A folder a second user may write (pytest's own are root's alone)."""
    folder = Path(tempfile.mkdtemp(prefix="profile-all-attach-", dir="/tmp"))
    folder.chmod(0o777)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def _three_steps_of(pid: int, tmp_path: Path) -> None:
    """Attach to `pid` for a window of 3 steps (the job stops at tmp_path/stop after), and
    check the window was given whole."""
    done = profile_all("attach", pid, "--duration", "0.3", "--torch-steps", "3",
                       "-o", tmp_path / "run")
    (tmp_path / "stop").touch()
    assert done.returncode == 0, done.stderr
    report = pa.load(tmp_path / "run")
    assert report.meta.passes[0].steps == 3, report.meta.doubts


def _attach(pid: int, out: Path, *args: str, nobody: bool = False) -> subprocess.Popen:
    return subprocess.Popen(
        [*(AS_NOBODY if nobody else []), sys.executable, "-m", "profile_all", "attach", str(pid),
         "-o", str(out), *args], stderr=subprocess.PIPE, text=True, cwd=out.parent,
        env={**os.environ, "HOME": str(out.parent), "COLUMNS": "200"})


@as_root_with_a_second_user
@pytest.mark.parametrize("answer, trace, said", [
    ("plain", "root-trace", "[Errno 40] a symbolic link:"),
    ("/dev/zero", "/dev/zero", "[Errno 40] a symbolic link:"),
    ("plain", "grows", "[Errno 27] ")])
def test_root_follows_no_link_the_process_s_user_plants(tmp_path, shared, monkeypatch,
                                                        answer, trace, said):
    """Root attaching to nobody's process: a link planted as the request made root
    overwrite a root-only file; links as the answer and trace copied a root-only trace
    into root's report, or read /dev/zero to 2.46 GB and a MemoryError; a trace past the
    bound (here 1 MiB) and growing as it is read is read to the bound, no further (written
    past it before the answer: a growing thread alone lost the race on a loaded VM, and
    the trace was read whole before it grew)."""
    secret = tmp_path / "secret"
    secret.mkdir(mode=0o700)
    victim = secret / "victim"
    victim.write_text("root's own")
    root_trace = secret / "root.trace.json"
    root_trace.write_text(json.dumps({"traceEvents": [
        {"ph": "X", "cat": "cpu_op", "name": "root_only_operator", "ts": 1, "dur": 5,
         "pid": 1, "tid": 1}]}))
    trace_to = str(root_trace) if trace == "root-trace" else trace
    monkeypatch.setenv("PROFILE_ALL_MAX_UNPACKED", "1M")  # the attach's bound on a file
    with Target("crafty_listener.py", str(shared / "stop"), answer, trace_to,
                nobody=True, env={"HOME": str(shared)}) as crafty:
        crafty.wait_for("ready")
        planted = Path(f"/tmp/profile-all-listen-65534/{file_name(crafty.pid)}.request.json")
        subprocess.run([*AS_NOBODY, "ln", "-sfn", str(victim), str(planted)], check=True)
        attach = _attach(crafty.pid, tmp_path / "run", "--duration", "0.5")
        _out, err = attach.communicate(timeout=120)
        (shared / "stop").touch()
    assert attach.returncode == 0, err
    assert "Traceback" not in err and "MemoryError" not in err
    assert victim.read_text() == "root's own"
    report = pa.load(tmp_path / "run")
    assert "torch-profiler" not in set(report.frame["backend"])
    assert "root_only_operator" not in (tmp_path / "run" / "report.html").read_text()
    assert any(doubt.startswith(f"no operator or kernel trace: {said}")
               and (trace != "grows" or "more than 1,048,576" in doubt)
               for doubt in report.meta.doubts), report.meta.doubts


def test_an_attach_killed_with_its_window_open_leaves_the_job_unprofiled(tmp_path):
    """SIGKILL to attach (the OOM killer, a CI timeout) while the window is open: torch
    .profiler stayed on in the job for ever (229 MB to 1,062 MB in 40 s, on to OOM). The
    job ends the window once its asker is gone."""
    with Target("listening_loop.py", str(tmp_path / "stop")) as loop:
        loop.wait_for("ready")
        attach = _attach(loop.pid, tmp_path / "run", "--duration", "0.3", "--torch-steps",
                         "1000000")
        while "asking process" not in attach.stderr.readline():
            assert attach.poll() is None
        loop.wait_for("profiler on")
        attach.kill()
        attach.wait()
        named = file_name(loop.pid)
        began = time.monotonic()
        loop.wait_for("profiler off", timeout=30)
        assert time.monotonic() - began < 10
        (tmp_path / "stop").touch()
        loop.wait_for("ended")
    folder = Path(tempfile.gettempdir()) / f"profile-all-listen-{os.getuid()}"
    assert not list(folder.glob(f"{named}.*.trace.json"))  # nobody to read it: none


def test_a_window_ends_at_its_deadline_whoever_asked(tmp_path):
    """The deadline lives in the job: asked by hand for a window of a million steps and
    one second, with no asker to watch, the job ends it itself and writes its trace."""
    window = "0123456789abcdef"
    with Target("listening_loop.py", str(tmp_path / "stop")) as loop:
        loop.wait_for("ready")
        folder = Path(tempfile.gettempdir()) / f"profile-all-listen-{os.getuid()}"
        (folder / f"{file_name(loop.pid)}.request.json").write_text(json.dumps(
            {"id": window, "steps": 1_000_000, "seconds": 1}))
        os.kill(loop.pid, signal.SIGUSR2)
        loop.wait_for("profiler on")
        loop.wait_for("profiler off", timeout=30)
        done = folder / f"{file_name(loop.pid)}.{window}.done.json"
        deadline = time.monotonic() + 30
        while not done.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        said = json.loads(done.read_text())
        (tmp_path / "stop").touch()
        loop.wait_for("ended")
    for answered in (done, done.with_name(done.name.replace(".done.", ".trace."))):
        answered.unlink()  # (what an attach reads, and removes)
    assert said["note"] == "ended at its deadline (1 s) with the steps so far"
    assert said["steps"] > 0 and "error" not in said


def test_a_job_with_its_own_torch_profiler_keeps_it(tmp_path):
    """Its own 150-step profile came out with 0 events, and the attach said nothing."""
    with Target("listening_loop.py", str(tmp_path / "stop"), "own") as loop:
        loop.wait_for("ready")
        done = profile_all("attach", loop.pid, "--duration", "0.3", "-o", tmp_path / "run")
        (tmp_path / "stop").touch()
        events = int(loop.wait_for("own events").split()[-1])
    assert done.returncode == 0, done.stderr
    assert events > 100
    report = pa.load(tmp_path / "run")
    assert "torch-profiler" not in set(report.frame["backend"])
    assert ("no operator or kernel trace: the process runs a torch.profiler session of its "
            "own, and torch runs one a process (a window would end it): no window was "
            "opened") in report.meta.doubts


def test_a_job_that_opens_its_own_profiler_ends_the_window_first(tmp_path):
    with Target("listening_loop.py", str(tmp_path / "stop"), "opens-own") as loop:
        loop.wait_for("ready")
        done = profile_all("attach", loop.pid, "--duration", "0.3", "--torch-steps", "1000",
                           "-o", tmp_path / "run")
        events = int(loop.wait_for("own events").split()[-1])
    assert done.returncode == 0, done.stderr
    assert events > 10  # its session, whole
    report = pa.load(tmp_path / "run")
    steps = report.meta.passes[0].steps
    assert steps < 1000 and not report.operators().empty  # what the window saw, kept
    assert ("the torch.profiler window ended early: the process opened a torch.profiler "
            f"session of its own ({steps} of the 1000 steps asked for)") in report.meta.doubts


@as_root_with_a_second_user
def test_two_users_attaching_at_once_one_is_refused(tmp_path, shared):
    """root and nobody attach to nobody's job: they took each other's window (one got 4
    of 5 steps, the other waited a minute for nothing). The lock is the job's, whoever
    took it first."""
    with Target("listening_loop.py", str(shared / "stop"), nobody=True,
                env={"HOME": str(shared)}) as loop:
        loop.wait_for("ready")
        named = file_name(loop.pid)
        # long enough for the second to start on a loaded machine (at 2 s, once it did not)
        first = _attach(loop.pid, tmp_path / "first", "--duration", "10")
        assert "sampling process" in first.stderr.readline()
        second = subprocess.run(
            [*AS_NOBODY, sys.executable, "-m", "profile_all", "attach", str(loop.pid), "-o",
             str(shared / "second")], capture_output=True, text=True, timeout=120,
            cwd=shared, env={**os.environ, "HOME": str(shared)})
        _out, err = first.communicate(timeout=120)
        (shared / "stop").touch()
    assert second.returncode == 2
    assert second.stderr.splitlines() == [
        f"profile-all: error: another profile-all attach is attached to process {loop.pid} "
        f"(it holds /tmp/profile-all-listen-65534/{named}.attach.lock): wait for it to end"]
    assert not (shared / "second").exists()
    assert first.returncode == 0, err
    assert pa.load(tmp_path / "first").meta.passes[0].steps == 5


@pytest.mark.parametrize("relative", [False, True])
def test_a_job_with_a_tmpdir_of_its_own_is_found(tmp_path, relative):
    """Schedulers set a TMPDIR a job: the job was said not to listen. A relative one is
    the job's working folder's."""
    job_tmp = tmp_path / "job-tmp"
    job_tmp.mkdir()
    with Target("listening_loop.py", str(tmp_path / "stop"), cwd=tmp_path,
                env={"TMPDIR": "job-tmp" if relative else str(job_tmp)}) as loop:
        loop.wait_for("ready")
        _three_steps_of(loop.pid, tmp_path)
    folder = job_tmp / f"profile-all-listen-{os.getuid()}"
    assert not list(folder.glob("*.attach.lock"))  # its lock went with the attach


def test_a_job_another_sampler_pauses_is_not_stopped(tmp_path):
    """py-spy pauses the process it samples (its default): a look at the job's state
    found it in tracing stop, and the attach was refused as 'stopped' 4 times in 8."""
    with Target("listening_loop.py", str(tmp_path / "stop")) as loop:
        loop.wait_for("ready")
        other = subprocess.Popen([py_spy_recorder.binary(), "record", "--rate", "1000",
                                  "-p", str(loop.pid), "-o", str(tmp_path / "other.svg")],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            time.sleep(1)
            for _ in range(200):  # one look in 20 found it paused
                check_target(loop.pid)
            done = profile_all("attach", loop.pid, "--duration", "0.3", "--torch-steps", "0",
                               "-o", tmp_path / "run")
        finally:
            other.terminate()
            other.wait()
            (tmp_path / "stop").touch()
    assert done.returncode == 0, done.stderr


def test_a_job_still_importing_is_not_listening_yet(tmp_path):
    (tmp_path / "slow_import.py").write_text("import time\ntime.sleep(120)\n")
    job = subprocess.Popen([sys.executable, "-c", "import profile_all, slow_import"],
                           cwd=tmp_path)
    try:
        time.sleep(0.5)
        done = profile_all("attach", job.pid, "--duration", "1", "-o", tmp_path / "run")
    finally:
        job.kill()
        job.wait()
    assert done.returncode == 0, done.stderr
    doubts = pa.load(tmp_path / "run").meta.doubts
    assert any(doubt.startswith(
        "no operator or kernel trace: the process is not listening yet (it was still "
        "importing, py-spy sees it run ") and "slow_import.py" in doubt for doubt in doubts), \
        doubts


@as_root_with_a_second_user
@pytest.mark.parametrize("planted, said", [
    (["ln", "-sfn", "VICTIM"], "[Errno 40] a symbolic link"),
    (["mkfifo"], "[Errno 1] not a regular file"), (["mkdir"], "[Errno 1] not a regular file")])
def test_a_lock_file_planted_otherwise_refuses_the_attach(tmp_path, shared, planted, said):
    """A link, a FIFO, a folder planted as the lock: a traceback, exit 1, a work folder
    left behind."""
    victim = tmp_path / "victim"
    victim.write_text("root's own")
    with Target("crafty_listener.py", str(shared / "stop"), "plain", "/dev/null",
                nobody=True, env={"HOME": str(shared)}) as crafty:
        crafty.wait_for("ready")
        lock = Path(f"/tmp/profile-all-listen-65534/{file_name(crafty.pid)}.attach.lock")
        subprocess.run([*AS_NOBODY, *[str(victim) if a == "VICTIM" else a for a in planted],
                        str(lock)], check=True)
        try:
            done = profile_all("attach", crafty.pid, "--duration", "0.5", "-o",
                               tmp_path / "run")
        finally:  # else a later process given the same PID finds it (a refused attach)
            subprocess.run([*AS_NOBODY, "rm", "-rf", str(lock)], check=False)
        (shared / "stop").touch()
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        f"profile-all: error: cannot take the attach lock of process {crafty.pid}: {said}: "
        f"'{lock}'"]
    assert victim.read_text() == "root's own"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["victim"]


def test_a_stop_during_the_window_is_said(tmp_path):
    """SIGTERM to attach as the window was open: `complete`, exit 0, nothing said of the
    window cut short."""
    with Target("listening_loop.py", str(tmp_path / "stop")) as loop:
        loop.wait_for("ready")
        attach = _attach(loop.pid, tmp_path / "run", "--duration", "0.3", "--torch-steps",
                         "100000")
        while "asking process" not in attach.stderr.readline():
            assert attach.poll() is None
        loop.wait_for("profiler on")
        time.sleep(0.5)
        attach.send_signal(signal.SIGTERM)
        _out, err = attach.communicate(timeout=120)
        loop.wait_for("profiler off")
        (tmp_path / "stop").touch()
    assert attach.returncode == 143, err
    report = pa.load(tmp_path / "run")
    assert (report.meta.status, report.meta.stopped_by) == ("interrupted", "SIGTERM")
    steps = report.meta.passes[0].steps
    assert 0 < steps < 100000
    assert (f"the torch.profiler window ended early: profile-all attach asked ({steps} of "
            "the 100000 steps asked for)") in report.meta.doubts


def test_a_job_that_ends_during_a_window_ends_well(tmp_path):
    """torch ends a process whose profiler still runs with a segmentation fault: a job
    that ended as its window was open exited 139 instead of 0. It ends the window first,
    and the attach gets the steps it took."""
    with Target("listening_loop.py", str(tmp_path / "stop"), "ends") as loop:
        loop.wait_for("ready")
        done = profile_all("attach", loop.pid, "--duration", "0.3", "--torch-steps", "1000",
                           "-o", tmp_path / "run")
        loop.wait_for("ended")
        assert loop.process.wait(30) == 0
    assert done.returncode == 0, done.stderr
    report = pa.load(tmp_path / "run")
    assert "the torch.profiler window ended with the process" in " ".join(report.meta.doubts)


def test_a_job_in_a_pid_namespace_of_its_own_is_found(tmp_path):
    """A job in a container's PID namespace names its files with its own pid (1, 2...):
    it was said not to listen."""
    import psutil

    unshare = shutil.which("unshare")
    if os.geteuid() != 0 or unshare is None:
        pytest.skip("needs root and unshare to start a job in a PID namespace of its own")
    with Target("listening_loop.py", str(tmp_path / "stop"),
                prefix=(unshare, "--pid", "--fork", "--mount-proc")) as loop:
        loop.wait_for("ready")
        job, = psutil.Process(loop.pid).children()
        _three_steps_of(job.pid, tmp_path)
