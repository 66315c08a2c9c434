"""An Nsight Systems sqlite export opened for reading: its tables and columns looked up by
name (absent ones read as empty or NULL), its strings, its size and text fields within the
limits (readers/limits.py), and its identifiers numbers (a row whose id is text is left out
and counted)."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pandas as pd

from profile_all.readers import IngestError, limits

#: the columns that hold numbers nsys uses as identifiers
_ID_SUFFIXES = ("Id", "Tid", "Pid", "Class", "Kind")


class NsysExport:
    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            # a URI: its path percent-encoded, bytes that are not UTF-8 and `?`/`#` too
            self.db = sqlite3.connect(Path(path).absolute().as_uri() + "?mode=ro", uri=True)
            tables = self.db.execute("select name from sqlite_master where type='table'")
            self.tables = {name for (name,) in tables}
        except sqlite3.DatabaseError as error:
            raise IngestError(f"{path}: not an sqlite file ({error})") from None
        if "StringIds" not in self.tables or not self.tables & {
                "NVTX_EVENTS", "CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_RUNTIME"}:
            raise IngestError(f"{path}: an sqlite file, but not an Nsight Systems export "
                              "(no StringIds, NVTX or CUPTI tables)")
        self._within_limits()
        self.strings = {key: _as_text(value) for key, value in
                        self.db.execute("select id, value from StringIds")}
        #: rows left out per table for an identifier that is not a number
        self.left_out: dict[str, int] = {}
        #: string ids named by a row that StringIds does not hold (the names shown instead)
        self.missing: set[int] = set()

    def _within_limits(self) -> None:
        """The file within max_unpacked, its strings (and NVTX texts) within max_field."""
        bound = limits.current()
        bound.unpacked(self.path, self.path.stat().st_size)
        texts = [("StringIds", "value")] + ([("NVTX_EVENTS", "text")] if "text" in (
            self.columns("NVTX_EVENTS") if "NVTX_EVENTS" in self.tables else []) else [])
        for table, column in texts:
            (longest,), = self.db.execute(f'select max(length("{column}")) from "{table}"')
            bound.field(self.path, int(longest or 0), f"a string of {table}.{column}")

    def columns(self, table: str) -> list[str]:
        return [info[1] for info in self.db.execute(f'pragma table_info("{table}")')]

    def frame(self, table: str, wanted: list[str], where: str = "") -> pd.DataFrame:
        """The wanted columns that exist (the others are NULL); empty when the table is absent."""
        if table not in self.tables:
            return pd.DataFrame(columns=wanted)
        present = {*self.columns(table), "rowid"}
        select = ", ".join(f'"{c}"' if c in present else f'NULL as "{c}"' for c in wanted)
        frame = pd.read_sql_query(f'select {select} from "{table}" {where}', self.db)
        return self._ids_numbers(table, frame)

    def _ids_numbers(self, table: str, frame: pd.DataFrame) -> pd.DataFrame:
        """`frame` without the rows whose identifiers (ids, thread and process ids, event
        classes and kinds) are not numbers, as nsys writes none: counted in
        `self.left_out` (said in the report)."""
        ids = [c for c in frame.columns if c == "id" or c.endswith(_ID_SUFFIXES)]
        if not ids or frame.empty:
            return frame
        numbers = frame[ids].apply(pd.to_numeric, errors="coerce")
        bad = (numbers.isna() & frame[ids].notna()).any(axis=1)
        if bad.any():
            self.left_out[table] = self.left_out.get(table, 0) + int(bad.sum())
        return frame.assign(**{c: numbers[c] for c in ids})[~bad].reset_index(drop=True)

    def labels(self, table: str, documented: dict[int, str]) -> dict[int, str]:
        """An ENUM table's id -> label, or nsys's documented labels where it is absent."""
        found = self.frame(table, ["id", "label"]).dropna()
        return dict(zip(found["id"].astype(int), found["label"], strict=True)) or documented

    def text(self, literal: Any, string_id: Any) -> str:
        if isinstance(literal, str | bytes):
            return _as_text(literal)
        return self.string(string_id) if pd.notna(string_id) else ""

    def string(self, string_id: Any) -> str:
        """The string of an id; one StringIds does not hold is named so, and counted
        (`missing`: said in the report), not an empty name."""
        if pd.isna(string_id):
            return ""
        found = self.strings.get(string_id)
        if found is None:
            self.missing.add(int(string_id))
            return f"(string {int(string_id)}, not in the export)"
        return found

    def missing_said(self) -> list[str]:
        if not self.missing:
            return []
        first, count = min(self.missing), len(self.missing)
        return [f"{self.path}: {count:,} string id{'s' if count > 1 else ''} named by its "
                f"rows not in StringIds (first {first}): shown as (string {first}, not in "
                "the export)"]


def _as_text(value: Any) -> str:
    """A string of the export as text: nsys writes TEXT; a BLOB (bytes that are not
    UTF-8, in a file made by hand) with escapes (`\\xff`), as other names are shown, a
    number as its digits."""
    if isinstance(value, str):
        return value
    if isinstance(value, bytes):
        return value.decode("utf-8", "backslashreplace")
    return "" if value is None else str(value)
