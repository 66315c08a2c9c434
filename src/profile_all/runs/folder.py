"""The run directory: built under a hidden temporary name, renamed into place when complete,
so a run directory either holds a whole report or does not exist.

The hidden name is `.NAME.partial-PID`. A profile-all killed outright (SIGKILL) leaves its
folder behind; the next run into the same parent folder removes such folders whose PID
is gone, and leaves those of runs still going alone.

A run holds its folder's name while it writes: an exclusive lock (flock) on `.NAME.lock`
beside it, released when the run ends, or dies. A second run into the same folder is
refused at once; and a finished report is never left unplaced (two runs once raced, the
second died renaming its folder onto the first's, and the next run deleted it): when its
name was taken meanwhile by something that held no lock, it goes to NAME-2 (or -3...)
and says so."""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil

from profile_all.errors import UsageError

DEFAULT_ROOT = Path("reports")
PARTIAL = ".partial-"


def _running(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _remove_abandoned(parent: Path) -> None:
    """Remove the hidden work folders of runs whose profile-all is gone."""
    for folder in parent.glob(f".*{PARTIAL}*"):
        pid = folder.name.rpartition(PARTIAL)[2]
        if folder.is_dir() and pid.isdigit() and not _running(int(pid)):
            shutil.rmtree(folder, ignore_errors=True)


def _default_path(label: str) -> Path:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    path = DEFAULT_ROOT / f"{stamp}-{label}"
    suffix = 2
    while path.exists():
        path = DEFAULT_ROOT / f"{stamp}-{label}-{suffix}"
        suffix += 1
    return path


def _taken(final: Path) -> bool:
    return final.exists() and (not final.is_dir() or any(final.iterdir()))


def _locked(final: Path) -> int:
    """A descriptor holding the exclusive lock on `final`'s name; UsageError when another
    run holds it."""
    import fcntl

    path = final.parent / f".{final.name}.lock"
    descriptor = os.open(path, os.O_CREAT | os.O_RDWR, 0o644)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(descriptor)
        raise UsageError(f"another profile-all is writing {final} now (it holds {path}): "
                         "give this run another -o") from None
    return descriptor


def _free_name(final: Path) -> Path:
    suffix = 2
    while (candidate := final.with_name(f"{final.name}-{suffix}")).exists():
        suffix += 1
    return candidate


class RunDirectory:
    def __init__(self, final: Path, work: Path, lock: int | None = None) -> None:
        self.final = final
        self.work = work  # where everything is written until commit()
        self._lock = lock  # the descriptor holding final's name

    @staticmethod
    def refuse_taken(out: Path | None) -> None:
        """UsageError now where `out` holds something already (an ingest reads its files
        before it makes the folder: a taken name was said after the last file was read)."""
        if out is not None and _taken(Path(out)):
            raise UsageError(f"output folder {out} exists and is not empty")

    @classmethod
    def create(cls, out: Path | None, label: str) -> RunDirectory:
        final = Path(out) if out is not None else _default_path(label)
        if _taken(final):
            raise UsageError(f"output folder {final} exists and is not empty")
        work = final.parent / f".{final.name}{PARTIAL}{os.getpid()}"
        lock = None
        try:
            final.parent.mkdir(parents=True, exist_ok=True)
            lock = _locked(final)
            if _taken(final):  # a run that held the lock finished into it just now
                raise UsageError(f"output folder {final} exists and is not empty")
            _remove_abandoned(final.parent)
            work.mkdir()
            (work / "artifacts").mkdir()
            (work / "scratch").mkdir()
        except (OSError, UsageError) as error:
            if lock is not None:  # (the work folder is this run's only under the lock)
                shutil.rmtree(work, ignore_errors=True)
            cls._release(final, lock)
            if isinstance(error, UsageError):
                raise
            raise UsageError(
                f"cannot write the output folder {final}: {error.strerror or error}") from None
        return cls(final, work, lock)

    @staticmethod
    def _release(final: Path, lock: int | None) -> None:
        if lock is not None:
            with contextlib.suppress(OSError):
                (final.parent / f".{final.name}.lock").unlink()
            os.close(lock)

    def discard(self) -> None:
        """The work folder removed and the name released: the command was refused after
        the folder was made (nothing was measured)."""
        shutil.rmtree(self.work, ignore_errors=True)
        self._release(self.final, self._lock)
        self._lock = None

    @property
    def artifacts(self) -> Path:
        return self.work / "artifacts"

    @property
    def scratch(self) -> Path:
        """Spec, result and journal files of the passes; removed at commit."""
        return self.work / "scratch"

    def save(self, report: Any, meanwhile: Callable[[Any], object] | None = None) -> Any:
        """`report` saved in this folder (`meanwhile(report)` runs as its files are
        written: runs/store.py), then the folder renamed into place, whatever `meanwhile`
        raised (raised then); the report."""
        from profile_all.runs.store import save

        raised: list[BaseException] = []

        def kept(report: Any) -> None:  # what it raised, raised once the folder is in place
            try:
                meanwhile(report)
            except BaseException as error:
                raised.append(error)

        report.run_dir = self.final
        save(report, self.work, kept if meanwhile else None)
        report.run_dir = self.commit()
        if raised:
            raise raised[0]
        return report

    def commit(self) -> Path:
        """The folder renamed into place (NAME-2... when NAME was taken meanwhile), and its
        name released."""
        shutil.rmtree(self.scratch, ignore_errors=True)
        with contextlib.suppress(OSError):
            if self.final.is_dir():  # an empty folder the user named with -o
                self.final.rmdir()
        placed = self.final
        try:
            os.rename(self.work, placed)
        except OSError:  # taken by something that held no lock: the report is kept beside
            placed = _free_name(self.final)
            os.rename(self.work, placed)
            print(f"profile-all: {self.final} was taken while this run wrote: its report is "
                  f"in {placed}", file=sys.stderr)
        self._release(self.final, self._lock)
        self._lock = None
        return placed


def load(run_dir: str | Path) -> Any:
    """A saved run's Report; a run that holds no backend's facts (written before they were
    saved, format 1) gets those of the backends installed here, by name."""
    from profile_all import backends
    from profile_all.runs.store import load as load_report

    report = load_report(run_dir)
    if not report.meta.backend_facts:
        report.meta.backend_facts = backends.facts_of(report.frame["backend"].unique())
    return report
