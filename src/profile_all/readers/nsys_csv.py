"""`nsys stats` CSV reports -> report rows, the same rows as the sqlite reader gives, as far
as each report carries the data.

The files, their units and compression: nsys_csv_table.

The reports read, and their rows:
- nvtx_pushpop_trace: regions with their parent paths ("outer/inner", from ParentId),
  calls and wall time; the run's wall time (first range start to last range end).
- nvtx_sum: regions (no parents: the report has none), calls and the statistics it gives.
- cuda_gpu_trace: kernels, copies and fills (calls, GPU time, bytes); the run's GPU time
  (all device work) and wall time (first to last device event).
- cuda_api_trace: CUDA API calls (calls, host time); the run's wall time.
- cuda_gpu_kern_sum, cuda_api_sum: kernels, API calls, with the statistics they give.

NVTX ranges are named as nsys names them, `domain:name` in a domain of the user's; in the
default domain (pa.region's) nvtx_pushpop_trace writes `:name`, and its `:` is dropped, so
that every nsys reader names a range alike (`forward`, `MPI:MPI_Send`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from profile_all.readers import nesting
from profile_all.readers.nesting import MAX_DEPTH
from profile_all.readers.nsys_checks import csv_kept
from profile_all.readers.nsys_csv_table import Table, read
from profile_all.readers.nsys_rows import (
    activity_rows,
    api_names,
    memcpy_name,
    memset_name,
    region_rows,
)
from profile_all.rows import row

#: a summary's statistics: the stat each one is, and the labels nsys versions gave it
_STATS = {"mean": ("avg", "average"), "median": ("med", "median"),
          "min": ("min", "minimum"), "max": ("max", "maximum"), "std": ("stddev",)}
_CALLS = ("instances", "num calls", "calls", "count")


def range_name(names: pd.Series) -> pd.Series:
    """`:forward` (the default NVTX domain) -> `forward`; `domain:name` is kept."""
    return names.str.replace(r"^:", "", regex=True)


def _parent_paths(ranges: pd.DataFrame) -> pd.Series:
    """The path of the ranges around each range ("outer/inner"), built level by level from
    ParentId; a parent missing from the file starts a path afresh, a RangeId met again
    (files joined, or made by hand) names its first range (`_repeated_ids` says so). Paths
    are made while their characters stay within nesting.path_budget: a range past it (and
    every range inside it) gets None, and no string (2,000 paths of 62 KB were 124 MB)."""
    parent = pd.Series("", index=ranges.index, dtype=object)
    path_of_id: dict[Any, str | None] = {}  # RangeId -> the range's own path
    ids, parent_ids = ranges["id"].to_numpy(object), ranges["parent_id"].to_numpy(object)
    names, level_of = ranges["name"].to_numpy(object), ranges["level"].to_numpy(float)
    budget, used = nesting.path_budget(len(ranges)), 0
    levels = np.unique(level_of[~np.isnan(level_of)])
    # the deeper are left out; a level that is no whole number from 0 is nsys's nowhere
    # (one pass a level: 20,000 negative levels took minutes)
    for level in levels[(levels >= 0) & (levels < MAX_DEPTH) & (levels == np.floor(levels))]:
        for position in np.flatnonzero(level_of == level):
            above = path_of_id.get(parent_ids[position], "")
            if above is not None:
                used += len(above) + len(names[position])
                above = above if used <= budget else None
            parent.iat[position] = above
            path_of_id.setdefault(ids[position], None if above is None else
                                  f"{above}/{names[position]}" if above else names[position])
    return parent


def _repeated_ids(table: Table) -> list[str]:
    """A doubt on RangeIds met more than once (nsys gives each range its own)."""
    ids = table.text("rangeid")
    repeated = ids[ids.duplicated() & (ids.str.strip() != "")]
    if repeated.empty:
        return []
    first = int(repeated.index[0])
    one = len(repeated) == 1
    return [f"{len(repeated)} range{'' if one else 's'} repeat{'s' if one else ''} the "
            f"RangeId of an earlier one (first line {table.header_line + 1 + first}, RangeId "
            f"{repeated.iat[0]}): the ranges under such an id are placed under its first range"]


def _span(starts: pd.Series, ends: pd.Series) -> list[list[Any]]:
    """The run's wall time: first event start to last event end (none when no event)."""
    if starts.dropna().empty:
        return []
    return [row("run", "trace", "wall_time", ends.max() - starts.min())]


def _pushpop(table: Table, kept: np.ndarray, doubts: list[str]) -> list[list[Any]]:
    """Ranges: their parents' paths from all of them, their rows from those `kept` whose
    paths stay within nesting.MAX_REGION_PATH_CHARS (the others said in `doubts`)."""
    ranges = pd.DataFrame({"name": range_name(table.text("name")),
                           "wall": table.seconds("duration"), "level": table.number("lvl"),
                           "id": table.text("rangeid"), "parent_id": table.text("parentid")})
    ranges["parent"] = _parent_paths(ranges)
    shown = ranges.loc[kept, ["name", "parent", "wall"]]
    made = shown["parent"].notna().to_numpy()  # (None: past the paths' budget)
    bounded = made.copy()
    bounded[made] = nesting.bounded_paths(shown["name"][made].tolist(),
                                          shown["parent"][made].tolist())
    doubts += nesting.paths_said(table.path, int((~bounded).sum()), "NVTX range")
    return (_span(table.seconds("start")[kept], table.seconds("end")[kept])
            + region_rows(shown[bounded]))


def _copy_names(names: pd.Series, sources: pd.Series, destinations: pd.Series) -> list[str]:
    kinds = names.str.extract(r"(?i)memcpy\s+([^\]]+)", expand=False).fillna("Unknown")
    return [memcpy_name(kind.strip(), source or "Unknown", destination or "Unknown")
            for kind, source, destination in zip(kinds, sources, destinations, strict=True)]


def _optional_text(table: Table, label: str) -> pd.Series:
    return table.text(label) if table.has(label) else pd.Series("", index=table.frame.index)


def _gpu_trace(table: Table) -> list[list[Any]]:
    """Kernels, copies (`[CUDA memcpy Host-to-Device]`) and fills (`[CUDA memset]`)."""
    names, seconds = table.text("name"), table.seconds("duration")
    moved = table.bytes("bytes") if table.has("bytes") else pd.Series(np.nan, index=names.index)
    sources, destinations = _optional_text(table, "srcmemkd"), _optional_text(table, "dstmemkd")
    lowered = names.str.lower()
    copy = lowered.str.startswith("[cuda") & lowered.str.contains("memcpy")
    fill = lowered.str.startswith("[cuda") & lowered.str.contains("memset") & ~copy
    kernel = ~(copy | fill)
    copies = pd.DataFrame({"name": _copy_names(names[copy], sources[copy], destinations[copy]),
                           "seconds": seconds[copy].to_numpy(), "bytes": moved[copy].to_numpy()})
    fills = pd.DataFrame({"name": [memset_name(kind or "Unknown") for kind in sources[fill]],
                          "seconds": seconds[fill].to_numpy(), "bytes": moved[fill].to_numpy()})
    starts = table.seconds("start")
    rows = _span(starts, starts + seconds)
    if len(names):
        rows.append(row("run", "trace", "gpu_time", seconds.sum()))
    return (rows + activity_rows("kernel", pd.DataFrame({"name": names[kernel],
                                                         "seconds": seconds[kernel]}))
            + activity_rows("memcpy", copies) + activity_rows("memset", fills))


def _api_trace(table: Table) -> list[list[Any]]:
    """API calls. nsys lists a call twice where it kept its backtrace (the backtrace record
    has the same thread, correlation id and name, and a wider interval): the shorter one,
    the call itself, is kept."""
    calls = pd.DataFrame({"name": api_names(table.text("name")), "seconds":
                          table.seconds("duration"), "start": table.seconds("start"),
                          "correlation": table.text("corrid"),
                          "thread": _optional_text(table, "pid") + ":"
                          + _optional_text(table, "tid")})
    correlated = calls["correlation"] != ""
    kept = (calls[correlated].sort_values("seconds")
            .drop_duplicates(["thread", "correlation", "name"], keep="first"))
    calls = pd.concat([kept, calls[~correlated]]).sort_index()
    return (_span(calls["start"], calls["start"] + calls["seconds"])
            + activity_rows("api", calls, "wall_time"))


def _summary_rows(table: Table, scope: str, names: pd.Series, metric: str) -> list[list[Any]]:
    """A summary report's rows: calls, total time and each statistic it gives. A name on
    several lines (by grid size, or by NVTX range style) gets the sums, the mean they make,
    the smallest min and largest max; its median and spread cannot be recombined."""
    calls_label = next(label for label in _CALLS if table.has(label))
    summary = pd.DataFrame({"name": names, "calls": table.number(calls_label),
                            "total": table.seconds("total time")})
    for stat, labels in _STATS.items():
        label = next((label for label in labels if table.has(label)), None)
        if label is not None:
            summary[stat] = table.seconds(label)
    rows = []
    for name, group in summary.groupby("name", sort=False):
        calls, total = group["calls"].sum(), group["total"].sum()
        rows += [row(scope, name, "calls", calls), row(scope, name, metric, total)]
        stats = group.iloc[0] if len(group) == 1 else {
            "mean": total / calls if calls else np.nan,
            "min": group["min"].min() if "min" in group else np.nan,
            "max": group["max"].max() if "max" in group else np.nan}
        rows += [row(scope, name, metric, stats[stat], stat=stat) for stat in _STATS
                 if stat in stats and pd.notna(stats[stat])]
    return rows


def _devices(table: Table) -> list[str]:
    return sorted(set(table.text("device")) - {""}) if table.has("device") else []


def read_nsys_csv(path: str | Path) -> tuple[list[list[Any]], dict[str, Any]]:
    """The rows of one `nsys stats` CSV report, and facts: which report it is, and for
    cuda_gpu_trace the GPUs it names."""
    path = Path(path)
    with open(path, "rb") as stream:
        head = stream.read(16)
    report, table = read(path, head)
    kept, doubts = csv_kept(path, report, table)
    if report == "nvtx_pushpop_trace":
        deep = (table.number("lvl") >= MAX_DEPTH).to_numpy()
        kept = kept & ~deep
        doubts = [*doubts, *_repeated_ids(table),
                  *nesting.said(path, int(deep.sum()), "NVTX range")]
    readers = {
        "nvtx_pushpop_trace": lambda t: _pushpop(table, kept, doubts),
        "nvtx_sum": lambda t: _summary_rows(t, "region", range_name(t.text("range")),
                                            "wall_time"),
        "cuda_gpu_trace": _gpu_trace,
        "cuda_api_trace": _api_trace,
        "cuda_gpu_kern_sum": lambda t: _summary_rows(t, "kernel", t.text("name"), "gpu_time"),
        "cuda_api_sum": lambda t: _summary_rows(t, "api", api_names(t.text("name")),
                                                "wall_time"),
    }
    facts = {"report": report, "devices": _devices(table)}
    return readers[report](table.only(kept)), {**facts, **({"doubts": doubts} if doubts else {})}


