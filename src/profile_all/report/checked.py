"""A run folder read from disk is data, maybe someone else's: before any view or renderer
sees its tables, each column holds what profile-all writes there (numbers, whole numbers,
text). A column that does not is one line (UsageError), never a traceback. (meta.json is
checked as it is read: run_record.RunRecord.from_json.)"""

from __future__ import annotations

from pathlib import Path

import numpy as np
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


def possible_values(frame: pd.DataFrame, name: str) -> tuple[pd.DataFrame, list[str]]:
    """The table without the rows whose value no profile can hold (infinite, or a negative
    count: `show` crashed on the one and printed the other), and a doubt naming them; a
    value may be missing (NaN: a statistic of no sample) or negative elsewhere (an RSS
    increase)."""
    values = frame["value"].to_numpy(float)
    impossible = np.isinf(values) | ((frame["unit"] == "count").to_numpy() & (values < 0))
    if not impossible.any():
        return frame, []
    first = frame[impossible].iloc[0]
    where = " ".join(str(first[column]) for column in frame.columns
                     if column not in ("pass", "rank", "value", "unit") and first[column] != "")
    count = int(impossible.sum())
    return frame[~impossible].reset_index(drop=True), [
        f"left out of {name}: {count} row{'s' if count > 1 else ''} with a value no profile "
        f"holds (first: {where} = {first['value']:g} {first['unit']}): a damaged or crafted "
        "run folder"]
