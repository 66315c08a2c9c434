"""py-spy recording a process from outside it: found, checked for the permission it needs,
started, seen to sample, stopped, and its failures said in one line with their fix.

py-spy reads the process's memory (ptrace's permission: process_vm_readv) and, by
default, pauses it for each sample (blocking) so that every stack it reads is whole; with
`--nonblocking` about one sample in ten could not be read in a training loop, and those
are not random, so profile-all keeps it blocking. Where Yama's ptrace_scope is 1 (Ubuntu's
default) a process may be read only by its ancestors, so a process that starts py-spy on
itself says that py-spy may read it (prctl PR_SET_PTRACER).
"""

from __future__ import annotations

import contextlib
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from profile_all import process_control
from profile_all.backends import apart_process
from profile_all.errors import ProfileAllError
from profile_all.process_control import ANY_READER, allow_reader

#: names the py-spy executable to run (one built elsewhere, a wrapper)
BINARY_VARIABLE = "PROFILE_ALL_PY_SPY"
#: what py-spy prints once it samples
SAMPLING = "Sampling process"
_CAP_SYS_PTRACE = 19
YAMA = Path("/proc/sys/kernel/yama/ptrace_scope")
FIX = ("let it read other processes: run as root (sudo), lower Yama's ptrace_scope (sudo "
       "sysctl kernel.yama.ptrace_scope=1), or in a container add the capability "
       "(docker run --cap-add SYS_PTRACE)")


def binary() -> str | None:
    """py-spy's executable: the one PROFILE_ALL_PY_SPY names, else the one installed
    beside this Python, else the one on PATH; None where there is none."""
    named = os.environ.get(BINARY_VARIABLE)
    if named:
        return named if shutil.which(named) else None
    beside = Path(sys.executable).with_name("py-spy")
    return str(beside) if beside.is_file() else shutil.which("py-spy")


def _capable() -> bool:
    """Whether this process has CAP_SYS_PTRACE (root, in most places)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("CapEff:"):
                return bool(int(line.split()[1], 16) >> _CAP_SYS_PTRACE & 1)
    except (OSError, ValueError, IndexError):
        pass
    return os.geteuid() == 0


def ptrace_scope() -> int:
    """Yama's ptrace_scope (0 where Yama is absent)."""
    try:
        return int(YAMA.read_text().strip())
    except (OSError, ValueError):
        return 0


def why_not(of_own_child: bool) -> str:
    """Why py-spy cannot read a process here, with the fix; "" when it can.
    `of_own_child`: py-spy started by the process it reads (which then allows it), else a
    process of the same user's that profile-all did not start (attach)."""
    if binary() is None:
        named = os.environ.get(BINARY_VARIABLE)
        return (f"{BINARY_VARIABLE} names {named!r}, which is not an executable" if named
                else "py-spy is not installed (pip install py-spy)")
    if sys.platform == "darwin" and os.geteuid() != 0:
        return "py-spy needs root on macOS (sudo profile-all ...)"
    if not sys.platform.startswith("linux"):
        return ""
    scope = ptrace_scope()
    if scope >= 3:
        return ("kernel.yama.ptrace_scope is 3: no process may read another's memory until "
                "the machine restarts")
    if (scope == 2 or (scope == 1 and not of_own_child)) and not _capable():
        return f"kernel.yama.ptrace_scope is {scope} and py-spy may not read the process: {FIX}"
    return ""


def _die_with_parent() -> None:
    """In py-spy's process before it runs: it ends (writing what it has) when the process
    that started it ends, however that ends (a SIGKILL'd attach left it pausing its target
    50 times a second, with nobody to read it); Linux."""
    process_control.die_with_parent(signal.SIGINT)


def _wait(process: subprocess.Popen | apart_process.Apart, seconds: float) -> None:
    """`process.wait(seconds)`, returning the moment it ends where Linux tells (a pidfd):
    Popen.wait sleeps up to 50 ms between looks, and py-spy ends 10-30 ms after its
    Ctrl-C, so every pass with py-spy waited 16-64 ms for 10."""
    if isinstance(process, apart_process.Apart):  # (followed through a pidfd already)
        process.wait(seconds)
        return
    try:
        ended = os.pidfd_open(process.pid)
    except (AttributeError, OSError):  # (not Linux 5.3+, or reaped already)
        process.wait(seconds)
        return
    try:
        if not select.select([ended], [], [], seconds)[0]:
            raise subprocess.TimeoutExpired(process.args, seconds)
    finally:
        os.close(ended)
    process.wait()


def _held_folder(output: Path) -> int | None:
    """A descriptor of `output`'s folder where its path is not UTF-8 text, which py-spy
    (its argument parser) refuses with a panic: it writes through this process's
    descriptor instead (/proc/PID/fd/N/NAME); None where the path is text."""
    try:
        str(output).encode("utf-8")
    except UnicodeEncodeError:
        return os.open(output.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    return None


def _argument(output: Path, folder: int | None) -> str:
    return str(output) if folder is None else f"/proc/{os.getpid()}/fd/{folder}/{output.name}"


class Recorder:
    """`py-spy record` of process `pid` into `output` (speedscope JSON), its own output in
    `log`. `own`: the recorded process is this one (it allows py-spy to read it)."""

    def __init__(self, pid: int, output: Path, log: Path, *, rate: int, native: bool = False,
                 idle: bool = False, subprocesses: bool = True, own: bool = False) -> None:
        self.pid, self.output, self.log, self.own = pid, output, log, own
        self._folder = _held_folder(output)
        self.command = [binary() or "py-spy", "record", "--pid", str(pid), "--rate", str(rate),
                        "--format", "speedscope", "--output", _argument(output, self._folder),
                        "--full-filenames",
                        *(["--native"] if native else []), *(["--idle"] if idle else []),
                        *(["--subprocesses"] if subprocesses else [])]
        self.process: subprocess.Popen | apart_process.Apart | None = None

    def start(self, patience: float = 30.0) -> None:
        """Start py-spy and return once it samples; ProfileAllError with its reason when
        it stops first, or says nothing for `patience` seconds."""
        if self.own:  # py-spy apart: not among the descendants it samples (apart_process)
            allow_reader(ANY_READER)  # until py-spy's pid is known, then only py-spy
        try:
            self.process = apart_process.start(self.command, self.log) if self.own else None
            if self.process is None:
                with self.log.open("wb") as log:
                    self.process = subprocess.Popen(
                        self.command, stdout=log, stderr=subprocess.STDOUT,
                        stdin=subprocess.DEVNULL, start_new_session=True,
                        preexec_fn=_die_with_parent)
        except OSError as error:
            raise ProfileAllError(f"py-spy could not start: {error}") from None
        finally:
            if self.own:  # py-spy alone, or no one where it did not start
                allow_reader(self.process.pid if self.process is not None else 0)
        deadline = time.monotonic() + patience
        while SAMPLING not in self.said():
            if self.process.poll() is not None:
                raise ProfileAllError(self.failure())
            if time.monotonic() > deadline:
                self.process.kill()
                self.process.wait()
                raise ProfileAllError(f"py-spy did not start sampling in {patience:g} s")
            time.sleep(0.005)

    def stop(self, patience: float = 120.0) -> None:
        """Stop sampling (py-spy's Ctrl-C) and wait for its file; py-spy stops by itself
        when the process it samples has ended."""
        if self.process is None:
            return
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self.process.send_signal(signal.SIGINT)
        try:
            _wait(self.process, patience)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            raise ProfileAllError(f"py-spy had not written its file {patience:g} s after it "
                                  "was told to stop: nothing sampled is kept") from None
        if self._folder is not None:
            os.close(self._folder)
            self._folder = None
        if self.process.returncode != 0 or not self.output.is_file():
            raise ProfileAllError(self.failure())

    def said(self) -> str:
        try:
            return self.log.read_text(errors="replace")
        except OSError:
            return ""

    def failure(self) -> str:
        """What py-spy said went wrong, in one line, with the fix where it is permission."""
        said = self.said()
        lines = [line.strip() for line in said.splitlines()
                 if line.strip() and not line.startswith(("Stack backtrace", "   "))]
        errors = [line.removeprefix("Error: ") for line in lines
                  if line.startswith(("Error", "Permission"))]
        reason = "; ".join(errors[:2]) or (lines[-1] if lines else "no output")
        code = self.process.returncode if isinstance(self.process, subprocess.Popen) else None
        if SAMPLING in said and not errors:  # it sampled, then ended without a word
            return self._killed(code)
        status = f" (exit {code})" if code is not None else ""  # (apart: not ours to know)
        text = f"py-spy could not sample process {self.pid}{status}: {reason[:300]}"
        if "ermission" in said or "Operation not permitted" in said:
            text += f"; {FIX}"
        return text

    def _killed(self, code: int | None) -> str:
        """py-spy ended without a word and without its file: a signal ended it (its status
        is known where it is this process's child)."""
        how = f"killed by {signal.Signals(-code).name}" if code is not None and code < 0 \
            else "killed, by a signal or the out-of-memory killer"
        return (f"py-spy ended without writing its samples of process {self.pid} ({how}, "
                "its log says nothing more): what it sampled is lost")

    def unread(self) -> tuple[int, int] | None:
        """(samples py-spy could not read, samples written), from what it said at the end."""
        found = re.search(r"Samples: (\d+) Errors: (\d+)", self.said())
        return (int(found.group(2)), int(found.group(1))) if found else None
