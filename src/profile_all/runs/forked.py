"""Work done in a forked process beside this one, what it returns pickled back: a report's
findings made while its sections are made here, its files written while its caller draws
it (store.py), many files read at once (parallel_read).

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
from typing import Any, TypeVar

T = TypeVar("T")


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


def beside(work: Callable[[], T], meanwhile: Callable[[], object]) -> T:
    """`work()` in a forked child while `meanwhile()` runs here; return what `work`
    returned (pickled back) once both ended, or raise what it raised (after `meanwhile`
    ended, whatever that raised). Where this process cannot fork: `work()`, then
    `meanwhile()`."""
    started = _started(work) if can_fork() else None
    if started is None:
        result = work()
        meanwhile()
        return result
    pid, read_end = started
    try:
        meanwhile()
    finally:
        error, result = _child_ended(pid, read_end)
    if error is not None:
        raise error
    return result


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
    """(The child.) What `work` returned, or the exception it raised, pickled to the
    parent."""
    try:
        payload = pickle.dumps((None, work()))
        status = 0
    except BaseException as error:  # handed to the parent, raised there
        error.add_note(f"(in the process that wrote it)\n{traceback.format_exc()}")
        try:
            payload = pickle.dumps((error, None))
        except Exception:
            payload = pickle.dumps((RuntimeError(f"{type(error).__name__}: {error}"), None))
        status = 1
    with os.fdopen(write_end, "wb") as pipe:
        pipe.write(payload)
    os._exit(status)


def _child_ended(pid: int, read_end: int) -> tuple[BaseException | None, Any]:
    """(what the child raised or None, what its work returned), once it ended."""
    with os.fdopen(read_end, "rb") as pipe:
        payload = pipe.read()
    _, status = os.waitpid(pid, 0)
    if payload:
        return pickle.loads(payload)  # (from the child this process forked)
    code = os.waitstatus_to_exitcode(status)
    return RuntimeError(f"the process writing the report ended with {code} and said "
                        "nothing"), None
