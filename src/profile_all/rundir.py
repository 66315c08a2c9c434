"""The run directory: built under a hidden temporary name, renamed into place when complete,
so a run directory either holds a whole report or does not exist."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

from profile_all.errors import UsageError

DEFAULT_ROOT = Path("reports")


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
        work = final.parent / f".{final.name}.partial-{os.getpid()}"
        try:
            final.parent.mkdir(parents=True, exist_ok=True)
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
