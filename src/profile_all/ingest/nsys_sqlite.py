"""Nsight Systems sqlite exports (`nsys export --type sqlite`) -> report rows.

Tables and columns are looked up by name, absent tables are tolerated (nsys 2024+ writes
only non-empty ones), unknown columns are ignored, so exports of different nsys versions
read alike.

GPU work is asynchronous: an NVTX range on the CPU covers the kernel *launches* made inside
it, not the kernels, which may run long after. So a range's GPU time is projected: a
kernel belongs to the ranges open on the thread that launched it, at the launch, found
through `correlationId` in CUPTI_ACTIVITY_KIND_RUNTIME (never by time overlap on the GPU).
Times are nanoseconds in the export; rows are seconds.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from profile_all.ingest import IngestError
from profile_all.report.schema import row

#: NVTX event types that are ranges: push/pop (59) and start/end (60)
RANGE_EVENT_TYPES = (59, 60)
_PID_SHIFT = 24  # a serialized globalTid holds the pid above its low 24 bits
_NANO = 1e-9


class NsysExport:
    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            self.db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
            tables = self.db.execute("select name from sqlite_master where type='table'")
            self.tables = {name for (name,) in tables}
        except sqlite3.DatabaseError as error:
            raise IngestError(f"{path}: not an sqlite file ({error})") from None
        if "StringIds" not in self.tables or not self.tables & {
                "NVTX_EVENTS", "CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_RUNTIME"}:
            raise IngestError(f"{path}: an sqlite file, but not an Nsight Systems export "
                              "(no StringIds, NVTX or CUPTI tables)")
        self.strings = dict(self.db.execute("select id, value from StringIds"))

    def columns(self, table: str) -> list[str]:
        return [info[1] for info in self.db.execute(f'pragma table_info("{table}")')]

    def frame(self, table: str, wanted: list[str], where: str = "") -> pd.DataFrame:
        """The wanted columns that exist (the others are NULL); empty when the table is absent."""
        if table not in self.tables:
            return pd.DataFrame(columns=wanted)
        present = set(self.columns(table))
        select = ", ".join(f'"{c}"' if c in present else f'NULL as "{c}"' for c in wanted)
        return pd.read_sql_query(f'select {select} from "{table}" {where}', self.db)

    def text(self, literal: Any, string_id: Any) -> str:
        if isinstance(literal, str):
            return literal
        return self.strings.get(string_id, "") if pd.notna(string_id) else ""


def _pid(global_ids: pd.Series) -> pd.Series:
    return global_ids.fillna(0).astype("int64") // (1 << _PID_SHIFT)


def _ranges(export: NsysExport) -> pd.DataFrame:
    types = ", ".join(map(str, RANGE_EVENT_TYPES))
    ranges = export.frame("NVTX_EVENTS", ["start", "end", "eventType", "text", "textId",
                                          "globalTid"],
                          f'where eventType in ({types}) and "end" is not null')
    ranges["name"] = [export.text(t, i) for t, i in zip(ranges["text"], ranges["textId"],
                                                       strict=True)]
    return ranges


def _parents(ranges: pd.DataFrame) -> list[str]:
    """The path of the range around each range on its thread ("train_step/forward"), as
    pa.region names its parents: push/pop ranges nest per thread."""
    parents = [""] * len(ranges)
    order = np.lexsort((-ranges["end"].to_numpy(), ranges["start"].to_numpy(),
                        ranges["globalTid"].fillna(0).to_numpy()))
    stack: list[tuple[Any, int, str]] = []  # (thread, end, path)
    for position in order:
        thread, start, end, name = (ranges["globalTid"].iat[position],
                                    ranges["start"].iat[position], ranges["end"].iat[position],
                                    ranges["name"].iat[position])
        while stack and (stack[-1][0] != thread or stack[-1][1] <= start):
            stack.pop()
        parent = stack[-1][2] if stack else ""
        parents[position] = parent
        stack.append((thread, end, f"{parent}/{name}" if parent else name))
    return parents


def _kernels(export: NsysExport) -> pd.DataFrame:
    kernels = export.frame("CUPTI_ACTIVITY_KIND_KERNEL", [
        "start", "end", "correlationId", "globalPid", "demangledName", "shortName"])
    names = kernels["demangledName"].where(kernels["demangledName"].notna(), kernels["shortName"])
    kernels["name"] = [export.strings.get(i, "") for i in names]
    kernels["pid"] = _pid(kernels["globalPid"])
    return kernels


def _launches(export: NsysExport) -> pd.DataFrame:
    """One CPU launch per (pid, correlationId): the earliest runtime call that carries it."""
    runtime = export.frame("CUPTI_ACTIVITY_KIND_RUNTIME", ["start", "correlationId",
                                                           "globalTid"])
    runtime["pid"] = _pid(runtime["globalTid"])
    runtime = runtime.sort_values("start")
    return runtime.drop_duplicates(["pid", "correlationId"], keep="first")


def _projected_gpu_time(ranges: pd.DataFrame, kernels: pd.DataFrame,
                        launches: pd.DataFrame) -> np.ndarray:
    """For each range: the GPU time of the kernels launched on its thread while it was open."""
    launches = launches.rename(columns={"start": "launched_at", "globalTid": "thread"})
    launched = kernels.merge(launches, on=["pid", "correlationId"])
    launched["gpu"] = launched["end"] - launched["start"]
    projected = np.zeros(len(ranges))
    for thread, on_thread in launched.groupby("thread"):
        on_thread = on_thread.sort_values("launched_at")
        at = on_thread["launched_at"].to_numpy()
        cumulative = np.concatenate(([0.0], np.cumsum(on_thread["gpu"].to_numpy(float))))
        mine = (ranges["globalTid"] == thread).to_numpy()
        first = np.searchsorted(at, ranges["start"].to_numpy()[mine], side="left")
        last = np.searchsorted(at, ranges["end"].to_numpy()[mine], side="right")
        projected[mine] = cumulative[last] - cumulative[first]
    return projected


def read_nsys(path: str | Path) -> list[list[Any]]:
    """Rows: NVTX ranges (calls, wall time, projected GPU time) and kernels (calls, GPU time)."""
    path = Path(path)
    if not path.is_file():
        raise IngestError(f"{path}: no such file")
    export = NsysExport(path)
    try:
        ranges, kernels, launches = _ranges(export), _kernels(export), _launches(export)
    except (sqlite3.DatabaseError, pd.errors.DatabaseError) as error:
        raise IngestError(f"{path}: unreadable Nsight Systems export ({error})") from None
    finally:
        export.db.close()
    rows = []
    if not ranges.empty:
        ranges["wall"] = (ranges["end"] - ranges["start"]) * _NANO
        ranges["gpu"] = _projected_gpu_time(ranges, kernels, launches) * _NANO
        ranges["parent"] = _parents(ranges)
        for (name, parent), group in ranges.groupby(["name", "parent"], sort=False):
            rows.append(row("region", name, "calls", len(group), parent=parent))
            for metric, values in (("wall_time", group["wall"]), ("gpu_time", group["gpu"])):
                rows.append(row("region", name, metric, values.sum(), parent=parent))
                rows.append(row("region", name, metric, values.mean(), stat="mean",
                                parent=parent))
    if not kernels.empty:
        kernels["gpu"] = (kernels["end"] - kernels["start"]) * _NANO
        rows.append(row("run", "trace", "gpu_time", kernels["gpu"].sum()))
        for name, group in kernels.groupby("name", sort=False):
            rows.append(row("kernel", name, "calls", len(group)))
            rows.append(row("kernel", name, "gpu_time", group["gpu"].sum()))
            rows.append(row("kernel", name, "gpu_time", group["gpu"].mean(), stat="mean"))
    return rows
