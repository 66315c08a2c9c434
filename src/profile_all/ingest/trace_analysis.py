"""A chrome trace's columns -> report rows: operators, kernels, steps and regions.

Self time needs each operator's direct children. On one thread, with operators sorted by
start (longer first on ties), nesting is read off two binary searches instead of a Python
stack: an operator's depth is the number of earlier operators not yet ended when it
starts, and its descendants are the operators that start before it ends. A level's
children sums then come from one prefix sum per depth.

Device time reaches operators through the kernels' `External id`, which Kineto sets to the
id of the operator that launched them: an operator's `self_gpu_time` is its own kernels'
time, its `gpu_time` includes its descendants'. Both are device clock (CUPTI) durations.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from profile_all.ingest.chrome_trace import ChromeTrace
from profile_all.report.schema import row
from profile_all.stats import summarize

STEP_PREFIX = "ProfilerStep#"
_OP_COLUMNS = ["name", "pid", "tid", "ts", "dur", "external_id", "flops", "input_dims"]


def _nesting(ts: np.ndarray, end: np.ndarray, dur: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(sum of direct children's dur, index of last descendant) for intervals sorted by ts."""
    count = len(ts)
    depth = np.arange(count) - np.searchsorted(np.sort(end), ts, side="right")
    last = np.searchsorted(ts, end, side="left") - 1
    last = np.maximum(last, np.arange(count))
    children = np.zeros(count)
    for level in np.unique(depth):
        at_level = np.flatnonzero(depth == level)
        below = np.concatenate(([0.0], np.cumsum(np.where(depth == level + 1, dur, 0.0))))
        children[at_level] = below[last[at_level] + 1] - below[at_level + 1]
    return children, last


def operator_frame(trace: ChromeTrace) -> pd.DataFrame:
    """A row per operator call, with self_time, self_gpu_time and gpu_time (seconds)."""
    ops = pd.DataFrame(trace.columns.ops, columns=_OP_COLUMNS)
    scale = trace.seconds_per_unit
    ops["thread"] = ops["pid"].astype(str) + ":" + ops["tid"].astype(str)
    ops = ops.sort_values(["thread", "ts", "dur"], ascending=[True, True, False],
                          kind="stable", ignore_index=True)
    ts, dur = ops["ts"].to_numpy(float), ops["dur"].to_numpy(float)
    end = ts + dur
    children, last = np.zeros(len(ops)), np.arange(len(ops))
    for positions in ops.groupby("thread", sort=False).indices.values():
        first, stop = positions[0], positions[-1] + 1
        children[first:stop], thread_last = _nesting(ts[first:stop], end[first:stop],
                                                     dur[first:stop])
        last[first:stop] = thread_last + first

    device = pd.DataFrame(trace.columns.device, columns=["name", "kind", "dur", "external_id"])
    own = ops.loc[ops["external_id"] >= 0, "external_id"]
    launcher = pd.Series(own.index, index=own.to_numpy())
    launcher = launcher[~launcher.index.duplicated()]
    positions = launcher.reindex(device["external_id"].to_numpy()).to_numpy()
    launched = ~np.isnan(positions)
    self_gpu = np.bincount(positions[launched].astype(int),
                           weights=device["dur"].to_numpy(float)[launched], minlength=len(ops))
    cumulative = np.concatenate(([0.0], np.cumsum(self_gpu)))
    ops["cpu_time"] = dur * scale
    ops["self_time"] = (dur - children) * scale
    ops["self_gpu_time"] = self_gpu * scale
    ops["gpu_time"] = (cumulative[last + 1] - cumulative[np.arange(len(ops))]) * scale
    return ops


def _operator_rows(ops: pd.DataFrame, has_device: bool) -> list[list[Any]]:
    rows = []
    metrics = ["cpu_time", "self_time"] + (["gpu_time", "self_gpu_time"] if has_device else [])
    totals = ops.groupby("name", sort=False).agg(
        calls=("name", "size"), flops=("flops", "sum"), **{m: (m, "sum") for m in metrics})
    for name, values in totals.iterrows():
        rows.append(row("operator", name, "calls", values["calls"]))
        for metric in metrics:
            rows.append(row("operator", name, metric, values[metric]))
        rows.append(row("operator", name, "cpu_time", values["cpu_time"] / values["calls"],
                        stat="mean"))
        if values["flops"] > 0:
            rows.append(row("operator", name, "flops", values["flops"]))
    shaped = ops[ops["input_dims"].notna()]
    if not shaped.empty:
        by_shape = shaped.groupby(["name", "input_dims"], sort=False).agg(
            calls=("name", "size"), **{m: (m, "sum") for m in metrics})
        for (name, dims), values in by_shape.iterrows():
            label = f"{name} {dims}"
            rows.append(row("operator_shape", label, "calls", values["calls"]))
            rows += [row("operator_shape", label, m, values[m]) for m in metrics]
    return rows


def _device_rows(trace: ChromeTrace) -> list[list[Any]]:
    device = pd.DataFrame(trace.columns.device, columns=["name", "kind", "dur", "external_id"])
    rows = []
    for name, durations in device.groupby("name", sort=False)["dur"]:
        seconds = durations.to_numpy(float) * trace.seconds_per_unit
        rows.append(row("kernel", name, "calls", len(seconds)))
        rows.append(row("kernel", name, "gpu_time", seconds.sum()))
        rows.append(row("kernel", name, "gpu_time", seconds.mean(), stat="mean"))
    return rows


def _annotation_rows(trace: ChromeTrace) -> list[list[Any]]:
    """Steps (ProfilerStep#N) and regions (record_function, pa.region), with parent paths."""
    scale = trace.seconds_per_unit
    steps: list[float] = []
    regions: dict[tuple[str, str], list[float]] = {}
    ordered = sorted(trace.columns.annotations,
                     key=lambda a: (str(a[1]), str(a[2]), a[3], -a[4]))
    stack: list[tuple[Any, float, str]] = []  # (thread, end, path)
    for name, pid, tid, ts, dur in ordered:
        if name.startswith(STEP_PREFIX):
            steps.append(dur * scale)
            continue
        thread = (pid, tid)
        while stack and (stack[-1][0] != thread or stack[-1][1] <= ts):
            stack.pop()
        parent = stack[-1][2] if stack else ""
        regions.setdefault((name, parent), []).append(dur * scale)
        stack.append((thread, ts + dur, f"{parent}/{name}" if parent else name))

    rows = []
    for scope, name, parent, samples in (
            [("step", "ProfilerStep", "", steps)] if steps else []) + [
            ("region", name, parent, samples) for (name, parent), samples in regions.items()]:
        rows.append(row(scope, name, "calls", len(samples), parent=parent))
        rows += [row(scope, name, "wall_time", value, stat=stat, parent=parent)
                 for stat, value in summarize(samples).items()]
    parents: dict[str, set[str]] = {}
    for name, parent in regions:
        parents.setdefault(name, set()).add(parent)
    gpu: dict[str, list[float]] = {}
    for name, dur in trace.columns.gpu_annotations:
        if not name.startswith(STEP_PREFIX):
            gpu.setdefault(name, []).append(dur * scale)
    for name, samples in gpu.items():
        known = parents.get(name, {""})
        parent = next(iter(known)) if len(known) == 1 else ""
        rows.append(row("region", name, "gpu_time", sum(samples), parent=parent))
        rows.append(row("region", name, "gpu_time", sum(samples) / len(samples), stat="mean",
                        parent=parent))
    return rows


def trace_rows(trace: ChromeTrace) -> list[list[Any]]:
    """Every row a chrome trace gives, in the report's MEASURED column order."""
    columns = trace.columns
    rows = [row("run", "trace", "events", columns.events, unit="count")]
    spans = [(event[3], event[3] + event[4]) for event in columns.annotations]
    if columns.ops:
        ops = operator_frame(trace)
        spans.append((ops["ts"].min(), (ops["ts"] + ops["dur"]).max()))
        rows += _operator_rows(ops, has_device=bool(columns.device))
    if spans:  # host time from the first operator or region to the last
        first, last = min(s[0] for s in spans), max(s[1] for s in spans)
        rows.insert(1, row("run", "trace", "wall_time", (last - first) * trace.seconds_per_unit))
    if columns.device:
        busy = sum(d[2] for d in columns.device) * trace.seconds_per_unit
        rows.append(row("run", "trace", "gpu_time", busy))
        rows += _device_rows(trace)
    return rows + _annotation_rows(trace)
