"""A run folder read from disk is data, maybe someone else's: before any view or renderer
sees its tables, each column holds what profile-all writes there (numbers, whole numbers,
text). A column that does not is one line (UsageError), never a traceback. (meta.json is
checked as it is read: run_record.RunRecord.from_json.)"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from profile_all.errors import UsageError


def check_frame(frame: pd.DataFrame, run_dir: Path, name: str, numeric: list[str],
                whole: list[str]) -> pd.DataFrame:
    """The table's number columns hold numbers and the rest text."""
    for column in numeric + whole:
        if not pd.api.types.is_numeric_dtype(frame[column]) or \
                pd.api.types.is_bool_dtype(frame[column]):
            raise UsageError(f"{run_dir}/{name}: column {column!r} holds "
                             f"{frame[column].dtype}, not numbers: a damaged or crafted run "
                             "folder")
    for column in whole:
        if frame[column].isna().any() or (frame[column] % 1 != 0).any():
            raise UsageError(f"{run_dir}/{name}: column {column!r} holds other than whole "
                             "numbers: a damaged or crafted run folder")
    for column in frame.columns.difference(numeric + whole):
        if not frame[column].map(lambda value: isinstance(value, str)).all():
            raise UsageError(f"{run_dir}/{name}: column {column!r} holds other than text: "
                             "a damaged or crafted run folder")
    return frame.astype({column: "int64" for column in whole})
