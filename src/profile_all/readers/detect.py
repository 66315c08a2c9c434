"""Which reader a file needs, told by its content rather than its name.

Every kind is recognised by what the file starts with (decompressed first when it is gzip
or xz); a file that matches none is refused in one line that lists the kinds read, rather
than handed to a reader that would fail on it with a misleading message.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from profile_all.readers import (
    BrokenFile,
    IngestError,
    nsys_csv,
    nsys_csv_table,
    nsys_rep,
    nsys_sqlite,
    other_files,
)

SQLITE_MAGIC = b"SQLite format 3\x00"
#: how a speedscope file names its format, near its start
SPEEDSCOPE_SCHEMA = b"speedscope.app/file-format-schema.json"
#: how much of a file its kind is told from
HEAD_BYTES = 65536
#: marshal type codes that may follow a dict's `{` in a pstats file: a (small) tuple key,
#: with or without the reference flag, or the end of an empty dict
_MARSHAL_AFTER_DICT = b"()\xa8\xa90"
KINDS_READ = (
    "torch.profiler/Kineto chrome traces (.json, .json.gz, or a directory of them), "
    "speedscope files of sampled stacks (py-spy --format speedscope), "
    "pstats files (cProfile .prof), Nsight Systems sqlite exports and .nsys-rep reports, "
    f"nsys stats CSV reports ({', '.join(nsys_csv_table.REPORTS)}; .csv, .csv.gz, .csv.xz), "
    "and mprof .dat files")


@dataclass
class IngestedFile:
    path: Path
    backend: str  # the backend that writes such files: torch-profiler, nsys, cprofile, memory
    rank: int
    rows: list[list[Any]]
    facts: dict[str, Any] = field(default_factory=dict)
    #: (series, name, start, end, value, unit) each (rows.TIMELINE_COLUMNS)
    timeline: list[list[Any]] = field(default_factory=list)
    #: what the report must say of the file: events left out for impossible values
    doubts: list[str] = field(default_factory=list)
    #: the rows as a frame (rows.MEASURED columns), where the importer made one of them
    frame: Any = None


def _looks_like_json(head: bytes) -> bool:
    """`{` then `"` or `}`: a JSON object; `[` then `{` or `]`: a JSON array of events.
    (A marshal dict, as in pstats files, starts with `{` too, followed by a type code.)"""
    stripped = head.lstrip()
    after = stripped[1:].lstrip()[:1]
    return (stripped[:1] == b"{" and after in (b'"', b"}")) or (
        stripped[:1] == b"[" and after in (b"{", b"]"))


def _looks_like_pstats(head: bytes) -> bool:
    """A marshalled dict keyed by tuples: `{` (or `{` with marshal's reference flag, 0xfb)."""
    return head[:1] in (b"{", b"\xfb") and len(head) > 1 and head[1] in _MARSHAL_AFTER_DICT


def _kind(head: bytes) -> str | None:
    """The reader for a file that starts with `head`, or None."""
    if head.startswith(SQLITE_MAGIC):
        return "nsys-sqlite"
    if head.startswith(nsys_rep.MAGIC):
        return "nsys-rep"
    text = nsys_csv_table.decompressed_head(head)
    if _looks_like_json(text) and not head.startswith(nsys_csv_table.XZ_MAGIC):
        # plain or gzip: what the chrome-trace and speedscope readers read
        return "speedscope" if SPEEDSCOPE_SCHEMA in text else "chrome-trace"
    if nsys_csv_table.report_in(text.decode("utf-8", errors="replace")):
        return "nsys-csv"
    if head.startswith((b"CMDLINE ", b"MEM ")):
        return "mprof"
    if _looks_like_pstats(head):
        return "pstats"
    return None


def read_any(path: str | Path, parsed: Any = None) -> IngestedFile:
    """The file read by the reader its content calls for (nsys files: rank 0, numbered by
    the importer, which sees them all); `parsed`: its chrome_trace.ChromeTrace, where its
    columns were parsed already (runs/parse_ahead.py)."""
    path = Path(path)
    if not path.is_file():
        raise IngestError(f"{path}: no such file" if not path.exists() else f"{path}: not a file")
    try:
        with open(path, "rb") as stream:
            head = stream.read(HEAD_BYTES)
    except OSError as error:  # no permission, an I/O error: a file of the run lost
        raise BrokenFile(f"{path}: cannot be read ({error.strerror or error})") from None
    if not head:
        raise IngestError(f"{path}: empty file")
    compressed = head.startswith((nsys_csv_table.GZIP_MAGIC, nsys_csv_table.XZ_MAGIC))
    if compressed and not nsys_csv_table.decompressed_head(head):
        raise BrokenFile(f"{path}: corrupt or truncated compressed data")
    what = other_files.named(nsys_csv_table.decompressed_head(head))
    if what is not None:
        raise IngestError(f"{path}: {what}")
    kind = _kind(head)
    if kind is None:
        raise IngestError(f"{path}: not a file profile-all reads; it reads {KINDS_READ}")
    if kind == "chrome-trace" and parsed is not None:
        return _chrome_trace(path, parsed)
    return READERS[kind](path)


def _nsys_file(path: Path, rows: list[list[Any]], facts: dict[str, Any]) -> IngestedFile:
    return IngestedFile(path, "nsys", 0, rows, facts, doubts=facts.pop("doubts", []))


def _nsys_sqlite(path: Path) -> IngestedFile:
    return _nsys_file(path, *nsys_sqlite.read_export(path))


def _nsys_rep(path: Path) -> IngestedFile:
    return _nsys_file(path, *nsys_rep.read_nsys_rep(path))


def _nsys_csv(path: Path) -> IngestedFile:
    return _nsys_file(path, *nsys_csv.read_nsys_csv(path))


def _chrome_trace(path: Path, parsed: Any = None) -> IngestedFile:
    from profile_all.readers.chrome_trace import load
    from profile_all.readers.trace_analysis import trace_rows
    from profile_all.readers.trace_checks import (
        drop_impossible,
        drop_repeated,
        drop_unnested,
        unread_said,
    )

    trace = load(path) if parsed is None else parsed
    doubts = drop_impossible(trace) + drop_repeated(trace) + drop_unnested(trace) + \
        unread_said(trace)
    if not trace.columns.ops and not trace.columns.device and not trace.columns.annotations:
        raise IngestError(f"{path}: a trace with no operator, kernel or range in it "
                          f"({trace.columns.events} events): nothing to report")
    devices = [d.get("name") for d in trace.meta.get("deviceProperties") or []
               if isinstance(d, dict)]
    distributed = trace.meta.get("distributedInfo") or {}
    timeline: list[list[Any]] = []
    rows = trace_rows(trace, timeline, doubts)
    return IngestedFile(path, "torch-profiler", trace.rank, rows,
                        {"devices": devices, "distributed": distributed}, timeline,
                        doubts=doubts)


def _speedscope(path: Path) -> IngestedFile:
    """A sampled profile (py-spy's speedscope file): what its stacks say of each function,
    call path, line and thread (readers/sampled_rows.py)."""
    from profile_all.readers.sampled_rows import sampled_rows
    from profile_all.readers.speedscope import read_speedscope

    profile = read_speedscope(path)
    if not any(thread.counts for thread in profile.threads):
        raise IngestError(f"{path}: a speedscope file with no sample in it: nothing to report")
    return IngestedFile(path, "py-spy", 0, sampled_rows(profile),
                        {"exporter": profile.exporter})


def _pstats(path: Path) -> IngestedFile:
    from profile_all.readers.pstats_checks import check
    from profile_all.readers.pstats_reader import load_stats, read_pstats

    check(path, load_stats(path))  # (read twice: pstats files are small)
    return IngestedFile(path, "cprofile", 0, read_pstats(path))


def _mprofile(path: Path) -> IngestedFile:
    """An mprof .dat: the run's peak and baseline, and the timeline from its first sample."""
    from profile_all.readers import mprofile
    from profile_all.readers.mprofile_rows import run_rows, timeline

    try:
        profile = mprofile.read(path)
    except ValueError as error:
        raise IngestError(str(error)) from None
    if not len(profile.times):
        raise IngestError(f"{path}: an mprofile file without a MEM sample")
    doubts = mprofile.drop_impossible(path, profile) + mprofile.drop_unordered(path, profile)
    started = profile.times[0]
    return IngestedFile(path, "memory", 0, run_rows(profile, started),
                        {"command": profile.command}, timeline(profile, started), doubts)


READERS = {"nsys-sqlite": _nsys_sqlite, "nsys-rep": _nsys_rep, "nsys-csv": _nsys_csv,
           "chrome-trace": _chrome_trace, "speedscope": _speedscope, "pstats": _pstats,
           "mprof": _mprofile}
