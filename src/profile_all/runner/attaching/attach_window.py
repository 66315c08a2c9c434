"""The torch.profiler window `profile-all attach` asks a listening process for (the process's
side: on_demand.py), and the lock that makes one attach at a time the process's.

The lock is a file in the process's listen folder (`PID.attach.lock`), whoever attaches:
two attaches by two users (root and the process's own) took each other's window, one
getting 4 of 5 steps, the other waiting a minute for nothing. The request names the
window (a random id: its answer and trace are named after it), how long it may stay open
(the process ends it at that deadline itself) and the asking process, so that the
process ends the window when the attach is gone (killed, out of memory, a CI timeout)
rather than profile for ever. Everything in the folder is read and written through
`ListenFolder`, which trusts no path the process's user controls.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import secrets
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil

from profile_all import on_demand
from profile_all.readers import limits
from profile_all.runner.attaching.listen_folder import ListenFolder, Refused, file_name
from profile_all.runner.watching.child_processes import Stopped, StopRequests
from profile_all.runner.watching.hang_site import main_thread_frames
from profile_all.runs import name_lock

#: seconds the process keeps a window open at most (it ends it then with the steps so far)
WINDOW_WAIT = 60.0
#: seconds more for the process to write its trace once the window ended
TRACE_GRACE = 30.0
#: the lock file in the process's folder
LOCK = "{pid}.attach.lock"


def handles_the_signal(pid: int) -> bool:
    """Whether the kernel says the process catches SIGUSR2 (/proc/PID/status' SigCgt)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    caught = next((line.split()[1] for line in status.splitlines()
                   if line.startswith("SigCgt:")), "0")
    return bool(int(caught, 16) >> (on_demand.SIGNAL - 1) & 1)


def found(process: psutil.Process) -> ListenFolder | None:
    """The process's listen folder, where it listens and handles the signal."""
    try:
        uid, gid = process.uids().real, process.gids().real
    except psutil.Error:
        return None
    folder = ListenFolder.find(process.pid, uid, gid)
    if folder is not None and not handles_the_signal(process.pid):
        folder.close()
        return None
    return folder


class Hold:
    """What one attach holds of a process: its listen folder, where it listens, and the
    lock that makes this attach the only one: in that folder, whoever attaches, else
    this user's own (a process that does not listen has no window to take). Each lock's
    file goes when it is let go."""

    def __init__(self, process: psutil.Process) -> None:
        self.process, self.folder = process, found(process)
        self._in_folder: int | None = None
        self._own: tuple[Path, int] | None = None

    def take(self) -> str:
        """"" once the lock is held; else why this attach is refused."""
        if self.folder is not None:
            where = self.folder.path / LOCK.format(pid=self.folder.named)
            self._in_folder = self.folder.lock(where.name)
            held = self._in_folder is not None
        else:
            mine = on_demand.own_folder()
            if mine is None:  # another user made this user's folder: no lock to be had
                return ""
            where = mine / LOCK.format(pid=file_name(self.process.pid))
            lock = name_lock.take(where)
            self._own = (where, lock) if lock is not None else None
            held = lock is not None
        if not held:
            return (f"another profile-all attach is attached to process {self.process.pid} "
                    f"(it holds {where}): wait for it to end")
        return ""

    def listening(self) -> tuple[ListenFolder | None, str]:
        """(the folder, "") where the process listens, else (None, why no window): a
        process that began listening during the sampling is locked now."""
        if self.folder is not None:
            return self.folder, ""
        folder = found(self.process)
        if folder is None:
            return None, not_listening(self.process)
        self.folder = folder
        try:
            self._in_folder = folder.lock(LOCK.format(pid=folder.named))
        except OSError as error:
            return None, f"no operator or kernel trace: {error}"
        if self._in_folder is None:
            return None, ("no operator or kernel trace: another profile-all attach holds "
                          "the process's torch.profiler window")
        return folder, ""

    def close(self) -> None:
        if self.folder is not None:
            if self._in_folder is not None:
                self.folder.unlock(LOCK.format(pid=self.folder.named), self._in_folder)
            self.folder.close()
        if self._own is not None:
            name_lock.release(*self._own)
        self.folder, self._in_folder, self._own = None, None, None


def _same_pid_namespace(pid: int) -> bool:
    try:
        return os.readlink("/proc/self/ns/pid") == os.readlink(f"/proc/{pid}/ns/pid")
    except OSError:
        return False


def request(folder: ListenFolder, steps: int) -> str:
    """Ask for a window of `steps` steps; its id. The process ends it WINDOW_WAIT seconds
    on, or once this process is gone (where the process can tell: the same PID namespace)."""
    window_id = secrets.token_hex(16)
    asker = {"pid": os.getpid(), "start": on_demand.start_time(os.getpid())} \
        if _same_pid_namespace(folder.pid) else None
    _send(folder, {"id": window_id, "steps": steps, "seconds": WINDOW_WAIT, "asker": asker})
    return window_id


def _send(folder: ListenFolder, asked: dict[str, Any]) -> None:
    folder.write(f"{folder.named}.request.json", json.dumps(asked).encode())
    os.kill(folder.pid, on_demand.SIGNAL)


def answer(folder: ListenFolder, window_id: str, process: psutil.Process,
           stops: StopRequests) -> dict[str, Any] | None:
    """The window's answer, waited for while the process runs: WINDOW_WAIT seconds and
    TRACE_GRACE more (the process ends the window at its deadline), or until a stop
    comes (then the window is asked to end, with its steps so far); None where none came."""
    done = f"{folder.named}.{window_id}.done.json"
    if not _waited_for(folder, done, process, WINDOW_WAIT + TRACE_GRACE, stops) \
            and process.is_running() and not folder.exists(done):
        with contextlib.suppress(OSError):
            _send(folder, {"id": window_id, "end": True})
        _waited_for(folder, done, process, TRACE_GRACE, None)
    try:
        said = folder.read_json(done)
    except FileNotFoundError:
        return None
    except ValueError:
        said = None
    finally:
        folder.remove(done)
    if not isinstance(said, dict):
        raise Refused(errno.EINVAL, "not an answer profile-all writes", str(folder.path / done))
    return said


def copied_trace(folder: ListenFolder, window_id: str, into: Path) -> Path:
    """The window's trace, copied out of the folder into `into` (within the readers'
    bound on a file's size), and removed there."""
    name, bound = f"{folder.named}.{window_id}.trace.json", limits.current().max_unpacked
    try:
        with folder.opened(name, bound) as source, open(into, "wb") as kept:
            copied = 0
            while chunk := source.read(min(1 << 20, bound + 1 - copied)):
                kept.write(chunk)
                copied += len(chunk)
                if copied > bound:  # it grew as it was read
                    raise Refused(errno.EFBIG, f"more than {bound:,} bytes",
                                  str(folder.path / name))
    finally:
        folder.remove(name)
    return into


def _waited_for(folder: ListenFolder, name: str, process: psutil.Process, seconds: float,
                stops: StopRequests | None) -> bool:
    """Whether file `name` appeared within `seconds`, the process running, no stop come."""
    deadline = time.monotonic() + seconds
    waiting: Callable[[], Any] = stops.waiting if stops is not None else contextlib.nullcontext
    try:
        with waiting():
            while not folder.exists(name):
                if time.monotonic() > deadline or not process.is_running():
                    return False
                time.sleep(0.05)
    except Stopped:
        return False
    return True


def not_listening(process: psutil.Process) -> str:
    """Why no window was asked for: the process does not listen, or not yet (it was
    still importing its modules when asked)."""
    importing = _importing(process.pid)
    if importing:
        return ("no operator or kernel trace: the process is not listening yet (it was "
                f"still importing, {importing}): attach again once it trains (it listens "
                "at its first pa.step(), or pa.listen())")
    return ("no operator or kernel trace: the process does not listen for profile-all "
            "(it listens once its main thread calls pa.step(), or pa.listen(): a signal "
            "handler is the main thread's; PROFILE_ALL_LISTEN=0 turns that off)")


def _importing(pid: int) -> str:
    """What the process's main thread imports now (py-spy's dump: a frame of importlib's
    own), as `file`; "" where it imports nothing, or py-spy cannot tell."""
    frames = main_thread_frames(pid)
    inner = next((i for i, frame in enumerate(frames)
                  if "importlib._bootstrap" in str(frame.get("filename"))), None)
    if inner is None:
        return ""
    module = frames[inner - 1].get("filename") if inner > 0 else "a module"
    return f"py-spy sees it run {module}"
