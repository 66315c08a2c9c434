"""The run directory: built under a hidden temporary name, renamed into place when complete,
so a run directory either holds a whole report or does not exist.

The hidden name is `.NAME.partial-PID`. A profile-all killed outright (SIGKILL) leaves its
folder behind; the next run into the same parent folder removes such folders whose PID
is gone, and leaves those of runs still going alone."""

from __future__ import annotations

import os
import shutil
import time
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


class RunDirectory:
    def __init__(self, final: Path, work: Path) -> None:
        self.final = final
        self.work = work  # where everything is written until commit()

    @classmethod
    def create(cls, out: Path | None, label: str) -> RunDirectory:
        final = Path(out) if out is not None else _default_path(label)
        if final.exists() and (not final.is_dir() or any(final.iterdir())):
            raise UsageError(f"output folder {final} exists and is not empty")
        work = final.parent / f".{final.name}{PARTIAL}{os.getpid()}"
        try:
            final.parent.mkdir(parents=True, exist_ok=True)
            _remove_abandoned(final.parent)
            work.mkdir()
            (work / "artifacts").mkdir()
            (work / "scratch").mkdir()
        except OSError as error:
            shutil.rmtree(work, ignore_errors=True)
            raise UsageError(
                f"cannot write the output folder {final}: {error.strerror or error}") from None
        return cls(final, work)

    @property
    def artifacts(self) -> Path:
        return self.work / "artifacts"

    @property
    def scratch(self) -> Path:
        """Spec, result and journal files of the passes; removed at commit."""
        return self.work / "scratch"

    def commit(self) -> Path:
        shutil.rmtree(self.scratch, ignore_errors=True)
        if self.final.is_dir():  # an empty folder the user named with -o
            self.final.rmdir()
        os.rename(self.work, self.final)
        return self.final


def load(run_dir: str | Path) -> Any:
    """A saved run's Report; a run written before the backends' facts were saved (format
    1) gets those of the backends installed here, by name."""
    from profile_all import backends
    from profile_all.report.store import load as load_report

    report = load_report(run_dir)
    if "backend_facts" not in report.meta:
        report.meta["backend_facts"] = backends.facts_of(report.frame["backend"].unique())
    return report
