"""A torch.profiler window on demand, for a job that is already running.

`profile-all attach PID` samples a running process from outside (py-spy, its memory from
the OS); what it cannot see from there is the operators and kernels torch runs. A process
that listens (its first `pa.step()` makes it listen, and so does `pa.listen()`;
PROFILE_ALL_LISTEN=0 in its environment turns both off) takes a
request: attach writes it (`<pid>.request.json` in the user's listen folder: how many
steps) and sends SIGUSR2; the process starts torch.profiler at once, marks each step
(`pa.step()`, else each `optimizer.step()`) and after N of them writes the trace
(`<pid>.trace.json` there) and `<pid>.done.json`. A second SIGUSR2 while a window is open
ends it early.

Listening costs nothing until asked: a signal handler and a file that says the process
listens (with the process's start time, so that a pid used again is not taken for it).
It never replaces a SIGUSR2 handler the process has, and it never runs inside a
profile-all pass (the pass's own backends profile the target there). Whatever goes wrong
in a window is written to the done file, never raised into the process.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import stat
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

SIGNAL = signal.SIGUSR2
ENVIRONMENT = "PROFILE_ALL_LISTEN"
_window: _Window | None = None
_listening = False
_marks_steps = False  # the process calls pa.step(): its steps are those
_asked_to_listen = False  # by its first pa.step(), once


def folder(uid: int | None = None) -> Path:
    """Where the listening processes of user `uid` (ours) say so, and their requests,
    answers and traces are written: a folder only that user may enter."""
    owner = os.getuid() if uid is None else uid
    return Path(tempfile.gettempdir()) / f"profile-all-listen-{owner}"


def trace_path(pid: int, uid: int | None = None) -> Path:
    """Where process `pid` writes the trace of its window (never a path a request names)."""
    return folder(uid) / f"{pid}.trace.json"


def own_folder() -> Path | None:
    """This user's listen folder, made if need be; None where it is not this user's alone
    (another user made it first: requests read from it could not be trusted)."""
    where = folder()
    try:
        where.mkdir(mode=0o700, exist_ok=True)
        said = os.lstat(where)
    except OSError:
        return None
    alone = stat.S_ISDIR(said.st_mode) and said.st_uid == os.getuid() and not (
        said.st_mode & 0o077)
    return where if alone else None


def start_time(pid: int) -> str:
    """The process's start, as the kernel counts it (Linux: /proc/PID/stat's 22nd field);
    "" where it cannot be read."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return ""
    return stat.rpartition(")")[2].split()[19]


def listen(marks_steps: bool = False) -> bool:
    """Take on-demand requests from now on; False where this process cannot (not the main
    thread, SIGUSR2 already handled, or PROFILE_ALL_LISTEN=0). `marks_steps`: the
    process calls `pa.step()`, which then marks a window's steps (else optimizer steps)."""
    global _listening, _marks_steps
    _marks_steps = _marks_steps or marks_steps
    if _listening:
        return True
    if (os.environ.get(ENVIRONMENT) == "0" or not hasattr(signal, "SIGUSR2")
            or "profile_all.runner.inside.worker" in sys.modules  # a pass profiles it
            or threading.current_thread() is not threading.main_thread()
            or signal.getsignal(SIGNAL) not in (signal.SIG_DFL, None)):
        return False
    where = own_folder()
    if where is None:
        return False
    _forget_the_dead(where)
    try:
        (where / f"{os.getpid()}.json").write_text(json.dumps(
            {"pid": os.getpid(), "start": start_time(os.getpid()),
             "python": sys.executable}))
    except OSError:
        return False
    signal.signal(SIGNAL, _asked)
    _listening = True
    import atexit

    atexit.register(_unlisten)
    return True


def stepped() -> None:
    """`pa.step()` outside a pass: the first makes the process listen (its steps then mark
    a window's), and each marks a step of the window that is open."""
    global _asked_to_listen
    if not _asked_to_listen:
        _asked_to_listen = True
        listen(marks_steps=True)
    elif _window is not None and _marks_steps:
        _window.step()


def _forget_the_dead(where: Path) -> None:
    """The files of processes that listened and are gone (a SIGTERM skips atexit): a
    marker whose pid runs no more, or runs another process (its start time differs)."""
    for marker in where.glob("*.json"):
        pid = marker.name.split(".")[0]
        if not pid.isdigit() or marker.name != f"{pid}.json":
            continue
        with contextlib.suppress(OSError, ValueError):
            if json.loads(marker.read_text()).get("start") == start_time(int(pid)):
                continue
            for stale in where.glob(f"{pid}.*"):
                stale.unlink()


def _unlisten() -> None:
    with contextlib.suppress(OSError):
        (folder() / f"{os.getpid()}.json").unlink()


def _asked(signum: int, frame: Any) -> None:
    """SIGUSR2: open the window a request asks for, or end the one that is open."""
    global _window
    if _window is not None:
        _window.end("ended early: profile-all attach asked")
        return
    request = folder() / f"{os.getpid()}.request.json"
    try:
        asked = json.loads(request.read_text())
        request.unlink()
        _window = _Window(int(asked["steps"]), trace_path(os.getpid()))
    except Exception as error:  # never into the process
        _answer({"error": f"{type(error).__name__}: {error}"})


def _answer(said: dict[str, Any]) -> None:
    path = folder() / f"{os.getpid()}.done.json"
    with contextlib.suppress(OSError):
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(said))
        os.replace(tmp, path)


class _Window:
    """torch.profiler over the next `steps` steps, its trace written to `trace`."""

    def __init__(self, steps: int, trace: Path) -> None:
        import torch
        from torch.optim.optimizer import register_optimizer_step_post_hook
        from torch.profiler import ProfilerActivity, profile

        self.steps, self.trace, self.count = steps, trace, 0
        self.marked_by = "pa.step()" if _marks_steps else "optimizer.step()"
        activities = [ProfilerActivity.CPU]
        if torch.cuda.is_available():
            activities.append(ProfilerActivity.CUDA)
        self.profile = profile(activities=activities)
        self.profile.record_steps = True
        self.hook = None if _marks_steps else register_optimizer_step_post_hook(
            lambda *_args: self.step())
        self.profile.start()

    def step(self) -> None:
        """A step ended (`pa.step()`, or `optimizer.step()` in a process that calls no
        `pa.step()`)."""
        self.count += 1
        if self.count >= self.steps:
            self.end("")
        else:
            self.profile.step()

    def end(self, note: str) -> None:
        global _window
        _window = None
        if self.hook is not None:
            self.hook.remove()
        said: dict[str, Any] = {"steps": self.count, "marked_by": self.marked_by,
                                "note": note}
        try:
            self.profile.stop()
            self.profile.export_chrome_trace(str(self.trace))
        except Exception as error:  # never into the process
            said["error"] = f"{type(error).__name__}: {error}"
        _answer(said)
