"""A pass's process seen from profile-all: its output copied as it comes, and stopped
cleanly however the pass or profile-all itself is asked to end.

- The worker runs in a session (process group) of its own, so a Ctrl-C at the terminal
  reaches only profile-all, which passes it on.
- SIGTERM, SIGHUP and SIGINT sent to profile-all itself (`timeout`, Slurm, docker, CI
  runners send SIGTERM, then SIGKILL): the running pass gets the same signal and the
  grace a timeout gives, no further pass starts, and the report of what was measured is
  written (`StopRequests`).
- A target may leave processes behind in its group (a server started in the background
  that holds its stdout): once the worker has ended they are ended too, and named, so
  that the pass neither waits on their pipe nor leaves them running.
- A target's child started in a session of its own (`start_new_session=True`, a daemon's
  double fork) is in no group of ours: the worker makes itself their subreaper
  (`process_control.adopt_orphans`: orphans come to it, not to init), and as it finishes,
  ends and names every descendant outside its group that still runs (`end_escaped`).
"""

from __future__ import annotations

import codecs
import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

import psutil

from profile_all.runner.watching.kineto_lines import KinetoLines

#: seconds a stopped worker gets to finish collecting before it is killed
GRACE_SECONDS = 10.0
#: seconds processes the target left behind get to end after SIGTERM
LEFTOVER_GRACE_SECONDS = 2.0
STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)


class Stopped(BaseException):
    """profile-all was asked to stop (SIGTERM, SIGHUP, SIGINT) while waiting on a pass."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


class StopRequests:
    """Stop signals sent to profile-all: noted always, raised as `Stopped` only while it
    waits on a pass's process, so that results are read and the report is written whole
    whenever the signal comes. SIGINT is handled too when it was ignored (a run started
    in the background), so that a Ctrl-C sent on purpose still stops it."""

    def __init__(self) -> None:
        self.signum: int | None = None  # the first stop signal, which the run ends by
        self._pending: int | None = None  # a signal not yet acted on
        self._waiting = False

    def _handle(self, signum: int, frame: Any) -> None:
        if self.signum is None:
            self.signum = signum
        self._pending = signum
        if self._waiting:
            self._pending = None
            raise Stopped(signum)

    @contextlib.contextmanager
    def installed(self) -> Iterator[StopRequests]:
        """Handle the stop signals while the block runs (main thread only)."""
        if threading.current_thread() is not threading.main_thread():
            yield self
            return
        before = {signum: signal.signal(signum, self._handle) for signum in STOP_SIGNALS}
        try:
            yield self
        finally:
            for signum, handler in before.items():
                signal.signal(signum, handler)

    @contextlib.contextmanager
    def waiting(self) -> Iterator[None]:
        """A stop signal, come already or coming in the block, raises `Stopped` here."""
        self._waiting = True
        try:
            if self._pending is not None:
                signum, self._pending = self._pending, None
                raise Stopped(signum)
            yield
        finally:
            self._waiting = False


class Tee(threading.Thread):
    """Copies a child's pipe to a log file and, with `echo`, to our own stream, as it
    comes. A log that cannot be written (a full disk) is given up, said in `lost`, and
    the pipe still drained and echoed: a child that writes to a full pipe would wait."""

    def __init__(self, pipe: BinaryIO, stream_name: str, log_path: Path,
                 echo: bool = True) -> None:
        super().__init__(daemon=True)
        self.pipe, self.stream_name, self.log_path = pipe, stream_name, log_path
        self.echo = echo
        self.lost = ""  # why the log stops short, where it does
        #: what is echoed of the text: stderr's without Kineto's session lines
        self.shown = KinetoLines() if stream_name == "stderr" else None

    def run(self) -> None:
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        log = self._opened()
        while chunk := os.read(self.pipe.fileno(), 65536):
            if log is not None:
                try:
                    log.write(chunk)
                    log.flush()
                except OSError as error:
                    log = self._given_up(log, error)
            if self.echo:
                self._echo(decoder.decode(chunk))
        if self.echo and self.shown is not None:
            self._echo(self.shown.rest(), whole=True)
        if log is not None:
            with contextlib.suppress(OSError):
                log.close()

    def _echo(self, text: str, whole: bool = False) -> None:
        if self.shown is not None and not whole:
            text = self.shown(text)
        if text:
            stream = getattr(sys, self.stream_name)  # looked up each time: Rich swaps it
            stream.write(text)
            stream.flush()

    def _opened(self) -> BinaryIO | None:
        try:
            return open(self.log_path, "wb")
        except OSError as error:
            self.lost = f"{self.log_path.name} could not be written: {error.strerror or error}"
            return None

    def _given_up(self, log: BinaryIO, error: OSError) -> None:
        self.lost = f"{self.log_path.name} stops short: {error.strerror or error}"
        with contextlib.suppress(OSError):
            log.close()


def signal_group(process: subprocess.Popen, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signum)


def _descendants(process: subprocess.Popen) -> list[psutil.Process]:
    try:
        return psutil.Process(process.pid).children(recursive=True)
    except psutil.Error:
        return []


def stop(process: subprocess.Popen, signum: int, stops: StopRequests) -> None:
    """Ask the worker to stop, give it GRACE_SECONDS to write what it has (a second stop
    signal cuts that short), then kill it, and every process under it: torchrun starts
    its ranks in sessions of their own."""
    descendants = _descendants(process)
    signal_group(process, signum)
    try:
        with stops.waiting():
            process.wait(GRACE_SECONDS)
    except (subprocess.TimeoutExpired, Stopped):
        signal_group(process, signal.SIGKILL)
        process.wait()
    for child in descendants:
        with contextlib.suppress(psutil.Error):
            child.kill()


def end_escaped() -> list[str]:
    """End (SIGTERM, then SIGKILL) this process's descendants that run outside its process
    group, as end_leftovers ends those in it; a description of each."""
    group = os.getpgrp()
    escaped = []
    for child in psutil.Process().children(recursive=True):
        with contextlib.suppress(psutil.Error, OSError):
            if os.getpgid(child.pid) != group and not _ended(child):
                escaped.append(child)
    described = []
    for child in escaped:
        with contextlib.suppress(psutil.Error):
            described.append(f"pid {child.pid} ({' '.join(child.cmdline())[:80]}), in a "
                             "session of its own")
            child.terminate()
    alive = _wait_ended(escaped, LEFTOVER_GRACE_SECONDS)
    for child in alive:
        with contextlib.suppress(psutil.Error):
            child.kill()
    _wait_ended(alive, LEFTOVER_GRACE_SECONDS)
    for child in escaped:  # ours now (adopt_orphans): reaped, not left as zombies
        with contextlib.suppress(ChildProcessError, OSError):
            os.waitpid(child.pid, os.WNOHANG)
    return described


def _left_in_group(group: int) -> list[psutil.Process]:
    left = []
    for candidate in psutil.process_iter(["pid"]):
        with contextlib.suppress(psutil.Error, OSError):
            if os.getpgid(candidate.pid) == group and candidate.pid != os.getpid():
                left.append(candidate)
    return left


def end_leftovers(process: subprocess.Popen) -> list[str]:
    """End what the ended worker left in its process group (SIGTERM, then SIGKILL after
    LEFTOVER_GRACE_SECONDS); a description of each process ended."""
    left = _left_in_group(process.pid)
    described = []
    for leftover in left:
        with contextlib.suppress(psutil.Error):
            described.append(f"pid {leftover.pid} ({' '.join(leftover.cmdline())[:80]})")
    if not left:
        return []
    signal_group(process, signal.SIGTERM)
    alive = _wait_ended(left, LEFTOVER_GRACE_SECONDS)
    if alive:
        signal_group(process, signal.SIGKILL)
        _wait_ended(alive, LEFTOVER_GRACE_SECONDS)
    return described


def _ended(leftover: psutil.Process) -> bool:
    """Gone, or a zombie: an orphan that died waits for init to reap it, which on some
    machines takes seconds; it holds nothing and runs nothing."""
    try:
        return leftover.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def _wait_ended(processes: list[psutil.Process], timeout: float) -> list[psutil.Process]:
    """Wait up to `timeout` for `processes` to end; those still running."""
    deadline = time.monotonic() + timeout
    alive = [p for p in processes if not _ended(p)]
    while alive and time.monotonic() < deadline:
        time.sleep(0.02)
        alive = [p for p in alive if not _ended(p)]
    return alive
