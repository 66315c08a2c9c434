"""Work done in a forked process beside this one: a report's files written while its caller
draws it, many files read at once (parallel_read).

Fork only where this process runs one thread (a notebook's kernel, a program with threads
of its own: a lock held by another thread at the fork would stay held in the child), and
where the platform forks; elsewhere the work is done here, one piece after the other. The
objects alive at a fork are hidden from the garbage collector meanwhile (`gc.freeze`): its
passes write to every object's header, and so would copy, in each child, the pages the
child only reads (a tenth of an 8-rank ingest's peak memory).
"""

from __future__ import annotations

import gc
import multiprocessing
import os
import pickle
import threading
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager


def can_fork() -> bool:
    return threading.active_count() == 1 and "fork" in multiprocessing.get_all_start_methods()


@contextmanager
def frozen() -> Iterator[None]:
    """The objects alive now out of the collector's sight until the block ends (here; a
    child forked in the block keeps them so)."""
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def beside(work: Callable[[], object], meanwhile: Callable[[], object]) -> None:
    """`work()` in a forked child while `meanwhile()` runs here; return once both ended,
    raising what `work` raised (after `meanwhile` ended, whatever it raised). Where this
    process cannot fork: `work()`, then `meanwhile()`."""
    started = _started(work) if can_fork() else None
    if started is None:
        work()
        meanwhile()
        return
    pid, read_end = started
    try:
        meanwhile()
    finally:
        error = _child_ended(pid, read_end)
    if error is not None:
        raise error


def _started(work: Callable[[], object]) -> tuple[int, int] | None:
    """(pid, the read end of its pipe) of a forked child doing `work`; None where the fork
    failed (no memory or no process left for it)."""
    read_end, write_end = os.pipe()
    with frozen():
        try:
            pid = os.fork()
        except OSError:
            os.close(read_end)
            os.close(write_end)
            return None
        if pid == 0:  # the child: never returns, never runs the parent's exit handlers
            os.close(read_end)
            _work_then_exit(work, write_end)
    os.close(write_end)
    return pid, read_end


def _work_then_exit(work: Callable[[], object], write_end: int) -> None:
    try:
        work()
        status = 0
    except BaseException as error:  # handed to the parent, raised there
        error.add_note(f"(in the process that wrote it)\n{traceback.format_exc()}")
        try:
            payload = pickle.dumps(error)
        except Exception:
            payload = pickle.dumps(RuntimeError(f"{type(error).__name__}: {error}"))
        with os.fdopen(write_end, "wb") as pipe:
            pipe.write(payload)
        status = 1
    os._exit(status)


def _child_ended(pid: int, read_end: int) -> BaseException | None:
    """What the child raised (None if nothing), once it ended."""
    with os.fdopen(read_end, "rb") as pipe:
        payload = pipe.read()
    _, status = os.waitpid(pid, 0)
    if payload:
        return pickle.loads(payload)  # (from the child this process forked)
    code = os.waitstatus_to_exitcode(status)
    return None if code == 0 else RuntimeError(
        f"the process writing the report ended with {code} and said nothing")
