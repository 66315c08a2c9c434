"""Impossible values in Nsight Systems files (plausible: which, and the policy).

sqlite exports: each event's `start`, `end` and `end - start` (ns) in the NVTX, runtime,
kernel, copy and fill tables, and the bytes of copies and fills; an event is named by its
table and rowid. `nsys stats` CSVs: the times, durations, counts and sizes of each
report's rows (an empty statistic or size is allowed: nsys leaves them empty where there
is none); a row is named by its line in the file."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from profile_all.readers import plausible
from profile_all.readers.nsys_csv_table import Table
from profile_all.readers.plausible import COUNT, DURATION, TIME, Field

_NANO = 1e-9
#: each trace report's numeric columns, by label: (label, kind, may be empty)
_TRACE_FIELDS = {
    "nvtx_pushpop_trace": (("start", TIME, False), ("end", TIME, False),
                           ("duration", DURATION, False)),
    "cuda_gpu_trace": (("start", TIME, False), ("duration", DURATION, False),
                       ("bytes", COUNT, True)),
    "cuda_api_trace": (("start", TIME, False), ("duration", DURATION, False)),
}
#: the summary reports' numeric columns (those a report has)
_SUMMARY_FIELDS = (("total time", DURATION, False), ("instances", COUNT, False),
                   ("num calls", COUNT, False), ("calls", COUNT, False), ("count", COUNT, False),
                   *((label, DURATION, True) for label in (
                       "avg", "average", "med", "median", "min", "minimum", "max", "maximum",
                       "stddev")))


def _csv_field(table: Table, label: str, kind: str, may_be_empty: bool) -> Field:
    texts = table.text(label)
    values = table.seconds(label) if kind != COUNT else \
        table.bytes(label) if label == "bytes" else table.number(label)
    empty = (texts.str.strip() == "").to_numpy() if may_be_empty else None
    return Field(table.columns[label][0], kind, values.to_numpy(float), texts.to_numpy(object),
                 empty=empty, text=True)


def csv_kept(path: Path, report: str, table: Table) -> tuple[np.ndarray, list[str]]:
    """(the rows to keep, the doubt to say of the others); IngestError when they are too
    many."""
    wanted = _TRACE_FIELDS.get(report, _SUMMARY_FIELDS)
    fields = [_csv_field(table, label, kind, empty) for label, kind, empty in wanted
              if table.has(label)]
    starts = [f.values for f in fields if f.kind == TIME][:1]
    names = table.text("range" if table.has("range") else "name")

    def describe(position: int) -> str:
        return f"line {table.header_line + 1 + position} {names.iat[position]!r}"

    tally = plausible.Tally()
    keep = tally.add(fields, plausible.centre_of(starts), describe)
    return keep, tally.settled(path, "rows")


def _sqlite_numbers(column: pd.Series) -> tuple[np.ndarray, Any]:
    """(floats, what the export holds) of a column: numbers, or text and NULL."""
    if pd.api.types.is_numeric_dtype(column):
        return column.to_numpy(float), column.to_numpy()
    raw = [None if value is None or value is pd.NA else value for value in column.tolist()]
    return plausible.numbers(raw), raw


def _sqlite_fields(frame: pd.DataFrame) -> list[Field]:
    start, raw_start = _sqlite_numbers(frame["start"])
    end, raw_end = _sqlite_numbers(frame["end"])
    fields = [Field("start", TIME, start * _NANO, raw_start, "ns"),
              Field("end", TIME, end * _NANO, raw_end, "ns"),
              Field("end - start", DURATION, (end - start) * _NANO, end - start, "ns")]
    if "bytes" in frame:
        moved, raw = _sqlite_numbers(frame["bytes"])
        fields.append(Field("bytes", COUNT, moved, raw, "B"))
    return fields


def exported(path: Path, tables: dict[str, pd.DataFrame]
             ) -> tuple[dict[str, pd.DataFrame], list[str]]:
    """The export's event tables (by table name; columns start, end, rowid, name, bytes
    where they have them) without the events with an impossible value, and the doubt to
    say of those; IngestError when they are too many."""
    fields = {table: _sqlite_fields(frame) for table, frame in tables.items()}
    centre = plausible.centre_of([f[0].values for f in fields.values()])
    tally = plausible.Tally()
    kept = {}
    for table, frame in tables.items():
        def describe(position: int, table: str = table, frame: pd.DataFrame = frame) -> str:
            return f"{table} rowid {frame['rowid'].iat[position]} {frame['name'].iat[position]!r}"

        keep = tally.add(fields[table], centre, describe)
        kept[table] = frame if keep.all() else frame[keep].reset_index(drop=True)
    return kept, tally.settled(path)


def session_checked(path: Path, seconds: float | None, doubts: list[str]
                    ) -> tuple[float | None, list[str]]:
    """The capture's duration (ANALYSIS_DETAILS) when it is possible, else None (the run's
    wall time is then the span of its events), and `doubts` with what was said of it."""
    if seconds is None or 0 <= seconds <= plausible.MAX_SECONDS:
        return seconds, doubts
    why = "not finite" if not np.isfinite(seconds) else "negative" if seconds < 0 else \
        f"over {plausible.MAX_SECONDS:g} s, about a year"
    return None, [*doubts, f"{path}: ANALYSIS_DETAILS duration = {seconds / _NANO:g} ns: "
                  f"{why}; the run's wall time is the span of its events instead"]
