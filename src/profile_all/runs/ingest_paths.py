"""The files an ingest reads: those named, and the traces in the directories named. No
pandas here: the files are listed before the readers are imported (runs/parse_ahead.py)."""

from __future__ import annotations

import os
import stat
from collections.abc import Sequence
from pathlib import Path

from profile_all.readers import IngestError

#: the trace files a directory stands for (TensorBoard's `*.pt.trace.json.gz` among them)
TRACE_PATTERNS = ("*.json", "*.json.gz")


def _what(path: Path) -> str:
    """What a path named like a trace is, where it is no file to read (never opened: a
    FIFO would block the read)."""
    if path.is_symlink() and not path.exists():
        return "a link to nothing"
    kind = path.lstat().st_mode if path.exists() or path.is_symlink() else 0
    return "a FIFO" if stat.S_ISFIFO(kind) else "a socket" if stat.S_ISSOCK(kind) \
        else "a device" if stat.S_ISCHR(kind) or stat.S_ISBLK(kind) else "not a regular file"


def _run_folder(folder: Path) -> bool:
    return (folder / "meta.json").is_file() and (folder / "report.parquet").is_file()


def expand(paths: Sequence[str | Path]
           ) -> tuple[list[Path], list[Path], list[str], list[str]]:
    """(the files named, the files directories hold, what was left out of them, a sentence
    each, and the folders inside them that could not be listed: what they hold is lost).
    A directory (what HTA and TensorBoard users point at) stands for the chrome
    traces in it, at any depth, in name order: each a pass of its own, its rank from the
    trace; a file there that is not a trace (a config.json) is left out and said to be; a
    profile-all run folder in it (meta.json and report.parquet: an earlier report, whose
    traces were the same rank's as the user's) is left out whole, named. A file met twice
    (named twice, under two names, or named and inside a directory named) is read once:
    summed twice, its operators counted double."""
    named, found, said, lost = [], [], [], []
    for path in map(Path, paths):
        if path.is_dir():
            found += _traces_in(path, said, lost)
        else:
            named.append(path)
    once = _ReadOnce(said)
    return ([path for path in named if once.first_time(path, "named")],
            [path for path in found if once.first_time(path, "met")], said, lost)


def _traces_in(folder: Path, said: list[str], lost: list[str]) -> list[Path]:
    """The trace files a directory holds, outside profile-all run folders; what was left
    out appended to `said`, the folders in it that cannot be listed to `lost`."""
    lost += _unlisted(folder)
    runs = sorted({p.parent for p in folder.rglob("meta.json") if _run_folder(p.parent)})
    said += [f"left out, a profile-all run folder: {run} (`profile-all show {run}` reads it)"
             for run in runs]
    matched = sorted({p for pattern in TRACE_PATTERNS for p in folder.rglob(pattern)
                      if not any(p.is_relative_to(run) for run in runs)})
    said += [f"left out, not a file: {p} ({_what(p)})" for p in matched
             if not p.is_file() and not p.is_dir()]
    inside = [p for p in matched if p.is_file()]
    if not inside:
        raise IngestError(f"{folder}: a directory with no trace file in it "
                          f"({', '.join(TRACE_PATTERNS)}, at any depth"
                          f"{', outside profile-all run folders' if runs else ''})")
    return inside


def _unlisted(folder: Path) -> list[str]:
    """The folders under `folder` that cannot be listed, a sentence each (rglob passes
    over them without a word)."""
    unreadable: list[OSError] = []
    for _walked in os.walk(folder, onerror=unreadable.append):
        pass
    return [f"{error.filename}: a folder that cannot be read ({error.strerror or error})"
            for error in unreadable]


class _ReadOnce:
    """Files told apart by device and inode: the second name of one is said, not read."""

    def __init__(self, said: list[str]) -> None:
        self.seen: dict[tuple[int, int], Path] = {}
        self.said = said

    def first_time(self, path: Path, where: str) -> bool:
        try:
            facts = path.stat()
        except OSError:  # the reader says what is wrong with it
            return True
        first = self.seen.setdefault((facts.st_dev, facts.st_ino), path)
        if first is not path:
            self.said.append(f"read once: {path} ({where} twice)" if str(path) == str(first)
                             else f"read once: {path} ({first} again)")
        return first is path
