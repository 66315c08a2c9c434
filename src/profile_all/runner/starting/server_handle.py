"""The fork server (forkserver.py) from profile-all's side: started, told the rest of what to
import where it began before that was known, asked to fork a pass or to check a target,
closed; and a pass it forked, seen as a `subprocess.Popen`."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any, BinaryIO

from profile_all.backends.apart_process import Apart
from profile_all.errors import UsageError
from profile_all.fileio import current_folder
from profile_all.runner.starting import server_start
from profile_all.runner.starting.forkserver import MORE_LATER
from profile_all.runner.starting.server_messages import Lines, send

#: seconds an idle server takes to answer a ping, at most (it answers in microseconds)
PING_WAIT = 2.0


class ServerLost(OSError):
    """The fork server ended while the run still needed it (killed: the kernel's
    out-of-memory killer picks the biggest process, and the server holds torch)."""


def fork_available() -> bool:
    return hasattr(os, "fork") and hasattr(socket, "send_fds") and sys.platform != "win32"



def worker_env() -> dict[str, str]:
    """The environment every pass's process starts in (and the server, which forks them)."""
    return dict(os.environ, PYTHONUNBUFFERED="1")


class ForkServer:
    """The server process, from profile-all's side: started once a run, closed after (or
    kept for the next run: kept_servers). `more_later`: it imports `modules`, then waits
    for the rest (`import_more`)."""

    def __init__(self, modules: list[str], env: dict[str, str], more_later: bool = False
                 ) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        self.channel, self.lines = ours, Lines(ours)
        self.modules, self.env = list(modules), env
        self.runs_before = 0  # the runs it served before this one (kept_servers)
        self.process = subprocess.Popen(
            [sys.executable, "-m", "profile_all.runner.starting.forkserver", str(theirs.fileno()),
             *([MORE_LATER] if more_later else []), *modules],
            pass_fds=[theirs.fileno()], stdin=subprocess.DEVNULL, start_new_session=True,
            env=env)
        theirs.close()
        self._ready = False
        self.cwd = os.getcwd()  # where its passes run, where the folder was removed since

    def import_more(self, modules: list[str]) -> None:
        """The rest of what a server started with `more_later` imports before it is ready."""
        send(self.channel, {"import": modules})
        self.modules += modules

    @property
    def forked(self) -> str:
        """How the run's passes began, as its record says (a pass or the check is forked
        from it: a run takes a server started early only where its first pass forks)."""
        return "fork from a server kept from an earlier run" if self.runs_before else "fork"

    def idle(self) -> bool:
        """Whether it is ready and answers a ping at once, with nothing of an earlier pass
        unread: a server is kept for the next run, and a kept one taken, only then."""
        if not self._ready or self.gone() or self.lines.holding():
            return False
        try:
            send(self.channel, {"ping": True})
            return self.lines.read(PING_WAIT) == {"pong": True}
        except (OSError, ValueError):  # TimeoutError among them: busy, or stuck
            return False

    def wait_ready(self) -> None:
        if not self._ready:
            try:
                server_start.wait_ready(self.lines.read, self.process)
            except OSError:
                raise ServerLost(f"the fork server was {self._ended()} as it imported") from None
            self._ready = True

    def check(self, target_spec: dict[str, Any], scratch: Path, env: dict[str, str]) -> None:
        """Check a target in a forked child (`ModelTarget.validate`: build the model, run it
        once), so that profile-all itself never imports torch; its output is ours. Raises
        the UsageError the check raised there."""
        self.wait_ready()
        launch, result = scratch / "check.launch.json", scratch / "check.result.json"
        launch.write_text(json.dumps({"cwd": current_folder(self.cwd), "env": env}))
        stdin = _stdin()
        try:
            self._send({"check": target_spec, "launch": str(launch), "result": str(result)},
                       [stdin, 1, 2])
        finally:
            if stdin != 0:
                os.close(stdin)
        message = self.lines.read()
        if message is None or "pid" not in message:
            raise ServerLost(f"the fork server was {self._ended()} before it checked the "
                             "target")
        code = ForkedPass(message["pid"], self.lines, None, None).wait()
        try:
            said = json.loads(result.read_text())
        except (OSError, ValueError):
            ended = f"killed by {signal.Signals(-code).name}" if code < 0 else f"exit {code}"
            said = {"error": f"its process ended ({ended}) before it said anything"}
        if "usage" in said:
            raise UsageError(said["usage"])
        if "error" in said:  # the user's code failed: bad input too, said in one line
            raise UsageError(f"checking the target failed: {said['error']}")

    def start(self, spec_path: Path, env: dict[str, str]) -> ForkedPass:
        """A pass's worker, forked: its stdout and stderr come back through pipes, its
        stdin is ours."""
        self.wait_ready()
        launch = spec_path.with_suffix(".launch.json")
        launch.write_text(json.dumps({"cwd": current_folder(self.cwd), "env": env}))
        out_read, out_write = os.pipe()
        err_read, err_write = os.pipe()
        stdin = _stdin()
        try:
            self._send({"spec": str(spec_path), "launch": str(launch)},
                       [stdin, out_write, err_write])
        finally:
            for fd in (out_write, err_write):
                os.close(fd)
            if stdin != 0:
                os.close(stdin)
        message = self.lines.read()
        if message is None or "pid" not in message:
            raise ServerLost(f"the fork server was {self._ended()} before it forked a pass")
        return ForkedPass(message["pid"], self.lines, os.fdopen(out_read, "rb"),
                          os.fdopen(err_read, "rb"))

    def _send(self, message: dict[str, Any], fds: list[int]) -> None:
        try:
            send(self.channel, message, fds)
        except OSError:  # its socket closed: it is gone
            raise ServerLost(f"the fork server was {self._ended()} before it was asked "
                             "for a pass") from None

    def gone(self) -> str:
        """How the server ended, where it did while the run still needs it ("" while it
        runs): profile-all then starts its passes in fresh interpreters."""
        code = self.process.poll()
        if code is None:
            return ""
        return f"killed by {signal.Signals(-code).name}" if code < 0 else f"exited with {code}"

    def _ended(self) -> str:
        """How the server ended, once its socket closed (it has ended, or will at once)."""
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(5)
        return self.gone() or "closed"

    def close(self) -> None:
        """End the server. Every pass it forked has ended by now, and it holds nothing that
        needs a clean exit: killed, not waited for through an interpreter's teardown with
        torch loaded (a second a run)."""
        with contextlib.suppress(OSError):
            self.channel.close()
        self.process.kill()
        self.process.wait()


def _stdin() -> int:
    """Our stdin's descriptor for the pass (as Popen passes it on), else /dev/null's."""
    with contextlib.suppress(OSError):
        os.fstat(0)
        return 0
    return os.open(os.devnull, os.O_RDONLY)


class ForkedPass:
    """A forked worker seen as a `subprocess.Popen`: pid, stdout, stderr, wait, returncode.
    It is the server's child, not ours: its end comes as a message from the server. Where
    the server is killed as it runs (the kernel's out-of-memory killer picks the biggest
    process) the worker goes on, orphaned, followed through a pidfd: `server_lost`, and
    its exit status is nobody's to tell (returncode 0; its result file says how it
    ended)."""

    def __init__(self, pid: int, lines: Lines, stdout: BinaryIO, stderr: BinaryIO) -> None:
        self.pid, self.stdout, self.stderr, self._lines = pid, stdout, stderr, lines
        self.returncode: int | None = None
        self.max_rss: int | None = None  # its peak RSS in bytes, once it ended
        self.server_lost = False
        self._followed = _followed(pid)

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None and not self.server_lost:
            try:
                message = self._lines.read(timeout)
            except TimeoutError:
                raise subprocess.TimeoutExpired(f"pass worker {self.pid}", timeout) from None
            if message:
                self.returncode, self.max_rss = message["returncode"], message.get("max_rss")
            else:  # the server is gone: the worker is not
                self.server_lost = True
        if self.returncode is None:
            if self._followed is not None:
                self._followed.wait(timeout)  # subprocess.TimeoutExpired as Popen's
            self.returncode = 0
        return self.returncode

    def poll(self) -> int | None:
        return self.returncode


def _followed(pid: int) -> Apart | None:
    """The worker, followed through a pidfd from its start, in case the server goes;
    None where there is no pidfd (not Linux) or it ended already."""
    try:
        return Apart(pid, os.pidfd_open(pid), [f"pass worker {pid}"])
    except (AttributeError, OSError):
        return None


class ServerWhenNeeded:
    """A run's fork server, started when a pass first asks for one: a run whose passes all
    start elsewhere (`--repeat N`: every timing pass in a fresh interpreter, the others in
    windows of the first one's steps) imports torch in no server it never uses (1.1 CPU-s,
    and a process of torch's size, on a 2-core VM). A window the script did not reach
    starts it then."""

    def __init__(self, modules: list[str], env: dict[str, str]) -> None:
        self.modules, self.env = modules, env
        self._server: ForkServer | None = None

    @property
    def started(self) -> ForkServer:
        if self._server is None:
            self._server = ForkServer(self.modules, self.env)
        return self._server

    def wait_ready(self) -> None:
        self.started.wait_ready()

    def check(self, target_spec: dict[str, Any], scratch: Path, env: dict[str, str]) -> None:
        self.started.check(target_spec, scratch, env)

    def start(self, spec_path: Path, env: dict[str, str]) -> ForkedPass:
        return self.started.start(spec_path, env)

    def gone(self) -> str:
        return self._server.gone() if self._server is not None else ""

    @property
    def started_one(self) -> ForkServer | None:
        """The server, where a pass asked for one."""
        return self._server

    @property
    def forked(self) -> str:
        """How the run's passes began, where a pass asked for the server ("" else)."""
        return self._server.forked if self._server is not None else ""

    def close(self) -> None:
        if self._server is not None:
            self._server.close()


#: what a run forks its passes from
Server = ForkServer | ServerWhenNeeded
