"""The run directory: built under a hidden temporary name, renamed into place when complete,
so a run directory either holds a whole report or does not exist.

The hidden name is `.NAME.partial-PID`. A run holds its folder's name while it writes: an
exclusive lock on `.NAME.lock` beside it (name_lock.py), released when the run ends, or
dies. A second run into the same folder is refused at once. A profile-all killed outright
(SIGKILL) leaves its work folder behind: the next run into the same parent folder removes
those whose lock it can take, and no other (a PID says nothing of a run in another PID
namespace, a container or a host on the same volume: such a run's folder was removed as
it ran). A finished report is never left unplaced: when its name was taken meanwhile by
something that held no lock, it goes to NAME-2 (or -3...) and says so. A report that
cannot be written (a full disk) leaves what was measured in NAME.unsaved, which no run
removes, and says so in one line (`SaveError`)."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from profile_all.errors import SaveError, UsageError
from profile_all.runs import name_lock
from profile_all.safe_text import visible

DEFAULT_ROOT = Path("reports")
PARTIAL = ".partial-"
UNSAVED = ".unsaved"


def _remove_abandoned(parent: Path, own: Path) -> None:
    """Remove the hidden work folders of runs that hold no lock: they died (`own`: this
    run's folder, whose name's lock this run holds)."""
    for folder in parent.glob(f".*{PARTIAL}*"):
        name = folder.name[1:].rpartition(PARTIAL)[0]
        if folder.is_symlink() or not folder.is_dir() or not name:
            continue
        if name == own.name:  # a dead run's, into this run's name: the lock is ours
            shutil.rmtree(folder, ignore_errors=True)
            continue
        path = parent / f".{name}.lock"
        with contextlib.suppress(OSError):
            held = name_lock.take(path)
            if held is not None:
                shutil.rmtree(folder, ignore_errors=True)
                name_lock.release(path, held)


def _default_path(label: str) -> Path:
    """reports/<time>-<label>; a label's bytes that are not UTF-8 (a script's name) as
    `_`: the folder is named in text every tool can show and type."""
    label = re.sub("[\ud800-\udfff]", "_", label)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    path = DEFAULT_ROOT / f"{stamp}-{label}"
    suffix = 2
    while path.exists():
        path = DEFAULT_ROOT / f"{stamp}-{label}-{suffix}"
        suffix += 1
    return path


def _taken(final: Path) -> bool:
    return final.exists() and (not final.is_dir() or any(final.iterdir()))


def _taken_said(final: Path) -> str:
    if final.is_dir():
        return f"output folder {final} exists and is not empty"
    return f"output folder {final} is a file, not a folder: give -o a folder's name"


def _locked(final: Path) -> int:
    """A descriptor holding the exclusive lock on `final`'s name; UsageError when another
    run holds it."""
    path = name_lock.lock_path(final)
    try:
        held = name_lock.take(path)
    except name_lock.LinkedLock as error:
        raise UsageError(f"cannot write the output folder {final}: {path} is {error.strerror}"
                         ": refused") from None
    if held is None:
        raise UsageError(f"another profile-all is writing {final} now (it holds {path}): "
                         "give this run another -o")
    return held


def _followed(out: Path) -> Path:
    """`-o LINK`: the folder the link names (it was renamed over: a folder cannot replace
    a link, and the report went to LINK-2, `LINK` said to be taken)."""
    return Path(os.path.realpath(out)) if out.is_symlink() else out


def _what_is_kept(kept: Path) -> str:
    """What a folder whose report could not be written holds, and how to read it."""
    held = []
    if all((kept / name).is_file() for name in (
            "meta.json", "report.parquet", "samples.parquet", "timeline.parquet")):
        held.append(f"its rows and meta.json (profile-all show {kept}; with --html, once "
                    "there is room, it writes report.html)")
    elif any((kept / "scratch").glob("pass*.result.rank*.json")):
        held.append("the passes' rows in scratch/ (JSON)")
    if any(path.is_file() and path.stat().st_size for path in (kept / "artifacts").iterdir()):
        held.append("each tool's files and the passes' logs in artifacts/")
    if not held:
        return (f"nothing that was measured could be written either (the passes' results "
                f"were lost to the same fault); {kept} holds what little was")
    return f"what was measured is kept in {kept}: {', '.join(held)}"


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
            raise UsageError(_taken_said(Path(out)))

    @classmethod
    def create(cls, out: Path | None, label: str) -> RunDirectory:
        final = _followed(Path(out)) if out is not None else _default_path(label)
        if _taken(final):
            raise UsageError(_taken_said(final))
        work = final.parent / f".{final.name}{PARTIAL}{os.getpid()}"
        lock = None
        try:
            final.parent.mkdir(parents=True, exist_ok=True)
            lock = _locked(final)
            if _taken(final):  # a run that held the lock finished into it just now
                raise UsageError(_taken_said(final))
            _remove_abandoned(final.parent, final)
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
            name_lock.release(name_lock.lock_path(final), lock)

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
        try:
            save(report, self.work, kept if meanwhile else None)
        except OSError as error:
            raise self._unsaved(error, report) from None
        report.run_dir = self.commit()
        if raised:
            raise raised[0]
        return report

    def _unsaved(self, error: OSError, report: Any) -> SaveError:
        """The report could not be written: what `load` reads written alone once more,
        in the room the files made from it leave (they go), the work folder, with what
        was measured, placed beside as NAME.unsaved (a hidden work folder is removed by
        the next run), the name released, and one line that says so."""
        from profile_all.runs.store import DERIVED, save_rows

        for derived in DERIVED:
            (self.work / derived).unlink(missing_ok=True)
        with contextlib.suppress(OSError):
            save_rows(report, self.work)
        kept = self.final.with_name(self.final.name + UNSAVED)
        if kept.exists() or kept.is_symlink():
            kept = _free_name(kept)
        try:
            os.rename(self.work, kept)
        except OSError:
            kept = self.work  # where it is: the lock is let go, so the next run removes it
        self._release(self.final, self._lock)
        self._lock = None
        cause = error.strerror or str(error)
        if error.filename:
            cause += f", writing {Path(error.filename).name}"
        return SaveError(f"the report could not be written to {self.final} ({cause}): "
                         + _what_is_kept(kept))

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
            print(visible(f"profile-all: {self.final} was taken while this run wrote: its "
                          f"report is in {placed}"), file=sys.stderr)
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
