"""A run folder read from disk is data, maybe someone else's: before any view or renderer
sees its tables, each column holds what profile-all writes there (numbers, whole numbers,
text). A column that does not is one line (UsageError), never a traceback. (meta.json is
checked as it is read: run_record.RunRecord.from_json.)"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow
import pyarrow.compute
import pyarrow.parquet

from profile_all.errors import UsageError
from profile_all.readers import limits


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


def possible_samples(samples: pd.DataFrame, name: str) -> tuple[pd.DataFrame, list[str]]:
    """The per-call samples without those no call can take (not finite, or negative: a
    region's time, a model's latency), and a doubt naming them: `compare` took NaN and -5
    for "no change" and passed a CI gate."""
    values = samples["value"].to_numpy(float)
    impossible = ~np.isfinite(values) | (values < 0)
    if not impossible.any():
        return samples, []
    first = samples[impossible].iloc[0]
    count = int(impossible.sum())
    return samples[~impossible].reset_index(drop=True), [
        f"left out of {name}: {count:,} call{'s' if count > 1 else ''} of an impossible time "
        f"(first: {first['scope']} {first['name']} = {first['value']:g}): a damaged or "
        "crafted run folder"]


#: what a parquet column chunk may hold beyond its values' bytes (page headers, lengths)
_CHUNK_SLACK = 1 << 16
#: the most a run folder's parquet file may unpack to: this many times its size, and
#: MORE_BYTES more (profile-all's own unpack to 0.0-1.9 times theirs: names repeat, and
#: are dictionary-encoded)
TIMES_ITS_SIZE, MORE_BYTES = 64, 16 << 20


def within_bounds(path: Path) -> None:
    """Refuse a run folder's parquet file whose footer (read alone) says it unpacks beyond
    its bounds: more than TIMES_ITS_SIZE its size and MORE_BYTES, more than the readers'
    max_unpacked (readers/limits.py), or a text column of more than max_field bytes a
    value (a 40 KB file holding one compressed 1,000 MiB name made `show` allocate 3.2
    GB)."""
    bound = limits.current()
    try:  # opened here: pyarrow encodes a path as UTF-8, which a folder's name may not be
        with path.open("rb") as stream:
            footer = pyarrow.parquet.ParquetFile(stream).metadata
    except (OSError, pyarrow.ArrowException) as error:
        raise UsageError(f"{path} cannot be read: {error}") from None
    total = 0
    for group in (footer.row_group(number) for number in range(footer.num_row_groups)):
        for chunk in (group.column(number) for number in range(group.num_columns)):
            total += chunk.total_uncompressed_size
            most = bound.max_field * max(chunk.num_values, 1) + _CHUNK_SLACK
            if chunk.physical_type == "BYTE_ARRAY" and chunk.total_uncompressed_size > most:
                raise UsageError(
                    f"{path}: column {chunk.path_in_schema!r} unpacks to "
                    f"{chunk.total_uncompressed_size:,} bytes for {chunk.num_values:,} "
                    f"values, over the {bound.max_field:,} a value may hold (--max-field, "
                    "PROFILE_ALL_MAX_FIELD): a damaged or crafted run folder, not read")
    most = min(bound.max_unpacked, TIMES_ITS_SIZE * path.stat().st_size + MORE_BYTES)
    if total > most:
        raise UsageError(f"{path}: unpacks to {total:,} bytes, over {most:,} ({TIMES_ITS_SIZE} "
                         f"times its size and {MORE_BYTES >> 20} MiB, at most "
                         "PROFILE_ALL_MAX_UNPACKED): a damaged or crafted run folder, not read")


def read_table(path: Path) -> pd.DataFrame:
    """A run folder's parquet file, within its bounds: its footer first (within_bounds),
    then its text columns read as dictionaries, unexpanded, and the bytes their values
    expand to counted before any is expanded. The footer gives a dictionary column's encoded
    size: 5,000 rows naming one 100 KB text wrote a 7 KB file whose footer said 102 KB, and
    expanding it took 1.75 GB, then an ArrowMemoryError. OSError and ArrowException are the
    caller's to say."""
    within_bounds(path)
    bound = limits.current()
    with path.open("rb") as stream:
        schema = pyarrow.parquet.read_schema(stream)
        text = [field.name for field in schema if pyarrow.types.is_string(field.type)
                or pyarrow.types.is_large_string(field.type)]
        table = pyarrow.parquet.read_table(stream, read_dictionary=text)
    most = min(bound.max_unpacked, TIMES_ITS_SIZE * path.stat().st_size + MORE_BYTES)
    total = 0
    for name in text:
        for chunk in table.column(name).chunks:
            if not pyarrow.types.is_dictionary(chunk.type):
                continue
            lengths = pyarrow.compute.binary_length(chunk.dictionary)
            longest = pyarrow.compute.max(lengths).as_py() or 0
            if longest > bound.max_field:
                raise UsageError(f"{path}: column {name!r} holds a value of {longest:,} bytes, "
                                 f"over the {bound.max_field:,} a value may hold (--max-field, "
                                 "PROFILE_ALL_MAX_FIELD): a damaged or crafted run folder, "
                                 "not read")
            total += pyarrow.compute.sum(lengths.take(chunk.indices)).as_py() or 0
    if total > most:
        raise UsageError(f"{path}: its text expands to {total:,} bytes, over {most:,} "
                         f"({TIMES_ITS_SIZE} times its size and {MORE_BYTES >> 20} MiB, at most "
                         "PROFILE_ALL_MAX_UNPACKED): a damaged or crafted run folder, not read")
    decoded = table.cast(pyarrow.schema([
        pyarrow.field(field.name, field.type.value_type if pyarrow.types.is_dictionary(
            field.type) else field.type) for field in table.schema]))
    return decoded.to_pandas()
