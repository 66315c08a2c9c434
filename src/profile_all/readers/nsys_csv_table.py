"""`nsys stats` CSV files: which report a file holds, and its columns by label with units.

Which report a file holds is told by its header line, never by its name (`nsys stats
--output` names files after the report, but users rename them): see REPORTS. The header
may follow a few lines that nsys prints before it ("Generating SQLite file ...",
"Processing [...] with [...]..."), when its standard output was saved. Columns are read by
label ("Duration (ns)" is the label `duration` in unit `ns`), case aside, with the units
honoured: times in ns (the default), us, ms or s (`nsys stats --timeunit`), sizes in B, KB,
MB or GB, which nsys counts in powers of ten (its `Bytes (MB)` column is bytes / 10^6: a
4 MiB copy shows as 4.194). Files may be plain, gzip or xz (`.csv.xz`), told by content.
"""

from __future__ import annotations

import csv
import gzip
import io
import lzma
import re
import zlib
from pathlib import Path
from typing import IO, Any

import pandas as pd

from profile_all.readers import IngestError, limits
from profile_all.readers.trace_bytes import BOM

#: each report read, with the header labels (lower case, units aside) that tell it apart
REPORTS = {
    "nvtx_pushpop_trace": {"start", "end", "duration", "name", "lvl", "rangeid", "parentid"},
    "nvtx_sum": {"total time", "instances", "range"},
    "cuda_gpu_trace": {"start", "duration", "corrid", "grdx", "name"},
    "cuda_api_trace": {"start", "duration", "name", "result", "corrid"},
    "cuda_gpu_kern_sum": {"total time", "instances", "name"},
    "cuda_api_sum": {"total time", "num calls", "name"},
}
#: older nsys versions' labels, as the current ones
_ALIASES = {"start time": "start"}
#: where the header may be: after at most this many lines of nsys's own messages
PREAMBLE_LINES = 20
XZ_MAGIC = b"\xfd7zXZ\x00"
GZIP_MAGIC = b"\x1f\x8b"
_SECONDS = {"ns": 1e-9, "nsec": 1e-9, "us": 1e-6, "usec": 1e-6, "µs": 1e-6, "μs": 1e-6,
            "ms": 1e-3, "msec": 1e-3, "s": 1.0, "sec": 1.0}
_BYTES = {"b": 1.0, "byte": 1.0, "bytes": 1.0, "kb": 1e3, "mb": 1e6, "gb": 1e9,
          "kib": 2.0 ** 10, "mib": 2.0 ** 20, "gib": 2.0 ** 30}
_HEADER = re.compile(r"(.*?)\s*\(([^()]*)\)")



def _label_and_unit(field: str) -> tuple[str, str]:
    """"Duration (ns)" -> ("duration", "ns"); "Name" -> ("name", "")."""
    match = _HEADER.fullmatch(field.strip())
    label, unit = (match.group(1), match.group(2)) if match else (field.strip(), "")
    label = label.lower()
    return _ALIASES.get(label, label), unit.strip().lower()


def report_of(fields: list[str]) -> str | None:
    """The report whose header these fields are, or None."""
    labels = {_label_and_unit(field)[0] for field in fields}
    return next((report for report, needed in REPORTS.items() if needed <= labels), None)


def _fields(line: str) -> list[str]:
    """A line's CSV fields (a UTF-8 byte order mark before them left out); none for a line
    no CSV reader takes (binary data)."""
    try:
        return next(csv.reader([line.removeprefix("\ufeff")]), [])
    except csv.Error:
        return []


def report_in(text: str) -> str | None:
    """The report of the CSV whose first lines are `text`, or None: a decision by content."""
    lines = text.splitlines()[:PREAMBLE_LINES]
    return next((report for report in map(report_of, map(_fields, lines)) if report), None)


def opened(path: Path, head: bytes) -> IO[str]:
    """The file as text, decompressed when its content (`head`) is gzip or xz, refused
    once more than limits.current().max_unpacked came out of it."""
    if head.startswith(GZIP_MAGIC):
        return limits.bounded_text(gzip.open(path, "rb"), path)
    if head.startswith(XZ_MAGIC):
        return limits.bounded_text(lzma.open(path, "rb"), path)
    return limits.bounded_text(open(path, "rb"), path)


def decompressed_head(head: bytes, size: int = 65536) -> bytes:
    """Up to `size` bytes of what a gzip or xz file starts with (its first block suffices),
    the bytes themselves otherwise; b"" when they do not decompress."""
    try:
        if head.startswith(GZIP_MAGIC):  # member after member (the first may be empty)
            out, rest = b"", head
            while rest.startswith(GZIP_MAGIC) and len(out) < size:
                member = zlib.decompressobj(wbits=31)
                out += member.decompress(rest, size - len(out))
                rest = member.unused_data if member.eof else b""
            return out.removeprefix(BOM)
        if head.startswith(XZ_MAGIC):
            return lzma.LZMADecompressor().decompress(head, size)
    except (zlib.error, lzma.LZMAError, EOFError):
        return b""
    return head.removeprefix(BOM)


class Table:
    """A report's rows as text, its columns looked up by label, values in SI units."""

    def __init__(self, path: Path, fields: list[str], frame: pd.DataFrame,
                 header_line: int = 1) -> None:
        self.path = path
        self.frame = frame
        self.header_line = header_line  # (its rows follow it, one a line)
        self.columns = {}
        for field in fields:
            label, unit = _label_and_unit(field)
            self.columns.setdefault(label, (field, unit))

    def has(self, label: str) -> bool:
        return label in self.columns

    def text(self, label: str) -> pd.Series:
        return self.frame[self.columns[label][0]].fillna("").astype(str)

    def number(self, label: str) -> pd.Series:
        return pd.to_numeric(self.frame[self.columns[label][0]], errors="coerce")

    def _scaled(self, label: str, units: dict[str, float], default: str) -> pd.Series:
        field, unit = self.columns[label]
        if (unit or default) not in units:
            raise IngestError(f"{self.path}: column {field!r} is in a unit profile-all does "
                              f"not know ({unit}); it reads {', '.join(units)}")
        return self.number(label) * units[unit or default]

    def only(self, kept: Any) -> Table:
        """The table of the rows `kept` (a boolean mask)."""
        if kept.all():
            return self
        return Table(self.path, list(self.frame.columns), self.frame[kept]
                     .reset_index(drop=True), self.header_line)

    def seconds(self, label: str) -> pd.Series:
        """A time column in seconds; nanoseconds where the header gives no unit (nsys's
        default)."""
        return self._scaled(label, _SECONDS, "ns")

    def bytes(self, label: str) -> pd.Series:
        return self._scaled(label, _BYTES, "b")


def read(path: Path, head: bytes) -> tuple[str, Table]:
    """The report and its table; the header found within PREAMBLE_LINES lines."""
    try:
        with opened(path, head) as stream:
            for line in range(1, PREAMBLE_LINES + 1):
                fields = _fields(_line(stream, path, 64))
                report = report_of(fields)
                if report:
                    _header_checked(path, fields)
                    return report, Table(path, fields, _data(stream, fields, path), line)
    except (OSError, EOFError, lzma.LZMAError, zlib.error, pd.errors.ParserError,
            csv.Error) as error:
        raise IngestError(f"{path}: unreadable nsys stats CSV ({_one_line(error)})") from None
    raise IngestError(f"{path}: no nsys stats report header in its first {PREAMBLE_LINES} lines")


#: the most columns a report's header may name (nsys stats reports have under 30): a
#: header of 100,000 took a minute and 2.4 GB for 100 rows
MAX_COLUMNS = 256


def _header_checked(path: Path, fields: list[str]) -> None:
    """Refuse a header of more than MAX_COLUMNS names, or one naming a column twice."""
    if len(fields) > MAX_COLUMNS:
        raise IngestError(f"{path}: a header of {len(fields):,} columns, over the "
                          f"{MAX_COLUMNS} a report may have (nsys stats reports have under "
                          "30): not an nsys stats report, not read")
    repeated = sorted({field for field in fields if fields.count(field) > 1})
    if repeated:
        raise IngestError(f"{path}: its header names {repeated[0][:80]!r} twice: not an "
                          "nsys stats report, not read")


def _data(stream: IO[str], fields: list[str], path: Path) -> pd.DataFrame:
    """The lines after the header, as text (a header alone: no rows), no field longer
    than limits.current().max_field."""
    lines = []
    while line := _line(stream, path, len(fields)):
        lines.append(line)
    try:
        frame = pd.read_csv(io.StringIO("".join(lines)), header=None, names=fields, dtype=str,
                            keep_default_na=False, na_values=[""])
    except pd.errors.EmptyDataError:
        return pd.DataFrame(columns=fields, dtype=str)
    bound = limits.current()
    bound.field(path, max(map(len, fields), default=0), "a field of the header")
    for column in frame.columns if len(frame) else ():
        bound.field(path, int(frame[column].fillna("").str.len().max()),
                    f"a field of column {str(column)[:40]!r}")
    return frame


def _line(stream: IO[str], path: Path, fields: int) -> str:
    """The next line, read no further than `fields` fields at the longest field a file may
    hold (limits.current().max_field): a 1 GiB field is refused after a few MiB read, not
    held whole."""
    longest = (fields + 1) * (limits.current().max_field + 3)
    line = stream.readline(longest)
    if len(line) >= longest and not line.endswith("\n"):
        raise limits.BeyondLimits(f"{path}: a line is over {longest:,} characters long, more "
                                  f"than {fields} fields of --max-field hold: refused, not read")
    return line


def _one_line(error: Exception) -> str:
    return " ".join(str(error).split())
