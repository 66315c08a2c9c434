"""`python -m profile_all.runner.inside.worker SPEC.json`: one pass in a process of its own.

Whatever way the target ends, what the backends measured reaches the result file named in
the spec:
- a return, an exception, sys.exit or Ctrl-C unwind into `PassRun.finish`;
- SIGTERM and SIGHUP (the orchestrator's timeout sends SIGTERM) raise `Terminated` in the
  target, which unwinds the same way;
- `os._exit` is wrapped so that the pass is finished and written before the process ends;
- a target blocked in native code (a collective waiting for a rank that hangs) never
  returns to Python to raise `Terminated`; a watcher thread, woken through the signal
  wakeup fd, finishes the pass and exits itself if the main thread has not begun to
  within STUCK_SECONDS;
- SIGKILL and crashes leave no chance: the orchestrator then asks each backend to
  `recover` what it journaled on disk;
- profile-all itself killed (SIGKILL, the OOM killer): a watcher thread sees its parent
  gone within PARENT_POLL_SECONDS and stops its process group as a timeout would, so that
  no target runs on headless.

Forked children of the target (DataLoader workers) inherit all this; they are recognised
by their pid and left to behave as they would without profile-all.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import sys
import threading
import time
from pathlib import Path
from time import perf_counter
from typing import Any

import psutil

from profile_all import process_control, std_streams
from profile_all.fileio import write_atomic
from profile_all.runner.inside.pass_run import Outcome, PassRun, Terminated, stopped
from profile_all.runner.spec import PassResult, PassSpec
from profile_all.runner.starting import prestarted
from profile_all.runner.watching import child_processes

#: the worker's own pid, set as it starts (a worker forked from the fork server imported
#: this module in the server)
_WORKER_PID = os.getpid()
_real_os_exit = os._exit
#: how long the main thread gets to act on SIGTERM before the watcher finishes the pass
STUCK_SECONDS = 2.0
#: how often the worker checks that profile-all still runs
PARENT_POLL_SECONDS = 0.5


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def _watch_parent(profile_all_pid: int, distributed: bool) -> None:
    """Stop this pass (SIGTERM to its process group) once profile-all is gone: its pid is
    dead or a zombie, or the worker's own parent changed (it was reparented) where that
    parent is profile-all or torchrun. A worker forked from the fork server goes on when
    the server is killed (profile-all starts the next passes without it)."""
    parent = os.getppid()
    parent_counts = distributed or parent == profile_all_pid

    def watch() -> None:
        while (not parent_counts or os.getppid() == parent) and not _gone(profile_all_pid):
            time.sleep(PARENT_POLL_SECONDS)
        with contextlib.suppress(OSError):
            os.killpg(os.getpgrp(), signal.SIGTERM)

    threading.Thread(target=watch, daemon=True, name="profile-all-parent-watch").start()


def _raise_terminated(signum: int, frame: Any) -> None:
    if os.getpid() != _WORKER_PID:  # a forked child: die of the signal as it would have
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)
        return
    raise Terminated(signum)


#: the worker's exit status when its result cannot be written (sysexits' EX_IOERR)
RESULT_UNWRITTEN = 74


def _write_result(path: Path, result: PassResult) -> None:
    """The result written whole; where it cannot be (a full disk), one line and exit
    RESULT_UNWRITTEN, which profile-all says."""
    try:
        write_atomic(path, result.to_json())
    except OSError as error:
        print(f"profile-all: the pass's result could not be written to {path}: "
              f"{error.strerror or error}", file=sys.stderr, flush=True)
        _real_os_exit(RESULT_UNWRITTEN)


def _write_windows(spec: PassSpec, pass_run: PassRun) -> None:
    """The results of the passes this one hosted in windows of steps, each to its own file
    (after the host's: finish made them)."""
    paths = {window["number"]: window["result_path"] for window in spec.windows}
    for result in pass_run.window_results:
        _write_result(Path(paths[result.number].replace("{rank}", str(spec.rank))), result)


def _forget_wakeup_fd() -> None:
    with contextlib.suppress(ValueError):  # forked off another thread: nothing was set
        signal.set_wakeup_fd(-1)


def _watch_for_stuck_stop(pass_run: PassRun, result_path: Path) -> None:
    """Wake on SIGTERM/SIGHUP even while the main thread is blocked in C; give it
    STUCK_SECONDS to start finishing, else finish the pass from here and exit."""
    read_end, write_end = os.pipe()
    os.set_blocking(write_end, False)
    signal.set_wakeup_fd(write_end, warn_on_full_buffer=False)
    # a forked child's signals (a DataLoader worker's SIGTERM) must not wake our watcher
    os.register_at_fork(after_in_child=_forget_wakeup_fd)

    def watch() -> None:
        while True:
            received = os.read(read_end, 64)
            if not {signal.SIGTERM, signal.SIGHUP} & set(received):
                continue
            time.sleep(STUCK_SECONDS)
            if pass_run.finishing:
                continue
            name = signal.Signals(received[-1]).name
            outcome = Outcome("terminated", 128 + received[-1],
                              f"terminated by {name} while blocked in native code",
                              perf_counter() - pass_run.target_started)
            _write_result(result_path, pass_run.finish(outcome))
            _write_windows(pass_run.spec, pass_run)
            sys.stdout.flush()
            sys.stderr.flush()
            _real_os_exit(outcome.exit_code)

    threading.Thread(target=watch, daemon=True, name="profile-all-stop-watch").start()


def _raise_stops(held: list[int]) -> None:
    """From here a stop signal is raised where it comes: a Ctrl-C passed on by profile-all
    is a KeyboardInterrupt in the target, as without it (even where profile-all was started
    with SIGINT ignored, in the background), SIGTERM and SIGHUP are `Terminated`; one that
    came while the pass was set up is raised now."""
    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, _raise_terminated)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    if held:
        if held[0] == signal.SIGINT:
            raise KeyboardInterrupt
        _raise_terminated(held[0], None)


def main(argv: list[str]) -> int:
    global _WORKER_PID
    if argv[1:2] == [prestarted.SPEC_FROM_FD]:  # started early: its spec comes when due
        spec_path = prestarted.spec_path_from(argv)
        if spec_path is None:
            return 0
        argv = [argv[0], spec_path]
    _WORKER_PID = os.getpid()
    std_streams.open_closed_ones()  # the target's open() must not take 0, 1 or 2
    spec = PassSpec.from_json(Path(argv[1]).read_bytes())
    if spec.distributed:  # one of several ranks, started by torchrun
        spec = spec.for_rank(int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]))
    result_path = spec.result_file
    # a stop that comes while the pass is set up is held until its start can end it cleanly
    held: list[int] = []
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, lambda signum, _frame: held.append(signum))
    pass_run = PassRun(spec, own_process=True)

    def exit_now(code: int) -> None:
        if os.getpid() == _WORKER_PID:
            outcome = Outcome("os_exit", code, f"os._exit({code})",
                              perf_counter() - pass_run.target_started)
            _write_result(result_path, pass_run.finish(outcome))
            _write_windows(spec, pass_run)
            sys.stdout.flush()
            sys.stderr.flush()
        _real_os_exit(code)

    os._exit = exit_now
    process_control.adopt_orphans()  # a child in a session of its own comes to us, not to init
    _watch_for_stuck_stop(pass_run, result_path)
    if spec.parent_pid:
        _watch_parent(spec.parent_pid, spec.distributed)
    try:
        _raise_stops(held)
        pass_run.start()
    except (KeyboardInterrupt, Terminated) as error:  # stopped before its target started
        outcome = stopped(error, pass_run.target_started)
    else:
        outcome = pass_run.run_target()
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):  # let collection finish
        signal.signal(signum, signal.SIG_IGN)
    result = dataclasses.replace(pass_run.finish(outcome),
                                 left_running=child_processes.end_escaped())
    os._exit = _real_os_exit
    _write_result(result_path, result)
    _write_windows(spec, pass_run)
    return outcome.exit_code


if __name__ == "__main__":
    sys.exit(main(sys.argv))
