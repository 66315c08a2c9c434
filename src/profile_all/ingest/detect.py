"""Which reader a file needs, told by its content rather than its name."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from profile_all.ingest import IngestError

SQLITE_MAGIC = b"SQLite format 3\x00"
GZIP_MAGIC = b"\x1f\x8b"


@dataclass
class IngestedFile:
    path: Path
    backend: str  # the backend that writes such files: torch-profiler, nsys, cprofile, memory
    rank: int
    rows: list[list[Any]]
    facts: dict[str, Any] = field(default_factory=dict)


def _looks_like_json(head: bytes) -> bool:
    """`{` then `"` or `}`: a JSON object. (A marshal dict, as in pstats files, starts with
    `{` too, followed by a type code.)"""
    stripped = head.lstrip()
    return stripped[:1] == b"{" and stripped[1:].lstrip()[:1] in (b'"', b"}")


def read_any(path: str | Path) -> IngestedFile:
    path = Path(path)
    if not path.is_file():
        raise IngestError(f"{path}: no such file" if not path.exists() else f"{path}: not a file")
    with open(path, "rb") as stream:
        head = stream.read(16)
    if not head:
        raise IngestError(f"{path}: empty file")
    if head.startswith(SQLITE_MAGIC):
        from profile_all.ingest.nsys_sqlite import read_nsys

        return IngestedFile(path, "nsys", 0, read_nsys(path))
    if head.startswith(GZIP_MAGIC) or _looks_like_json(head) or path.suffix in (".json", ".gz"):
        from profile_all.ingest.chrome_trace import load
        from profile_all.ingest.trace_analysis import trace_rows

        trace = load(path)
        devices = [d.get("name") for d in trace.meta.get("deviceProperties") or []
                   if isinstance(d, dict)]
        return IngestedFile(path, "torch-profiler", trace.rank, trace_rows(trace),
                            {"devices": devices,
                             "distributed": trace.meta.get("distributedInfo") or {}})
    if head.startswith((b"CMDLINE ", b"MEM ")):
        return _mprofile(path)
    from profile_all.ingest.pstats_reader import read_pstats

    return IngestedFile(path, "cprofile", 0, read_pstats(path))


def _mprofile(path: Path) -> IngestedFile:
    """An mprof .dat: the run's peak and baseline, and the timeline from its first sample."""
    from profile_all.backends.memory_rows import run_rows, timeline
    from profile_all.ingest import mprofile

    try:
        profile = mprofile.read(path)
    except ValueError as error:
        raise IngestError(str(error)) from None
    if not len(profile.times):
        raise IngestError(f"{path}: an mprofile file without a MEM sample")
    started = profile.times[0]
    return IngestedFile(path, "memory", 0, run_rows(profile, started)
                        + timeline(profile, started), {"command": profile.command})
