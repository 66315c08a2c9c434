"""Chrome traces parsed while the command is still importing what reads them.

`profile-all ingest` spends its first third of a second importing pandas, on one core,
before it reads a file; parsing a trace's JSON into columns (readers/chrome_trace.py, 40%
of reading one) needs none of that. So an ingest in a process that has not imported pandas
yet forks first a process that parses the traces it will read, one after the other, each
into a file of a private folder. When the readers are ready (`Parsing.ready`), that process
is ended, mid-file or not, and each read takes the columns parsed ahead of it
(`Parsed.taken`): the 8 traces of an 8-rank ingest mostly start with their columns made.

Columns are taken only for the same file, unchanged since (its inode, size and time), and
parsed under the limits in force (readers/limits.py). A file the process did not finish,
could not parse, or that is not a chrome trace is read as if nothing had been parsed ahead:
what it raises is the reader's own.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import shutil
import signal
import sys
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from profile_all.readers import IngestError, limits
from profile_all.runs import forked, ingest_paths

#: the names of the files parsed ahead: what torch.profiler and TensorBoard write
PARSED_NAMES = (".json", ".json.gz")


def _stamp(path: Path) -> tuple[int, int, int]:
    status = os.stat(path)
    return status.st_ino, status.st_size, status.st_mtime_ns


@dataclass(frozen=True)
class Parsed:
    """The files parsed ahead (their path as given -> the file holding their columns), and
    the limits they were parsed under."""

    files: dict[str, Path]
    limits: limits.Limits

    def taken(self, path: Path) -> Any:
        """The ChromeTrace of `path` parsed ahead, or None where it must be read (not
        parsed, other limits now, or the file changed since)."""
        kept = self.files.get(str(path))
        if kept is None or limits.current() != self.limits:
            return None
        with open(kept, "rb") as file:
            stamp, trace = pickle.load(file)  # (written by this run's own process)
        os.unlink(kept)
        return trace if stamp == _stamp(path) else None


class Parsing:
    """The process parsing the traces, and the folder it writes into."""

    def __init__(self, used: limits.Limits) -> None:
        self._limits = used
        self._pid, self._said = 0, -1
        self._folder: Path | None = None
        self._paths: list[Path] = []
        self._finished: list[int] = []

    def start(self, given: list[Path]) -> bool:
        """The process started on the traces of `given` (files and directories); False
        where it was not (nothing to list, no fork)."""
        try:
            named, found, _again, _lost = ingest_paths.expand(given)
        except (OSError, ValueError, IngestError):  # (the reading says why)
            return False
        self._paths = [*named, *found]
        self._folder = Path(tempfile.mkdtemp(prefix="profile-all-parsed-"))
        read_end, write_end = os.pipe()
        parent = os.getpid()
        # no Ctrl-C between the fork and the pid kept, which close() needs to end it
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        try:
            with forked.frozen():
                pid = os.fork()
                if pid == 0:
                    try:
                        signal.signal(signal.SIGINT, signal.SIG_DFL)  # Ctrl-C ends it
                        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
                        os.close(read_end)
                        with limits.applied(self._limits.max_unpacked,
                                            self._limits.max_field):
                            _parse_each(self._paths, self._folder, write_end, parent)
                    finally:
                        os._exit(0)  # never back into the parent's code
            self._pid, self._said = pid, read_end
        except OSError:  # (no memory or no process left for it)
            os.close(read_end)
        finally:
            os.close(write_end)
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
        return self._pid > 0

    def ready(self) -> Parsed:
        """The process ended (mid-file or not); the files it finished."""
        if self._pid:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self._pid, signal.SIGKILL)
            with os.fdopen(self._said, "rb") as pipe:
                finished = [int(number) for number in pipe.read().split()]
            os.waitpid(self._pid, 0)
            self._pid, self._finished = 0, finished
        return Parsed({str(self._paths[number]): self._folder / f"{number}.pickle"
                       for number in self._finished} if self._folder else {}, self._limits)

    def close(self) -> None:
        self.ready()
        if self._folder is not None:
            shutil.rmtree(self._folder, ignore_errors=True)


@contextlib.contextmanager
def started(paths: Sequence[Path], max_unpacked: int | None,
            max_field: int | None) -> Iterator[Parsing | None]:
    """A process parsing the traces of `paths` (files and directories, as an ingest names
    them) until `ready()`; None where it would gain nothing (pandas is imported already)
    or cannot run (no fork, threads). Whatever ends the block ends the process and
    removes its folder."""
    if "pandas" in sys.modules or not forked.can_fork():
        yield None
        return
    with limits.applied(max_unpacked, max_field):
        parsing = Parsing(limits.current())
    try:
        yield parsing if parsing.start(list(paths)) else None
    finally:
        parsing.close()


def _parse_each(paths: list[Path], folder: Path, said: int, parent: int) -> None:
    """Each trace parsed, its columns written into `folder`, its number said on `said`
    (the forked process's work; `parent`: the command's process)."""
    from profile_all.readers import chrome_trace

    for number, path in enumerate(paths):
        if os.getppid() != parent:  # the command is gone: so is what it would read
            shutil.rmtree(folder, ignore_errors=True)
            return
        if not path.name.endswith(PARSED_NAMES) or not path.is_file():
            continue
        try:
            stamp = _stamp(path)
            trace = chrome_trace.load(path)
        except Exception:  # (read again where it is read, and said there)
            continue
        with open(folder / f"{number}.pickle", "wb") as file:
            pickle.dump((stamp, trace), file, protocol=pickle.HIGHEST_PROTOCOL)
        os.write(said, f"{number}\n".encode())
