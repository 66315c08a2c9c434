"""`profile-all attach PID`: a report of a Python process that is already running, made
without restarting it or changing it.

For `duration` seconds (or until the process ends, or profile-all is stopped) py-spy
samples its stacks from outside (every thread, its child processes, native frames with
`native`), the memory backend's sampler reads its resident memory and its children's from
the OS, and its CPU time and threads are read at both ends. Where the process listens
(on_demand.py: its first `pa.step()`, or `pa.listen()`), it is also asked for a
torch.profiler window of `torch_steps` steps: the operators and kernels of a few steps,
hours into a job. What was sampled is kept whatever ends the attach; the report has the
shape of a run's, its target the process (pid, command line, start time, user).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from profile_all import validate
from profile_all.backends.memory.backend import DEFAULT_INTERVAL
from profile_all.backends.py_spy_recorder import Recorder, why_not
from profile_all.errors import ProfileAllError, UsageError
from profile_all.runner.attaching import attach_window
from profile_all.runner.watching.child_processes import Stopped, StopRequests
from profile_all.runs.folder import RunDirectory

_SAMPLER = Path(__file__).resolve().parents[2] / "backends" / "memory" / "sampler.py"


@dataclass
class Attached:
    """What an attach gathered, for attach_report."""

    pid: int
    target: dict[str, Any]
    run_dir: RunDirectory
    started: float = 0.0  # epoch
    seconds: float = 0.0  # how long it sampled
    ended: str = ""  # how it ended: "" (its duration), the process ended, a stop signal
    stopped_by: str | None = None
    cpu: tuple[float, float] = (0.0, 0.0)  # the process's CPU time at both ends
    threads: int = 0
    children: list[str] = field(default_factory=list)
    spy: Recorder | None = None
    spy_failure: str = ""
    memory_failure: str = ""
    memory_samples: Path | None = None
    window: dict[str, Any] = field(default_factory=dict)  # the torch window's answer
    trace: Path | None = None  # its trace, copied out of the process's folder
    window_asked: int = 0  # the steps it was asked for
    window_note: str = ""


#: looks at a process's state that say whether it is held stopped, and the time between
STATE_LOOKS, STATE_GAP = 5, 0.05


def _held(process: psutil.Process, state: str) -> bool:
    """Stopped at every look, and no CPU time spent between the first and the last: a
    sampler that pauses the process to read it (py-spy's default) leaves it in tracing stop
    for a moment, over and over (on a loaded machine, at every one of 5 looks: an attach
    refused in CI), while the process runs between its pauses; a debugger or SIGSTOP holds
    it still."""
    stopped = (psutil.STATUS_STOPPED, psutil.STATUS_TRACING_STOP)
    try:
        spent = sum(process.cpu_times()[:2])
        for _ in range(STATE_LOOKS - 1):
            if state not in stopped:
                return False
            time.sleep(STATE_GAP)
            state = process.status()
        return state in stopped and sum(process.cpu_times()[:2]) == spent
    except psutil.NoSuchProcess:
        return False  # gone: said where the attach meets it


def check_target(pid: Any) -> psutil.Process:
    """The process, or one line on why it cannot be attached to."""
    validate.whole("pid", pid, 1)
    if pid == os.getpid() or pid in {parent.pid for parent in psutil.Process().parents()}:
        raise UsageError(f"process {pid} is profile-all itself or runs it: attach to another")
    try:
        process = psutil.Process(pid)
        owner, ours = process.uids().real, os.getuid()
        state = process.status()
        if state == psutil.STATUS_ZOMBIE:
            raise psutil.NoSuchProcess(pid)
    except psutil.NoSuchProcess:
        raise UsageError(f"no process {pid} is running") from None
    except psutil.AccessDenied:
        raise UsageError(f"process {pid} cannot be read by this user: attach as its user, "
                         "or as root") from None
    if _held(process, state):
        raise UsageError(f"process {pid} is stopped (Ctrl-Z, SIGSTOP, or a debugger holds it): "
                         f"let it go on (kill -CONT {pid}) and attach again")
    if owner != ours and ours != 0:
        raise UsageError(f"process {pid} belongs to another user (uid {owner}): attach as "
                         f"that user, or as root (sudo profile-all attach {pid})")
    reason = why_not(of_own_child=False)
    if reason:
        raise UsageError(f"cannot attach to process {pid}: {reason}")
    return process


def gather(process: psutil.Process, run_dir: RunDirectory, *, duration: float, rate: int,
           native: bool, idle: bool, torch_steps: int | None,
           progress: Callable[[str], None] | None = None) -> Attached:
    """Sample the process for `duration` seconds (less if it ends or a stop comes), then,
    where it listens, ask it for a torch.profiler window (after the sampling, so that the
    samples never hold the window's own work); told to `progress` as each begins."""
    said = progress or (lambda line: None)
    attached = Attached(process.pid, _described(process), run_dir)
    stops = StopRequests()
    with stops.installed(), _only_attach(process, run_dir) as hold:
        attached.cpu = (_cpu(process), 0.0)
        attached.spy = Recorder(process.pid, run_dir.scratch / "py_spy.json",
                                run_dir.scratch / "py_spy.log", rate=rate, native=native,
                                idle=idle)
        sampler = _start_memory_sampler(process.pid, run_dir, attached)
        try:
            attached.spy.start()
        except ProfileAllError as error:  # nothing sampled: refused, nothing written
            _stop_memory_sampler(sampler)
            run_dir.discard()
            raise UsageError(_python_or(str(error), process.pid)) from None
        said(f"sampling process {process.pid} ({attached.target['command'][:80]}) for "
             f"{duration:g} s; Ctrl-C ends it sooner, keeping what was sampled")
        attached.started, began = time.time(), time.monotonic()
        _wait(process, duration, stops, attached)
        attached.threads, attached.children = _threads_and_children(process)
        attached.cpu = (attached.cpu[0], _cpu(process))
        try:
            attached.spy.stop()
        except ProfileAllError as error:
            attached.spy_failure = str(error)
        attached.seconds = time.monotonic() - began
        _stop_memory_sampler(sampler)
        if torch_steps is not None and not attached.ended:
            _window(process, hold, torch_steps, attached, stops, said)
            if stops.signum is not None:  # stopped as the window was open: it was cut short
                attached.stopped_by = signal.Signals(stops.signum).name
                attached.ended = f"profile-all got {attached.stopped_by} during the window"
    return attached


@contextlib.contextmanager
def _only_attach(process: psutil.Process, run_dir: RunDirectory
                 ) -> Iterator[attach_window.Hold]:
    """One attach at a time (attach_window.Hold); a second is refused in one line, its
    folder never made."""
    hold = attach_window.Hold(process)
    try:
        refused = hold.take()
    except OSError as error:
        refused = f"cannot take the attach lock of process {process.pid}: {error}"
    if refused:
        hold.close()
        run_dir.discard()
        raise UsageError(refused)
    try:
        yield hold
    finally:
        hold.close()


def _window(process: psutil.Process, hold: attach_window.Hold, steps: int,
            attached: Attached, stops: StopRequests, said: Callable[[str], None]) -> None:
    """Ask the process for a torch.profiler window of `steps` steps, where it listens, and
    keep its trace; where it does not, or refused, say why in `window_note`."""
    folder, why_not = hold.listening()
    if folder is None:
        attached.window_note = why_not
        return
    attached.window_asked = steps
    said(f"asking process {process.pid} for a torch.profiler window of {steps} steps (up to "
         f"{attach_window.WINDOW_WAIT:g} s; Ctrl-C ends it with the steps so far)")
    try:
        window_id = attach_window.request(folder, steps)
        answer = attach_window.answer(folder, window_id, process, stops)
        if answer is None:
            attached.window_note = ("the process was asked for a torch.profiler window and "
                                    "wrote no trace (it ended, or took no step)")
        elif answer.get("refused"):
            attached.window_note = f"no operator or kernel trace: {answer['refused']}"
        else:
            attached.window = answer
            if not answer.get("error"):
                attached.trace = attach_window.copied_trace(
                    folder, window_id, attached.run_dir.scratch / "torch_window.json")
    except OSError as error:  # a file of the folder refused, or the process gone
        attached.window_note = f"no operator or kernel trace: {error}"


def _python_or(said: str, pid: int) -> str:
    """py-spy's failure, said plainly where the process is not Python at all."""
    lowered = said.lower()
    if any(words in lowered for words in ("python version", "python interpreter",
                                           "no python processes")):
        return (f"process {pid} is not a Python program (py-spy found no Python interpreter "
                "in it): attach profiles Python processes")
    return said


def _described(process: psutil.Process) -> dict[str, Any]:
    with process.oneshot():
        return {"kind": "process", "pid": process.pid, "uid": process.uids().real,
                "command": " ".join(process.cmdline()) or process.name(),
                "started": time.strftime("%Y-%m-%dT%H:%M:%S",
                                         time.localtime(process.create_time())),
                "user": process.username()}


def _cpu(process: psutil.Process) -> float:
    with contextlib.suppress(psutil.Error):
        times = process.cpu_times()
        return times.user + times.system
    return 0.0


def _threads_and_children(process: psutil.Process) -> tuple[int, list[str]]:
    try:
        return process.num_threads(), [
            f"{child.pid}: {' '.join(child.cmdline())[:200]}"
            for child in process.children(recursive=True)]
    except psutil.Error:
        return 0, []


def _start_memory_sampler(pid: int, run_dir: RunDirectory,
                          attached: Attached) -> subprocess.Popen | None:
    """The memory sampler of the process; None, said, where it cannot start (this
    Python not runnable by this user, no process left)."""
    path = run_dir.scratch / "memory.samples"
    path.touch()
    try:
        return subprocess.Popen([sys.executable, str(_SAMPLER), str(pid),
                                 str(DEFAULT_INTERVAL * 5), str(path)],
                                stdin=subprocess.DEVNULL, start_new_session=True)
    except OSError as error:
        attached.memory_failure = f"the memory sampler could not start: {error}"
        return None


def _stop_memory_sampler(sampler: subprocess.Popen | None) -> None:
    if sampler is None:
        return
    if sampler.poll() is None:
        sampler.send_signal(signal.SIGTERM)
    try:
        sampler.wait(10)
    except subprocess.TimeoutExpired:
        sampler.kill()
        sampler.wait()


def _wait(process: psutil.Process, duration: float, stops: StopRequests,
          attached: Attached) -> None:
    deadline = time.monotonic() + duration
    try:
        with stops.waiting():
            while time.monotonic() < deadline:
                if not process.is_running() or process.status() == psutil.STATUS_ZOMBIE:
                    attached.ended = "the process ended"
                    return
                time.sleep(0.05)
    except psutil.NoSuchProcess:
        attached.ended = "the process ended"
    except Stopped as stopped:
        attached.stopped_by = signal.Signals(stopped.signum).name
        attached.ended = f"profile-all got {attached.stopped_by}"
