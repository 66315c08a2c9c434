"""A program started so that it is no descendant of this process (Linux).

py-spy's `--subprocesses` samples every descendant of the process it reads. Started by
the process it reads (a pass's worker, where the target runs), py-spy finds itself among
them, and before it says it samples waits, in about half the starts, for its own failed
attach (py-spy's new_subprocess_sampler waits on each child's sampler in a random order,
and the one of itself retries for 100 ms): 24-150 ms a start as a child, 12-18 ms apart.

A shell in a session of its own starts the program in the background, says its pid and
ends; the program, orphaned, goes to init or to the nearest subreaper above this process
(this process stops being one meanwhile: a pass's worker is its descendants' subreaper).
It is followed through a pidfd, so that its end is seen and a signal reaches it and never
a process that took its pid since; its exit status is its new parent's, not ours.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

from profile_all import process_control

#: the shell's part: the program in the background, its output into the log, its pid said
_SHELL = '"$@" </dev/null >"$0" 2>&1 & echo $!'


class Apart:
    """The started program, as much of subprocess.Popen as a process that is not our child
    allows: `returncode` is 0 once it ended, whatever its status."""

    def __init__(self, pid: int, handle: int, args: list[str]) -> None:
        self.pid, self.args, self._handle = pid, args, handle
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None and select.select([self._handle], [], [], 0)[0]:
            self._ended()
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            if not select.select([self._handle], [], [], timeout)[0]:
                raise subprocess.TimeoutExpired(self.args, timeout or 0)
            self._ended()
        return 0

    def send_signal(self, signum: int) -> None:
        if self.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                signal.pidfd_send_signal(self._handle, signum)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def _ended(self) -> None:
        self.returncode = 0
        os.close(self._handle)


@contextlib.contextmanager
def _orphans_go_above() -> Iterator[None]:
    """Within the block, a process orphaned below this one goes above it, where this
    process is a subreaper."""
    was = process_control.adopts_orphans()
    if was:
        process_control.adopt_orphans(False)
    try:
        yield
    finally:
        if was:
            process_control.adopt_orphans()


def start(command: list[str], log: Path) -> Apart | None:
    """`command` started apart, stdin /dev/null, its stdout and stderr into `log`; None
    where it cannot be (not Linux, no pidfd, no shell): start it as a child then."""
    if not hasattr(os, "pidfd_open") or not hasattr(signal, "pidfd_send_signal"):
        return None
    try:
        with _orphans_go_above():
            said = subprocess.run(["/bin/sh", "-c", _SHELL, str(log), *command],
                                  stdin=subprocess.DEVNULL, capture_output=True, text=True,
                                  start_new_session=True, timeout=30)
        pid = int(said.stdout)
    except (OSError, AttributeError, ValueError, subprocess.SubprocessError):
        return None
    try:
        return Apart(pid, os.pidfd_open(pid), command)
    except ProcessLookupError:  # it ended already (and was reaped): a failed start
        apart = Apart(pid, -1, command)
        apart.returncode = 0
        return apart
