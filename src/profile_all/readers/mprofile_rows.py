"""The memory backend's rows, from its samples (an Mprofile) and its regions' timestamps,
and its part of the timeline (rows.TIMELINE_COLUMNS): the RSS of the process and of its
children (all child processes summed) over time, and the calls of the top-level regions."""

from __future__ import annotations

from array import array
from typing import Any

import numpy as np

from profile_all.readers.mprofile import Mprofile
from profile_all.rows import row

TIMELINE_POINTS = 5000


def run_rows(profile: Mprofile, started: float) -> list[list[Any]]:
    if not len(profile.rss):
        return []
    rows = [row("run", "run", "peak_rss", profile.rss.max(), stat="max", unit="B"),
            row("run", "run", "baseline_rss", profile.rss[0], stat="value", unit="B"),
            row("run", "run", "memory_samples", len(profile.rss), unit="count")]
    if profile.children:
        rows += [row("run", "run", "peak_rss_children", profile.children_total().max(),
                     stat="max", unit="B"),
                 row("run", "run", "child_processes", len(profile.children), unit="count")]
    return rows


def region_rows(profile: Mprofile, calls: dict[tuple[str, str], tuple[array, array]]
                ) -> list[list[Any]]:
    """Per region: the peak RSS over its calls, and the largest increase within one call."""
    times, rss = profile.times, profile.rss
    if not len(times):
        return []
    padded = np.append(rss, -np.inf)  # reduceat needs an index past the last sample
    rows = []
    for (name, parent), (starts, ends) in calls.items():
        starts, ends = np.frombuffer(starts, dtype="d"), np.frombuffer(ends, dtype="d")
        if not len(starts):  # every call left out (inside other passes' windows)
            continue
        first = np.searchsorted(times, starts, "right").clip(1) - 1
        last = np.searchsorted(times, ends, "right").clip(1) - 1
        bounds = np.column_stack([first, last + 1]).ravel()
        peaks = np.maximum.reduceat(padded, bounds)[::2]
        increase = (peaks - rss[first]).max()
        rows += [row("region", name, "peak_rss", peaks.max(), stat="max", parent=parent,
                     unit="B"),
                 row("region", name, "rss_increase", increase, stat="max", parent=parent,
                     unit="B")]
    return rows


def _bucket_max(times: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """At most TIMELINE_POINTS points, each the largest of its bucket, so no peak is lost."""
    if len(values) <= TIMELINE_POINTS:
        return times, values
    edges = np.linspace(0, len(values), TIMELINE_POINTS + 1).astype(int)[:-1]
    return times[edges], np.maximum.reduceat(values, edges)


def timeline(profile: Mprofile, started: float) -> list[list[Any]]:
    """(series, name, start, end, value, unit) of each RSS sample kept, `started` the epoch
    seconds the target started at."""
    series = [("process", profile.rss)]
    if profile.children:
        series.append(("children", profile.children_total()))
    entries = []
    for name, values in series:
        times, values = _bucket_max(profile.times - started, values)
        entries += [["rss", name, float(offset), float(offset), float(value), "B"]
                    for offset, value in zip(times, values, strict=True)]
    return entries


def region_bands(calls: dict[tuple[str, str], tuple[array, array]], started: float,
                 limit: int) -> list[list[Any]]:
    """(series, name, start, end, value, unit) of the first `limit` calls of each top-level
    region (epoch seconds in `calls`, seconds since `started` out)."""
    entries = []
    for (name, parent), (starts, ends) in calls.items():
        if parent:
            continue
        starts = np.frombuffer(starts, dtype="d")[:limit] - started
        ends = np.frombuffer(ends, dtype="d")[:limit] - started
        entries += [["region", name, float(s), float(e), float("nan"), "s"]
                    for s, e in zip(starts, ends, strict=True)]
    return entries


def leave_out(profile: Mprofile, calls: dict[Any, tuple[array, array]],
              spans: list[tuple[float, float]]) -> None:
    """The samples (the process's and each child's) and the region calls (`calls`: starts
    and ends by region) that fall in `spans` (epoch seconds), left out, in place."""
    def outside(times: np.ndarray) -> np.ndarray:
        inside = np.zeros(len(times), bool)
        for start, end in spans:
            inside |= (times >= start) & (times <= end)
        return ~inside

    keep = outside(profile.times)
    profile.times, profile.rss = profile.times[keep], profile.rss[keep]
    for pid, (times, rss) in list(profile.children.items()):
        kept = outside(times)
        profile.children[pid] = (times[kept], rss[kept])
    for key, (starts, ends) in list(calls.items()):
        kept = outside(np.frombuffer(starts))
        calls[key] = (array("d", np.frombuffer(starts)[kept]),
                      array("d", np.frombuffer(ends)[kept]))
