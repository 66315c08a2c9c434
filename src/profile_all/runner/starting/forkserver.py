"""Passes forked from one server that has imported everything once, instead of a fresh
interpreter and an `import torch` (seconds) per pass.

profile-all starts `python -m profile_all.runner.starting.forkserver MODULES...` once a run: it
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

Measured gain, the demo (train_mlp.py --steps 100) with the server and with every pass in
a fresh interpreter instead, whole commands, medians (scripts/bench/process_tricks.py, 3
rounds, one thread, 2-core VM, 2026-11-28): a default run (one process hosts the windows)
3.19 s against 4.32 s, 1.13 s; with --separate-passes (five processes) 3.66 s against
19.75 s, 16.1 s (each fresh pass imports torch and torch._dynamo again).

This module is the server's own process; `server_handle` is the server from profile-all's
side (start it, tell it the rest of its modules, ask it for a pass or a check, close it).
"""

from __future__ import annotations

import contextlib
import faulthandler
import functools
import importlib
import json
import os
import random
import signal
import socket
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from profile_all import process_control, std_streams
from profile_all.fileio import current_folder
from profile_all.runner.starting.server_messages import MESSAGE_BYTES, send

#: the server's first argument when the rest of its modules come in a message
MORE_LATER = "--more-later"


def _die_with_parent() -> None:
    """The server goes when profile-all goes (Linux); elsewhere its passes still watch
    profile-all's pid, and the server ends when its socket closes."""
    process_control.die_with_parent(signal.SIGTERM)


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
    server_cwd = current_folder()
    with contextlib.suppress(FileNotFoundError):  # removed: the server's is it, unnamed
        os.chdir(launch["cwd"])
        if sys.path[:1] == [server_cwd]:  # `python -m` put it there: the pass's own instead
            sys.path[0] = launch["cwd"]  # (a server kept from a run elsewhere)
    importlib.invalidate_caches()  # files made since the server's imports are found
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


def _import(channel: socket.socket, modules: list[str]) -> None:
    for module in modules:
        send(channel, {"importing": module})
        importlib.import_module(module)


def serve(channel: socket.socket, modules: list[str]) -> None:
    """Import, say ready, then fork a worker per request until the socket closes. Started
    with MORE_LATER first, it imports the modules named after it, then those of the
    message that follows ({"import": [...]}), which a server started before the run's
    modules were known waits for."""
    _die_with_parent()
    faulthandler.register(signal.SIGUSR1, all_threads=True)  # server_start asks, if slow
    more_later = modules[:1] == [MORE_LATER]
    _import(channel, modules[1:] if more_later else modules)
    if more_later:
        payload = channel.recv(MESSAGE_BYTES)
        if not payload:
            return
        _import(channel, json.loads(payload.decode())["import"])
    send(channel, {"ready": os.getpid()})
    while True:
        payload, fds, _flags, _address = socket.recv_fds(channel, MESSAGE_BYTES, 3)
        if not payload:
            return
        request = json.loads(payload.decode())
        if "ping" in request:  # is it idle? (a server kept for the next run: kept_servers)
            send(channel, {"pong": True})
            continue
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


def main(argv: list[str]) -> None:
    std_streams.open_closed_ones()  # started by a program that called the API with some closed
    channel = socket.socket(fileno=int(argv[1]))
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):  # profile-all left
        serve(channel, argv[2:])


if __name__ == "__main__":
    main(sys.argv)
