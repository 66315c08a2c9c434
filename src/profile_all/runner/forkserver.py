"""Passes forked from one server that has imported everything once, instead of a fresh
interpreter and an `import torch` (seconds) per pass.

profile-all starts `python -m profile_all.runner.forkserver MODULES...` once a run: it
imports what every pass imports before its target (torch, torch._dynamo, the worker, the
run's backends), says it is ready, and then, per pass, receives the pass's spec, folder,
environment and stdin/stdout/stderr (file descriptors over a Unix socket), forks, and
reports the child's pid and, once it has ended, how. The child makes a session of its
own, takes those descriptors as 0, 1 and 2, the folder and the environment, reseeds
Python's, numpy's and torch's CPU generators (a fresh interpreter seeds them from the
OS), and runs the worker exactly as `python -m profile_all.runner.inside.worker SPEC` would: the
target sees its own argv, `__main__`, folder on sys.path and cwd.

The server never touches CUDA (forking after CUDA is initialised is unsafe): it imports,
and every check of a device happens in the children. Torchrun ranks, nsys passes, and runs
asked for fresh interpreters do not use it; `ForkedPass` looks like a `subprocess.Popen`
to the orchestrator, so the rest of a pass's handling is the same either way.
"""

from __future__ import annotations

import contextlib
import ctypes
import faulthandler
import functools
import importlib
import json
import os
import random
import signal
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO

from profile_all.errors import UsageError
from profile_all.runner import server_start
from profile_all.runner.server_messages import MESSAGE_BYTES, Lines, send

_PR_SET_PDEATHSIG = 1


def fork_available() -> bool:
    return hasattr(os, "fork") and hasattr(socket, "send_fds") and sys.platform != "win32"


def _die_with_parent() -> None:
    """The server goes when profile-all goes (Linux); elsewhere its passes still watch
    profile-all's pid, and the server ends when its socket closes."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


def _become(request: dict[str, Any], fds: list[int], channel: socket.socket,
            grouped: int) -> None:
    """In the forked child: a session of its own (then `grouped` closed, which the server
    waits for), the request's descriptors as 0, 1 and 2, its folder and environment, fresh
    random seeds, as a fresh interpreter would have them."""
    channel.close()
    os.setsid()
    os.close(grouped)
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    launch = json.loads(Path(request["launch"]).read_text())
    os.chdir(launch["cwd"])
    os.environ.clear()
    os.environ.update(launch["env"])
    random.seed()
    if "numpy" in sys.modules:
        sys.modules["numpy"].random.seed()
    if "torch" in sys.modules:  # its CPU generator, seeded from the OS at import
        sys.modules["torch"].default_generator.seed()
    signal.signal(signal.SIGINT, signal.default_int_handler)


def _run_child(request: dict[str, Any], fds: list[int], channel: socket.socket,
               grouped: int) -> None:
    """In the forked child: become the pass's worker, as a fresh one would start (a Ctrl-C
    before it is one: an interrupted pass, exit 130, no traceback)."""
    code = 1
    try:
        _become(request, fds, channel, grouped)
        from profile_all.runner.inside import worker

        sys.argv = [worker.__file__, request["spec"]]  # as `python -m ...worker SPEC` has it
        code = worker.main(sys.argv)
    except SystemExit as error:
        code = error.code if isinstance(error.code, int) else 1
    except KeyboardInterrupt:
        code = 130
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


def _check_child(request: dict[str, Any], fds: list[int], channel: socket.socket,
                 grouped: int) -> None:
    """In the forked child: check the target (a model is built and run once) and write
    what was wrong, if anything, to the request's result file: profile-all, which never
    imports torch itself, raises it."""
    _become(request, fds, channel, grouped)
    said: dict[str, Any] = {}
    try:
        from profile_all.errors import UsageError
        from profile_all.targets import target_from_spec

        try:
            target_from_spec(request["check"]).validate()
        except UsageError as error:
            said = {"usage": str(error)}
    except BaseException as error:  # said to profile-all, which raises it
        import traceback

        traceback.print_exc()
        said = {"error": f"{type(error).__name__}: {error}"}
    finally:
        with contextlib.suppress(Exception):
            Path(request["result"]).write_text(json.dumps(said))
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(0 if not said else 2)


def serve(channel: socket.socket, modules: list[str]) -> None:
    """Import, say ready, then fork a worker per request until the socket closes."""
    _die_with_parent()
    faulthandler.register(signal.SIGUSR1, all_threads=True)  # server_start asks, if slow
    for module in modules:
        send(channel, {"importing": module})
        importlib.import_module(module)
    send(channel, {"ready": os.getpid()})
    while True:
        payload, fds, _flags, _address = socket.recv_fds(channel, MESSAGE_BYTES, 3)
        if not payload:
            return
        request = json.loads(payload.decode())
        sys.stdout.flush()
        sys.stderr.flush()
        become = _check_child if "check" in request else _run_child
        pid = _fork_grouped(functools.partial(become, request, fds, channel))
        for fd in fds:
            os.close(fd)
        send(channel, {"pid": pid})
        _pid, status, usage = os.wait4(pid, 0)
        send(channel, {"exit": pid, "returncode": os.waitstatus_to_exitcode(status),
                        "max_rss": usage.ru_maxrss * 1024})  # Linux gives KiB


def _fork_grouped(child: Callable[[int], None]) -> int:
    """Fork a child that runs `child` and return its pid once it leads a process group of
    its own: profile-all stops a pass by signalling its group, and a signal sent to a group
    that did not exist yet was lost (the pass then ran to its 10 s grace and was killed).
    The child closes the descriptor it is given once it has called setsid."""
    wait_end, grouped = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(wait_end)
        child(grouped)
    os.close(grouped)
    os.read(wait_end, 1)  # b"" once the child closed it (or ended)
    os.close(wait_end)
    return pid


class ForkServer:
    """The server process, from profile-all's side: started once a run, closed after."""

    def __init__(self, modules: list[str], env: dict[str, str]) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        self.channel, self.lines = ours, Lines(ours)
        self.process = subprocess.Popen(
            [sys.executable, "-m", "profile_all.runner.forkserver", str(theirs.fileno()), *modules],
            pass_fds=[theirs.fileno()], stdin=subprocess.DEVNULL, start_new_session=True,
            env=env)
        theirs.close()
        self._ready = False

    def wait_ready(self) -> None:
        if not self._ready:
            server_start.wait_ready(self.lines.read, self.process)
            self._ready = True

    def check(self, target_spec: dict[str, Any], scratch: Path, env: dict[str, str]) -> None:
        """Check a target in a forked child (`ModelTarget.validate`: build the model, run it
        once), so that profile-all itself never imports torch; its output is ours. Raises
        the UsageError the check raised there."""
        self.wait_ready()
        launch, result = scratch / "check.launch.json", scratch / "check.result.json"
        launch.write_text(json.dumps({"cwd": os.getcwd(), "env": env}))
        stdin = _stdin()
        try:
            send(self.channel, {"check": target_spec, "launch": str(launch),
                                 "result": str(result)}, [stdin, 1, 2])
        finally:
            if stdin != 0:
                os.close(stdin)
        message = self.lines.read()
        if message is None or "pid" not in message:
            raise OSError("the fork server stopped before checking the target")
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
        launch.write_text(json.dumps({"cwd": os.getcwd(), "env": env}))
        out_read, out_write = os.pipe()
        err_read, err_write = os.pipe()
        stdin = _stdin()
        try:
            send(self.channel, {"spec": str(spec_path), "launch": str(launch)},
                  [stdin, out_write, err_write])
        finally:
            for fd in (out_write, err_write):
                os.close(fd)
            if stdin != 0:
                os.close(stdin)
        message = self.lines.read()
        if message is None or "pid" not in message:
            raise OSError("the fork server stopped before forking a pass")
        return ForkedPass(message["pid"], self.lines, os.fdopen(out_read, "rb"),
                          os.fdopen(err_read, "rb"))

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
    It is the server's child, not ours: its end comes as a message from the server."""

    def __init__(self, pid: int, lines: Lines, stdout: BinaryIO, stderr: BinaryIO) -> None:
        self.pid, self.stdout, self.stderr, self._lines = pid, stdout, stderr, lines
        self.returncode: int | None = None
        self.max_rss: int | None = None  # its peak RSS in bytes, once it ended

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            try:
                message = self._lines.read(timeout)
            except TimeoutError:
                raise subprocess.TimeoutExpired(f"pass worker {self.pid}", timeout) from None
            # no message: the server died, and took its worker along
            self.returncode = message["returncode"] if message else -signal.SIGKILL
            self.max_rss = message.get("max_rss") if message else None
        return self.returncode

    def poll(self) -> int | None:
        return self.returncode


def main(argv: list[str]) -> None:
    channel = socket.socket(fileno=int(argv[1]))
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):  # profile-all left
        serve(channel, argv[2:])


if __name__ == "__main__":
    main(sys.argv)
