"""What the Nsight Systems readers (sqlite exports, `nsys stats` CSVs) share: copies and
fills named as Kineto names them ("Memcpy HtoD (Pageable -> Device)", "Memset (Device)"),
so that torch.profiler's rows and these line up; CUDA API calls as `nsys stats` names
them (the `_v7000` version suffix dropped); and the rows of ranges and device work."""

from __future__ import annotations

import re
from typing import Any

import pandas as pd

from profile_all.rows import row

#: ENUM_CUDA_MEMCPY_OPER's labels by id, as nsys documents them (exports before 2023 carry
#: no ENUM tables)
COPY_LABELS = dict(enumerate([
    "Unknown", "Host-to-Device", "Device-to-Host", "Host-to-Array", "Array-to-Host",
    "Array-to-Array", "Array-to-Device", "Device-to-Array", "Device-to-Device", "Host-to-Host",
    "Peer-to-Peer", "Unified Host-to-Device", "Unified Device-to-Host",
    "Unified Device-to-Device"]))
#: ENUM_CUDA_MEM_KIND's labels by id (nsys's own numbering, not CUPTI's)
MEMORY_LABELS = dict(enumerate([
    "Pageable", "Pinned", "Device", "Array", "Managed", "Device Static", "Managed Static",
    "Unknown"]))
_COPY_LABEL = re.compile(r"(Unified )?(\w)\w*-to-(\w)\w*")


def copy_kind(label: str) -> str:
    """Kineto's short form of an nsys copy label: "Host-to-Device" -> "HtoD"; a label
    already short ("HtoD", as older nsys writes it) is kept."""
    match = _COPY_LABEL.fullmatch(label)
    if match is None:
        return label
    unified, source, destination = match.groups()
    return f"{unified or ''}{source}to{destination}"


def memcpy_name(kind: str, source: str, destination: str) -> str:
    return f"Memcpy {copy_kind(kind)} ({source} -> {destination})"


def memset_name(memory: str) -> str:
    return f"Memset ({memory})"


def api_names(names: pd.Series) -> pd.Series:
    """`cudaLaunchKernel_v7000` -> `cudaLaunchKernel`, as `nsys stats` shows them."""
    return names.str.replace(r"_v\d+$", "", regex=True)


def region_rows(ranges: pd.DataFrame) -> list[list[Any]]:
    """calls, wall_time and (where the ranges have one) gpu_time per (name, parent); columns
    name, parent, wall (s) and optionally gpu (s)."""
    rows = []
    metrics = [m for m in ("wall", "gpu") if m in ranges]
    for (name, parent), group in ranges.groupby(["name", "parent"], sort=False):
        rows.append(row("region", name, "calls", len(group), parent=parent))
        for metric in metrics:
            values = group[metric]
            rows.append(row("region", name, f"{metric}_time", values.sum(), parent=parent))
            rows.append(row("region", name, f"{metric}_time", values.mean(), stat="mean",
                            parent=parent))
    return rows


def activity_rows(scope: str, work: pd.DataFrame, metric: str = "gpu_time") -> list[list[Any]]:
    """calls, time (total and mean) and, where the work has a `bytes` column, bytes moved,
    per name; `seconds` holds each item's time."""
    rows = []
    for name, group in work.groupby("name", sort=False):
        rows.append(row(scope, name, "calls", len(group)))
        rows.append(row(scope, name, metric, group["seconds"].sum()))
        rows.append(row(scope, name, metric, group["seconds"].mean(), stat="mean"))
        if "bytes" in group:
            rows.append(row(scope, name, "bytes", group["bytes"].sum()))
    return rows
