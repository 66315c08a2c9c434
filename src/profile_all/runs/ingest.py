"""`profile-all ingest`: a report built from native files that already exist (chrome traces,
pstats files, Nsight Systems exports, reports and CSVs, mprof files), so users who have
traces get the same report."""

from __future__ import annotations

import re
import shlex
import shutil
from collections import defaultdict
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path

import pandas as pd

from profile_all import backends, environment
from profile_all.errors import UsageError
from profile_all.readers import BrokenFile, IngestError, limits
from profile_all.readers.detect import IngestedFile, read_any
from profile_all.readers.plausible import ImpossibleValues
from profile_all.readers.trace_rank import MAX_RANK
from profile_all.report.report import Report
from profile_all.rows import MEASURED
from profile_all.run_record import ArtifactRecord, RunRecord, SourceRecord
from profile_all.runs import ingest_paths, parallel_read, parse_ahead
from profile_all.runs.folder import RunDirectory

#: the words before a rank number in a file name, strongest first
_RANK_WORDS = ("rank", "process", "proc", "worker", "node")


def ingest(paths: Sequence[str | Path], out: Path | None = None,
           command: list[str] | None = None, max_unpacked: int | None = None,
           max_field: int | None = None,
           meanwhile: Callable[[Report], object] | None = None,
           ahead: parse_ahead.Parsing | None = None,
           progress: Callable[[int, int], object] | None = None) -> Report:
    """Read every file first (a bad one stops everything before anything is written),
    each within the readers' limits (readers/limits.py); `ahead`: the traces' columns
    being parsed already (runs/parse_ahead.py)."""
    if not paths:
        raise UsageError("ingest needs at least one file")
    RunDirectory.refuse_taken(out)
    with limits.applied(max_unpacked, max_field):
        files, skipped, broken, said = _read_all(paths, ahead.ready() if ahead else None,
                                                 progress)
    if not files:
        raise IngestError(f"no readable trace in {', '.join(map(str, paths))}: "
                          + "; ".join((broken + skipped)[:3]))
    _number_nsys_ranks(files)
    frame = _frame(files)
    kept = _kept_copies(files)
    meta = RunRecord(  # partial: a rank's file was broken, or events of one were left out
        status="partial" if broken or any(file.doubts for file in files) else "complete",
        target={"kind": "ingest",
                "command": shlex.join(["profile-all", "ingest", *map(str, paths)])},
        command=command or [],
        environment=environment.collect(),
        sources=[SourceRecord(number=number, path=str(file.path.resolve()),
                              backend=file.backend, rank=file.rank, facts=file.facts)
                 for number, file in enumerate(files, start=1)],
        artifacts=[artifact for artifact, _file in kept],
        backend_facts=backends.facts_of(file.backend for file in files),
        doubts=[*said, *_doubts(files, skipped, broken)])
    timeline = [[file.backend, number, file.rank, *entry]
                for number, file in enumerate(files, start=1) for entry in file.timeline]
    report = Report.from_frame(frame, meta, timeline=timeline)
    run_dir = RunDirectory.create(out, "ingest")
    for artifact, file in kept:
        shutil.copyfile(file.path, run_dir.work / artifact.path)
    return run_dir.save(report, meanwhile)


#: the files an ingest keeps a copy of, by backend: (name, viewer, command)
_KEPT = {"cprofile": ("cprofile.pass{number}.rank{rank}.prof", "SnakeViz",
                      "profile-all view {run_dir}"),
         "py-spy": ("py_spy.pass{number}.rank{rank}.speedscope.json", "speedscope",
                    "open https://www.speedscope.app and load {run_dir}/{path}")}


def _read_framed(path: Path, parsed: parse_ahead.Parsed | None = None) -> IngestedFile:
    """A file read, its rows made a frame where it was read (a worker): what comes back is
    compact, and no process holds every file's rows as lists (64 ranks' rows as lists
    were the ingest's peak memory)."""
    file = read_any(path, parsed.taken(path) if parsed else None)
    file.frame, file.rows = pd.DataFrame(file.rows, columns=MEASURED), []
    return file


def _frame(files: list[IngestedFile]) -> pd.DataFrame:
    """Every file's rows, each file a pass of its own."""
    frames = []
    for number, file in enumerate(files, start=1):
        part = file.frame
        part.insert(0, "backend", file.backend)
        part.insert(1, "pass", number)
        part.insert(2, "rank", file.rank)
        frames.append(part)
    return pd.concat(frames, ignore_index=True)


def _kept_copies(files: list[IngestedFile]) -> list[tuple[ArtifactRecord, IngestedFile]]:
    """(artifact, file) of each pstats and speedscope file read, kept in the run folder:
    `view` serves a file of the folder, never one a meta.json names elsewhere, and a
    folder moved elsewhere keeps what its viewers open."""
    kept = []
    for number, file in enumerate(files, start=1):
        if file.backend not in _KEPT:
            continue
        name, viewer, command = _KEPT[file.backend]
        path = "artifacts/" + name.replace("{number}", str(number)).replace(
            "{rank}", str(file.rank))
        kept.append((ArtifactRecord(backend=file.backend, path=path, viewer=viewer,
                                    open_command=command.replace("{path}", path)), file))
    return kept


def _read_all(paths: Sequence[str | Path], parsed: parse_ahead.Parsed | None = None,
              progress: Callable[[int, int], object] | None = None
              ) -> tuple[list[IngestedFile], list[str], list[str], list[str]]:
    """The files named, and those the directories named hold that are traces; why each of
    the others was left out: no trace (a config file), or a broken one (a rank lost); what
    the directories' listing said (files met again, read once; run folders left out)."""
    named, found, said, lost = ingest_paths.expand(paths)
    results = parallel_read.each(partial(_read_framed, parsed=parsed), [*named, *found],
                                 progress)
    files, skipped, broken = [], [], list(lost)  # a folder not listed: its ranks lost
    for path, result in zip([*named, *found], results, strict=True):
        if not isinstance(result, Exception):
            files.append(result)
        elif path in named or isinstance(result, ImpossibleValues | limits.BeyondLimits) or \
                not isinstance(result, IngestError):
            raise result  # a file named, or a trace broken or outsized: refused
        else:  # a file a directory holds that is not a whole trace: left out
            (broken if isinstance(result, BrokenFile) else skipped).append(str(result))
    return files, skipped, broken, said


def _doubts(files: list[IngestedFile], skipped: list[str], broken: list[str]) -> list[str]:
    """What the reader of this report should know: broken files left out (what they
    measured is missing), files that are no trace, events left out for impossible values,
    and several files of one backend and rank, which the views add up or take the median
    of."""
    said = [f"left out, broken (what it measured is missing from this report): {reason}"
            for reason in broken]
    said += [f"left out, not a trace: {reason}" for reason in skipped]
    said += [doubt for file in files for doubt in file.doubts]
    by_rank: dict[tuple[str, int], list[str]] = defaultdict(list)
    for file in files:
        by_rank[(file.backend, file.rank)].append(file.path.name)
    for (backend, rank), names in by_rank.items():
        if len(names) > 1:
            said.append(f"{len(names)} {backend} files hold rank {rank} ({', '.join(names)}), "
                        "nothing tells them apart: the run, step and region rows show the "
                        "median of the files, the operator, kernel and function tables "
                        "their sum")
    return said


def _rank_in_name(path: Path) -> int | None:
    """The number after `rank`, `process`, `proc`, `worker` or `node` in a file's name
    (`proc0`, `rank-1`, `node_2`), the first of those words that has one, where it is a
    rank a job may have (trace_rank.MAX_RANK at most); else None."""
    for word in _RANK_WORDS:
        match = re.search(rf"(?<![a-z]){word}[-_.]?(\d+)", path.name, re.IGNORECASE)
        if match:  # no rank beyond any job's (a 200-digit one overflowed the report's int64)
            digits = match.group(1).lstrip("0") or "0"
            return int(digits) if len(digits) <= 7 and int(digits) <= MAX_RANK else None
    return None


def _number_nsys_ranks(files: list[IngestedFile]) -> None:
    """Nsight Systems files do not say which rank wrote them: each process of a job has its
    own. The rule: the files of one kind (sqlite exports, .nsys-rep reports, each nsys stats
    report) take the numbers in their names when every one has a number and no two share
    it, else they are numbered 0, 1, ... in the order given."""
    kinds: dict[str, list[IngestedFile]] = defaultdict(list)
    for file in files:
        if file.backend == "nsys":
            kinds[file.facts.get("report", "")].append(file)
    for same_kind in kinds.values():
        named = [_rank_in_name(file.path) for file in same_kind]
        numbered = None not in named and len(set(named)) == len(named)
        for number, (file, in_name) in enumerate(zip(same_kind, named, strict=True)):
            file.rank = in_name if numbered else number
