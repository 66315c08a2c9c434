"""An open torch.profiler window in a listening process (on_demand.py): torch.profiler over
its next steps, ended by the process itself at its last step, at its deadline, or once
the attach that asked is gone; a session the process opens itself ends it first."""

from __future__ import annotations

import contextlib
import math
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from profile_all.fileio import utf8_path

SIGNAL = signal.SIGUSR2
#: the longest window a request may ask for, whatever it says
MOST_SECONDS = 600.0
#: how often an open window looks at its deadline and its asker
WATCH_SECONDS = 0.5


def start_time(pid: int) -> str:
    """The process's start, as the kernel counts it (Linux: /proc/PID/stat's 22nd field);
    "" where it cannot be read."""
    try:
        said = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return ""
    return said.rpartition(")")[2].split()[19]


class Window:
    """torch.profiler over the next `steps` steps of this process, `seconds` at most, for
    as long as its asker lives; its trace written to `trace`, what it says handed to
    `answer`, and `closed(self)` called as it ends. `marks_steps`: pa.step() marks its
    steps, else optimizer.step()."""

    def __init__(self, asked: dict[str, Any], trace: Path, marks_steps: bool,
                 answer: Callable[[dict[str, Any]], None],
                 closed: Callable[[Window], None]) -> None:
        import torch
        from torch.optim.optimizer import register_optimizer_step_post_hook
        from torch.profiler import ProfilerActivity, profile

        self.id = asked["id"]
        self.steps = max(1, int(asked["steps"]))
        asked_for = float(asked.get("seconds", MOST_SECONDS))
        self.seconds = min(max(asked_for, 1.0), MOST_SECONDS) if math.isfinite(asked_for) \
            else MOST_SECONDS
        self.asker = asked.get("asker") if isinstance(asked.get("asker"), dict) else None
        self.trace, self._answer, self._closed = trace, answer, closed
        self.count, self.over, self.open = 0, "", True
        self.marked_by = "pa.step()" if marks_steps else "optimizer.step()"
        activities = [ProfilerActivity.CPU]
        if torch.cuda.is_available():
            activities.append(ProfilerActivity.CUDA)
        self.profile = profile(activities=activities)
        self.profile.record_steps = True
        self.hook = None if marks_steps else register_optimizer_step_post_hook(
            lambda *_args: self.step())
        self.profile.start()
        self._theirs = _TheirSession(self)
        self._ended = threading.Event()
        threading.Thread(target=self._watch, daemon=True,
                         name="profile-all-window-watch").start()

    def asker_alive(self) -> bool:
        """Whether the attach that asked still runs (unknown: assumed so)."""
        if self.asker is None:
            return True
        pid, began = self.asker.get("pid"), self.asker.get("start")
        return isinstance(pid, int) and start_time(pid) == began

    def _watch(self) -> None:
        """(A thread.) The window's end where its steps do not come: its deadline, or its
        asker gone; the main thread is told (SIGUSR2), where torch.profiler was started."""
        deadline = time.monotonic() + self.seconds
        while not self._ended.wait(WATCH_SECONDS):
            if time.monotonic() > deadline:
                self.over = f"ended at its deadline ({self.seconds:g} s) with the steps so far"
            elif not self.asker_alive():
                self.over = "ended: the profile-all attach that asked for it is gone"
            else:
                continue
            with contextlib.suppress(OSError, ValueError):
                signal.pthread_kill(threading.main_thread().ident, SIGNAL)
            return

    def step(self) -> None:
        """A step ended (`pa.step()`, or `optimizer.step()` in a process that calls no
        `pa.step()`)."""
        self.count += 1
        if self.count >= self.steps:
            self.end("")
        else:
            self.profile.step()

    def end(self, note: str, answer: bool = True) -> None:
        """torch.profiler stopped; its trace and the answer written where someone asks."""
        if not self.open:
            return
        self.open = False
        self._closed(self)
        self._ended.set()
        self._theirs.restore()
        if self.hook is not None:
            self.hook.remove()
        said: dict[str, Any] = {"steps": self.count, "marked_by": self.marked_by,
                                "note": note}
        try:
            self.profile.stop()
            if answer:
                with utf8_path(self.trace) as path:
                    self.profile.export_chrome_trace(path)
        except Exception as error:  # never into the process
            said["error"] = f"{type(error).__name__}: {error}"
        if answer:
            self._answer(said)


class _TheirSession:
    """While a window is open, a torch.profiler session the process opens itself ends the
    window first (torch runs one session a process: the later one took the events, and
    ending ours would have ended theirs)."""

    def __init__(self, window: Window) -> None:
        from torch.autograd import profiler

        self._class, self._prepared = profiler.profile, profiler.profile._prepare_trace

        def prepare(session: Any) -> Any:
            window.end("ended early: the process opened a torch.profiler session of its own")
            return self._prepared(session)

        self._class._prepare_trace = prepare

    def restore(self) -> None:
        self._class._prepare_trace = self._prepared
