"""A torch.profiler window on demand, for a job that is already running.

`profile-all attach PID` samples a running process from outside (py-spy, its memory from
the OS); what it cannot see from there is the operators and kernels torch runs. A process
that listens (its first `pa.step()` makes it listen, and so does `pa.listen()`;
PROFILE_ALL_LISTEN=0 in its environment turns both off) takes a request: attach writes it
(`<pid>.request.json` in the process's listen folder: an id, how many steps, how many
seconds at most, and the asking process) and sends SIGUSR2. The process starts
torch.profiler at once, marks each step (`pa.step()`, else each `optimizer.step()`),
and ends the window itself: after N steps, at its deadline, or once the asking process
is gone (an attach killed outright left torch.profiler on for ever, its events growing
to the out-of-memory killer). Then it writes the trace (`<pid>.<id>.trace.json`) and
its answer (`<pid>.<id>.done.json`), unless nobody is left to read them.

One window at a time: a request while one is open is answered that the process is busy,
and only the window's own asker may end it early (`end`). A process that runs its own
torch.profiler session is not given a window (torch runs one a process: opening ours
ended theirs, 0 events); one that opens its own while ours is open ends ours first, so
that its session is whole.

Listening costs nothing until asked: a signal handler and a file that says the process
listens (with the process's start time, so that a pid used again is not taken for it).
It never replaces a SIGUSR2 handler the process has, and it never runs inside a
profile-all pass (the pass's own backends profile the target there). Whatever goes wrong
in a window is written to the answer, never raised into the process.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import stat
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

from profile_all.on_demand_window import SIGNAL, Window, start_time

ENVIRONMENT = "PROFILE_ALL_LISTEN"
_ID = re.compile(r"[0-9a-f]{16,64}")
_REQUEST_BYTES = 4096
_window: Window | None = None
_listening = False
_marks_steps = False  # the process calls pa.step(): its steps are those
_asked_to_listen = False  # by its first pa.step(), once


def pid_namespace(pid: int | str = "self") -> str:
    """The number of process `pid`'s PID namespace, as this process sees it ("0" where it
    cannot be read)."""
    try:
        return os.readlink(f"/proc/{pid}/ns/pid").rpartition("[")[2].rstrip("]")
    except OSError:
        return "0"


def _me() -> str:
    """What names this process's files in its listen folder: its PID namespace and its
    pid there. A pid alone named two processes at once (containers, and PID namespaces
    on one host, share /tmp: each has its pid 1), and one listener removed another's
    marker, its pid taken for a process of its own namespace that was gone."""
    return f"{pid_namespace()}-{os.getpid()}"


def folder_name(uid: int) -> str:
    return f"profile-all-listen-{uid}"


def folder(uid: int | None = None) -> Path:
    """Where this process, listening, says so, and takes its requests (its user's folder
    in its temporary directory, which only that user may enter)."""
    owner = os.getuid() if uid is None else uid
    return Path(tempfile.gettempdir()) / folder_name(owner)


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
        (where / f"{_me()}.json").write_text(json.dumps(
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
    """The files of processes of this PID namespace that listened and are gone (a SIGTERM
    or SIGKILL skips atexit): files of a pid that runs no more (a request never taken,
    an answer and a trace nobody read, the lock of an attach killed outright), or that
    runs another process (its marker's start time differs)."""
    ours = f"{pid_namespace()}-"  # (another namespace's pids mean nothing here)
    pids = {found.name.removeprefix(ours).split(".")[0] for found in where.glob(f"{ours}*")}
    for pid in filter(str.isdigit, pids):
        marker = where / f"{ours}{pid}.json"
        with contextlib.suppress(OSError, ValueError):
            if Path(f"/proc/{pid}").exists() and (not marker.exists() or json.loads(
                    marker.read_text()).get("start") == start_time(int(pid))):
                continue
            for stale in where.glob(f"{ours}{pid}.*"):
                stale.unlink()


def _unlisten() -> None:
    """(At exit.) A window still open ended, its trace and answer written for its asker
    (torch ends a process whose profiler still runs with a segmentation fault: a job that
    ended during a window exited 139); this process's marker gone, and a request it did
    not take. A window's answer and trace stay for the attach that reads them (and
    removes them) as this process ends; the next process that listens removes the rest."""
    window = _window
    if window is not None:
        window.end("ended with the process", answer=window.asker_alive())
    where, me = folder(), _me()
    for mine in (f"{me}.json", f"{me}.request.json"):
        with contextlib.suppress(OSError):
            (where / mine).unlink()


def _request() -> dict[str, Any] | None:
    """The request waiting in this process's folder, taken (read, then removed); None
    where there is none, or it is not what attach writes."""
    path = folder() / f"{_me()}.request.json"
    try:
        with open(path, "rb") as said:
            data = said.read(_REQUEST_BYTES + 1)
        path.unlink()
        asked = json.loads(data) if len(data) <= _REQUEST_BYTES else None
    except (OSError, ValueError):
        return None
    if not isinstance(asked, dict) or not _ID.fullmatch(str(asked.get("id", ""))):
        return None
    return asked


def _asked(signum: int, frame: Any) -> None:
    """SIGUSR2: a request to open a window or to end the one open; or the open window's
    watch, which found it over (deadline, asker gone)."""
    asked = _request()
    window = _window
    if asked is None:
        if window is not None and window.over:
            window.end(window.over, answer=window.asker_alive())
        return
    if asked.get("end"):
        if window is not None and window.id == asked["id"]:
            window.end("ended early: profile-all attach asked")
        return
    if window is not None:
        _answer(asked["id"], {"error": "another profile-all attach has a torch.profiler "
                                       "window open in this process: wait for it to end"})
        return
    _open(asked)


def _open(asked: dict[str, Any]) -> None:
    global _window
    window_id = asked["id"]
    try:
        busy = _own_session()
        if busy:
            _answer(window_id, {"refused": busy})
            return
        _window = Window(asked, folder() / f"{_me()}.{window_id}.trace.json",
                         _marks_steps, lambda said: _answer(window_id, said), _closed)
    except Exception as error:  # never into the process
        _answer(window_id, {"error": f"{type(error).__name__}: {error}"})


def _closed(window: Window) -> None:
    """(A window, as it ends.) No window open from now on."""
    global _window
    if _window is window:
        _window = None


def _own_session() -> str:
    """Why a window cannot be opened now: the process runs a torch.profiler session of its
    own ("" where it does not)."""
    torch = sys.modules.get("torch")
    if torch is None:
        return ""
    if torch.autograd.profiler._is_profiler_enabled or torch._C._autograd._profiler_enabled():
        return ("the process runs a torch.profiler session of its own, and torch runs one "
                "a process (a window would end it): no window was opened")
    return ""


def _answer(window_id: str, said: dict[str, Any]) -> None:
    path = folder() / f"{_me()}.{window_id}.done.json"
    with contextlib.suppress(OSError):
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(said))
        os.replace(tmp, path)
