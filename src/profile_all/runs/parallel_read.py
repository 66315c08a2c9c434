"""Many files read at once, one process a core: an ingest of 64 rank traces is as many
reads that share nothing.

The workers are forked from this process (which has imported the readers already: a
fresh interpreter would spend longer importing pandas than reading a trace), each reads
one file at a time, so memory holds at most a file per core beyond what the report keeps;
the results come back in the order of the paths. Fork only where this process runs one
thread, with the objects alive at the fork hidden from the garbage collector (see
forked.py): elsewhere, and on one core, the files are read one after the other, as they
are for a single file.
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from profile_all.runs import forked


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # (not on Linux)
        return os.cpu_count() or 1


def _caught(read: Callable[[Path], Any], path: Path) -> Any:
    try:
        return read(path)
    except Exception as error:  # handed back, raised where the caller looks at it
        return error


def each(read: Callable[[Path], Any], paths: Sequence[Path],
         progress: Callable[[int, int], object] | None = None) -> list[Any]:
    """`read(path)` of every path, in order: its result, or the exception it raised;
    `progress(files read, files)` told as each is read."""
    workers = min(len(paths), _cores())
    if workers < 2 or not forked.can_fork():
        return _told((_caught(read, path) for path in paths), len(paths), progress)
    with forked.frozen(), ProcessPoolExecutor(
            workers, mp_context=multiprocessing.get_context("fork")) as pool:
        return _told(pool.map(_caught, [read] * len(paths), paths), len(paths), progress)


def _told(results: Iterable[Any], total: int,
          progress: Callable[[int, int], object] | None) -> list[Any]:
    out = []
    for result in results:
        out.append(result)
        if progress is not None:
            progress(len(out), total)
    return out
