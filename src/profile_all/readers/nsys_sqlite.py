"""Nsight Systems sqlite exports (`nsys export --type sqlite`) -> report rows.

Tables and columns are looked up by name, absent tables are tolerated (nsys 2024+ writes
only non-empty ones), unknown columns are ignored, so exports of different nsys versions
read alike.

GPU work is asynchronous: an NVTX range on the CPU covers the *launches* made inside it
(kernels, copies, fills), not the device work, which may run long after. So a range's GPU
time is projected: device work belongs to the ranges open on the thread that launched it,
at the launch, found through `correlationId` in CUPTI_ACTIVITY_KIND_RUNTIME (never by time
overlap on the GPU). Times are nanoseconds in the export; rows are seconds.

Copies and fills are named as Kineto names them ("Memcpy HtoD (Pageable -> Device)",
"Memset (Device)"), so that torch.profiler's rows and these line up; CUDA API calls as
`nsys stats` names them (the `_v7000` version suffix dropped).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from profile_all.readers import IngestError, nesting, nsys_checks
from profile_all.readers.nsys_export import NsysExport
from profile_all.readers.nsys_rows import (
    COPY_LABELS,
    MEMORY_LABELS,
    activity_rows,
    api_names,
    memcpy_name,
    memset_name,
    region_rows,
)
from profile_all.rows import region_path, row

#: NVTX event types that are ranges: push/pop (59) and start/end (60); and a domain's creation
RANGE_EVENT_TYPES = (59, 60)
DOMAIN_EVENT_TYPE = 75
_PID_SHIFT = 24  # a serialized globalTid holds the pid above its low 24 bits
_NANO = 1e-9
#: the event tables checked for impossible values (nsys_checks)
_TABLES = ("NVTX_EVENTS", "CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_KERNEL",
           "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET")

#: CUPTI_ACTIVITY_KIND_RUNTIME.eventClass of the CUDA backtrace records, when the export has
#: no ENUM_NSYS_EVENT_CLASS: they repeat an API call (same thread, correlationId and
#: interval) to carry its call stack, so counting them would count the call twice
BACKTRACE_EVENT_CLASS = 67


def _pid(global_ids: pd.Series) -> pd.Series:
    return global_ids.fillna(0).astype("int64") // (1 << _PID_SHIFT)


def _domains(export: NsysExport) -> dict[tuple[int, int], str]:
    """NVTX domain names by (domainId, pid): a domain id is its process's own."""
    created = export.frame("NVTX_EVENTS", ["domainId", "text", "textId", "globalTid"],
                           f"where eventType = {DOMAIN_EVENT_TYPE}")
    return {(domain, pid): export.text(text, text_id) for domain, text, text_id, pid in zip(
        created["domainId"], created["text"], created["textId"], _pid(created["globalTid"]),
        strict=True)}


def _ranges(export: NsysExport) -> pd.DataFrame:
    """NVTX ranges, named as `nsys stats` names them: `domain:text` in a domain of the
    user's, the text alone in the default domain (where pa.region's ranges are)."""
    types = ", ".join(map(str, RANGE_EVENT_TYPES))
    ranges = export.frame("NVTX_EVENTS", ["start", "end", "eventType", "text", "textId",
                                          "globalTid", "domainId", "rowid"],
                          f'where eventType in ({types}) and "end" is not null')
    domains = _domains(export)
    ranges["name"] = [
        f"{domains[domain, pid]}:{export.text(text, text_id)}" if (domain, pid) in domains
        else export.text(text, text_id)
        for text, text_id, domain, pid in zip(ranges["text"], ranges["textId"],
                                              ranges["domainId"], _pid(ranges["globalTid"]),
                                              strict=True)]
    return ranges


def _parents(ranges: pd.DataFrame) -> list[str | None]:
    """The path of the range around each range on its thread ("train_step/forward"), as
    pa.region names its parents: push/pop ranges nest per thread. Paths are made while
    their characters stay within nesting.path_budget; past it a range gets None."""
    parents: list[str | None] = [""] * len(ranges)
    order = np.lexsort((-ranges["end"].to_numpy(), ranges["start"].to_numpy(),
                        ranges["globalTid"].fillna(0).to_numpy()))
    stack: list[tuple[Any, int, str | None]] = []  # (thread, end, path)
    budget, used = nesting.path_budget(len(ranges)), 0
    for position in order:
        thread, start, end, name = (ranges["globalTid"].iat[position],
                                    ranges["start"].iat[position], ranges["end"].iat[position],
                                    ranges["name"].iat[position])
        while stack and (stack[-1][0] != thread or stack[-1][1] <= start):
            stack.pop()
        parent = stack[-1][2] if stack else ""
        if parent is not None:  # past the paths' budget: None, no string made
            used += len(parent) + len(name)
            parent = parent if used <= budget else None
        parents[position] = parent
        stack.append((thread, end, None if parent is None else region_path(parent, name)))
    return parents


def _device(export: NsysExport, table: str, extra: list[str]) -> pd.DataFrame:
    """One device activity table: start, end, correlationId, the launching pid, and extra."""
    work = export.frame(table, ["start", "end", "correlationId", "globalPid", "rowid", *extra])
    work["pid"] = _pid(work["globalPid"])
    return work


def _kernels(export: NsysExport) -> pd.DataFrame:
    kernels = _device(export, "CUPTI_ACTIVITY_KIND_KERNEL", ["demangledName", "shortName"])
    names = kernels["demangledName"].where(kernels["demangledName"].notna(), kernels["shortName"])
    kernels["name"] = [export.string(i) for i in names]
    return kernels


def _copies(export: NsysExport) -> pd.DataFrame:
    """Device copies, named by kind and memory kinds through the export's ENUM tables."""
    copies = _device(export, "CUPTI_ACTIVITY_KIND_MEMCPY",
                     ["bytes", "copyKind", "srcKind", "dstKind"])
    kinds = export.labels("ENUM_CUDA_MEMCPY_OPER", COPY_LABELS)
    memory = export.labels("ENUM_CUDA_MEM_KIND", MEMORY_LABELS)
    copies["name"] = [
        memcpy_name(kinds.get(kind, "Unknown"), memory.get(source, "Unknown"),
                    memory.get(destination, "Unknown"))
        for kind, source, destination in zip(copies["copyKind"], copies["srcKind"],
                                             copies["dstKind"], strict=True)]
    return copies


def _fills(export: NsysExport) -> pd.DataFrame:
    fills = _device(export, "CUPTI_ACTIVITY_KIND_MEMSET", ["bytes", "memKind"])
    memory = export.labels("ENUM_CUDA_MEM_KIND", MEMORY_LABELS)
    fills["name"] = [memset_name(memory.get(kind, "Unknown")) for kind in fills["memKind"]]
    return fills


def _backtrace_class(export: NsysExport) -> int:
    classes = export.frame("ENUM_NSYS_EVENT_CLASS", ["id", "name"])
    found = classes.loc[classes["name"] == "TRACE_PROCESS_EVENT_CUDABACKTRACE", "id"]
    return int(found.iat[0]) if len(found) else BACKTRACE_EVENT_CLASS


def _api_calls(export: NsysExport) -> pd.DataFrame:
    """CUDA runtime and driver calls, without the backtrace records that repeat them."""
    calls = export.frame("CUPTI_ACTIVITY_KIND_RUNTIME", [
        "start", "end", "eventClass", "nameId", "correlationId", "globalTid", "rowid"])
    calls = calls[calls["eventClass"] != _backtrace_class(export)].copy()
    calls["name"] = api_names(pd.Series([export.string(i) for i in calls["nameId"]],
                                        index=calls.index, dtype=object))
    calls["pid"] = _pid(calls["globalTid"])
    return calls


def _launches(calls: pd.DataFrame) -> pd.DataFrame:
    """One CPU launch per (pid, correlationId): the earliest API call that carries it."""
    return (calls[["start", "correlationId", "globalTid", "pid"]].sort_values("start")
            .drop_duplicates(["pid", "correlationId"], keep="first"))


def _projected_gpu_time(ranges: pd.DataFrame, device: pd.DataFrame,
                        launches: pd.DataFrame) -> np.ndarray:
    """For each range: the device time of the work launched on its thread while it was open."""
    launches = launches.rename(columns={"start": "launched_at", "globalTid": "thread"})
    launched = device.merge(launches, on=["pid", "correlationId"])
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


def _session_seconds(export: NsysExport) -> float | None:
    """The capture's duration as nsys recorded it (ANALYSIS_DETAILS), when it did."""
    details = pd.to_numeric(export.frame("ANALYSIS_DETAILS", ["duration"])["duration"],
                            errors="coerce").dropna()
    return float(details.max()) * _NANO if len(details) else None


def _span_seconds(*frames: pd.DataFrame) -> float | None:
    """First to last event over the frames (start and end columns, ns)."""
    timed = [f for f in frames if len(f)]
    if not timed:
        return None
    return (max(f["end"].max() for f in timed) - min(f["start"].min() for f in timed)) * _NANO


def _facts(export: NsysExport) -> dict[str, Any]:
    meta = pd.concat([export.frame(table, ["name", "value"])
                      for table in ("EXPORT_META_DATA", "META_DATA_EXPORT")])
    version = meta.loc[meta["name"] == "EXPORT_PRODUCT_VERSION", "value"]
    gpus = export.frame("TARGET_INFO_GPU", ["name"])["name"].dropna()
    return {"report": "export", "nsys_version": version.iat[0] if len(version) else None,
            "devices": list(gpus)}


def read_export(path: str | Path) -> tuple[list[list[Any]], dict[str, Any]]:
    """Rows and facts (nsys version, GPUs) of an export: NVTX ranges (calls, wall time,
    projected GPU time), kernels, copies and fills (calls, GPU time, bytes), CUDA API calls
    (calls, host time), and the run (the capture's wall time, all device time)."""
    path = Path(path)
    if not path.is_file():
        raise IngestError(f"{path}: no such file")
    export = NsysExport(path)
    try:
        ranges, calls = _ranges(export), _api_calls(export)
        kernels, copies, fills = _kernels(export), _copies(export), _fills(export)
        session, facts = _session_seconds(export), _facts(export)
    except (sqlite3.DatabaseError, pd.errors.DatabaseError) as error:
        raise IngestError(f"{path}: unreadable Nsight Systems export ({error})") from None
    finally:
        export.db.close()
    kept, doubts = nsys_checks.exported(path, dict(zip(_TABLES, (
        ranges, calls, kernels, copies, fills), strict=True)))
    ranges, calls, kernels, copies, fills = (kept[table] for table in _TABLES)
    session, doubts = nsys_checks.session_checked(path, session, doubts)
    doubts += [f"{path}: {count:,} rows of {table} left out: an identifier that is not a "
               "number (nsys writes none)" for table, count in export.left_out.items()]
    doubts += export.missing_said()
    if len(ranges):
        deep = nesting.too_deep(ranges["globalTid"].fillna(0).to_numpy(),
                                ranges["start"].to_numpy(float), ranges["end"].to_numpy(float))
        ranges = ranges[~deep].reset_index(drop=True)
        doubts += nesting.said(path, int(deep.sum()), "NVTX range")
        ranges["parent"] = _parents(ranges)
        bounded = ranges["parent"].notna().to_numpy().copy()
        bounded[bounded] = nesting.bounded_paths(ranges["name"][bounded].tolist(),
                                                 ranges["parent"][bounded].tolist())
        ranges = ranges[bounded].reset_index(drop=True)
        doubts += nesting.paths_said(path, int((~bounded).sum()), "NVTX range")
    facts.update({"doubts": doubts} if doubts else {})  # (detect moves them to the file)
    device = pd.concat([w[["start", "end", "correlationId", "pid"]]
                        for w in (kernels, copies, fills) if len(w)] or [kernels])
    rows = []
    wall = session if session is not None else _span_seconds(ranges, calls, device)
    if wall is not None:
        rows.append(row("run", "trace", "wall_time", wall))
    if len(device):
        rows.append(row("run", "trace", "gpu_time", (device["end"] - device["start"]).sum()
                        * _NANO))
    if len(ranges):
        ranges["wall"] = (ranges["end"] - ranges["start"]) * _NANO
        ranges["gpu"] = _projected_gpu_time(ranges, device, _launches(calls)) * _NANO
        rows += region_rows(ranges)
    for scope, work in (("kernel", kernels), ("memcpy", copies), ("memset", fills)):
        work["seconds"] = (work["end"] - work["start"]) * _NANO
        rows += activity_rows(scope, work)
    calls["seconds"] = (calls["end"] - calls["start"]) * _NANO
    rows += activity_rows("api", calls, "wall_time")
    return rows, facts


def read_nsys(path: str | Path) -> list[list[Any]]:
    """The rows of an export (see read_export)."""
    return read_export(path)[0]
