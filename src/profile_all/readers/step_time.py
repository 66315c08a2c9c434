"""Where each step's time goes, per rank: the device's time by type (device_time.py, for
the activities the step launched) and TensorBoard's step time breakdown.

A step is a `ProfilerStep#N` range of the host. Its device activities are those launched
by runtime calls made while it was open (on any of the process's threads: autograd's
thread launches the backward). As TensorBoard's plugin does, steps tile the timeline
(`_tiled`): a step begins at its range's start or where the step before ended, whichever
is later, and ends at its range's end or its device work's, whichever is later. Each
moment of that span counts once, for the first of kernel, memcpy, memset, communication
(a communication kernel, or a `nccl:`/`gloo:` collective on the host), runtime (a CUDA
runtime or driver call), data loader (`enumerate(DataLoader)...`: a range in torch 2
traces, an operator in older ones), CPU execution (any other operator), other (none of
them: Python between operators, waiting) that was busy then, as the plugin's overview
does.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from profile_all.readers import intervals
from profile_all.readers.chrome_trace import STEP_PREFIX
from profile_all.readers.device_time import (
    combination_rows,
    launch_times,
    split_rows,
    typed,
)
from profile_all.rows import row

#: TensorBoard's categories, highest priority first (its overview's legend)
CATEGORIES = ("kernel", "memcpy", "memset", "communication", "runtime", "data_loader", "cpu",
              "other")
_DATA_LOADER = "enumerate(DataLoader)"
#: the host operators the plugin counts as communication (beside communication kernels)
_COMMUNICATION_OPS = [f"{library}:{collective}" for library in ("nccl", "gloo") for collective
                      in ("broadcast", "reduce", "all_reduce", "all_gather", "reduce_scatter")]
#: a last step that launched fewer activities than this share of the step before it is not
#: kept (the plugin's rule: the trace may have ended before its device work did)
TAIL_SHARE = 0.8


def _steps(annotations: pd.DataFrame) -> pd.DataFrame:
    steps = annotations[annotations["name"].str.startswith(STEP_PREFIX)]
    return steps.sort_values("ts", kind="stable").drop_duplicates("name")


def _merged(frame: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    starts = frame["ts"].to_numpy(float)
    return intervals.merged(starts, starts + frame["dur"].to_numpy(float))


def _within(merged: tuple[np.ndarray, np.ndarray], low: float, high: float
            ) -> tuple[np.ndarray, np.ndarray]:
    """The disjoint sorted intervals `merged`, cut to [low, high]."""
    starts, ends = merged
    first = np.searchsorted(ends, low, side="right")
    last = np.searchsorted(starts, high, side="left")
    return intervals.clipped(starts[first:last], ends[first:last], low, high)


def launched_in_steps(annotations: pd.DataFrame, device: pd.DataFrame,
                      runtime: pd.DataFrame) -> pd.DataFrame:
    """The device activities a trace's steps launched: those whose launch started before
    the last step ended, as HTA keeps them (`include_last_profiler_step`); all of them
    in a trace with no step."""
    steps = _steps(annotations)
    if steps.empty or device.empty:
        return device
    last_end = float((steps["ts"] + steps["dur"]).max())
    return device[launch_times(device, runtime) <= last_end]  # (NaN: unknown, left out)


def _launching_step(steps: pd.DataFrame, device: pd.DataFrame, runtime: pd.DataFrame
                    ) -> np.ndarray:
    """Per device activity, the position of the step whose range held its launch, or -1."""
    launched_at = launch_times(device, runtime)
    begins = steps["ts"].to_numpy(float)
    closes = begins + steps["dur"].to_numpy(float)
    step = np.searchsorted(begins, launched_at, side="right") - 1
    known = (step >= 0) & ~np.isnan(launched_at)
    known[known] = launched_at[known] <= closes[step[known]]
    return np.where(known, step, -1)


def _tiled(steps: pd.DataFrame, step_of: np.ndarray, starts: np.ndarray, ends: np.ndarray
           ) -> tuple[np.ndarray, np.ndarray, int]:
    """Each step's (begin, end) as TensorBoard's plugin tiles them, and how many steps to
    keep. Where any step launched device work, a step begins at its range's start or where
    the step before it ended, whichever is later, and ends at its range's end or its last
    activity's end, whichever is later: the steps tile the timeline, none counting the
    device tail of the one before. The first begins after device work launched before any
    step that ends before the first step's own device work starts. The last steps that
    launched nothing, and a last step that launched under 80% of the activities of the one
    before it, are not kept: the trace may have ended before their device work did."""
    begins = steps["ts"].to_numpy(float)
    closes = begins + steps["dur"].to_numpy(float)
    counts = np.bincount(step_of[step_of >= 0], minlength=len(steps))
    if not counts.any():
        return begins, closes, len(steps)
    own = step_of == 0
    previous = begins[0]
    if own.any():
        before = (step_of < 0) & (ends < starts[own].min())
        previous = max(previous, float(ends[before].max())) if before.any() else previous
    launched = step_of >= 0
    last_end = np.full(len(steps), -np.inf)  # each step's last activity's end
    np.maximum.at(last_end, step_of[launched], ends[launched])
    tiled_begins, tiled_ends = np.empty(len(steps)), np.empty(len(steps))
    for number in range(len(steps)):
        begin = max(previous, begins[number])
        end = max(closes[number], last_end[number])
        tiled_begins[number], tiled_ends[number] = begin, max(end, begin)
        previous = tiled_ends[number]
    keep = len(steps)
    if keep > 1:
        last = int(np.flatnonzero(counts).max())
        keep = last if last > 0 and counts[last - 1] * TAIL_SHARE > counts[last] else last + 1
    return tiled_begins, tiled_ends, keep


def step_rows(annotations: pd.DataFrame, ops: pd.DataFrame, device: pd.DataFrame,
              runtime: pd.DataFrame, scale: float) -> list[list[Any]]:
    """`step_time` (TensorBoard's breakdown, `wall_time`) and `device_time` rows per step,
    the step's range name their parent."""
    steps = _steps(annotations)
    if steps.empty:
        return []
    is_loader = ops["name"].str.startswith(_DATA_LOADER)
    is_communication = ops["name"].isin(_COMMUNICATION_OPS)
    collectives = annotations[annotations["name"].isin(_COMMUNICATION_OPS)]  # gloo's are ranges
    loading = pd.concat([ops.loc[is_loader, ["ts", "dur"]], annotations.loc[
        annotations["name"].str.startswith(_DATA_LOADER), ["ts", "dur"]]])
    types = typed(device) if not device.empty else np.empty(0, dtype=object)
    kernels = (device["kind"] == "kernel").to_numpy()
    talking = kernels & (types == "communication")
    groups = [_merged(device[kernels & ~talking])]
    groups += [_merged(device[device["kind"] == kind]) for kind in ("memcpy", "memset")]
    groups += [_merged(pd.concat([device.loc[talking, ["ts", "dur"]],
                                  ops.loc[is_communication, ["ts", "dur"]],
                                  collectives[["ts", "dur"]]])),
               _merged(runtime), _merged(loading), _merged(ops[~is_loader & ~is_communication])]
    starts = device["ts"].to_numpy(float)
    ends = starts + device["dur"].to_numpy(float)
    step_of = _launching_step(steps, device, runtime)
    begins, finals, keep = _tiled(steps, step_of, starts, ends)
    rows = []
    order = np.argsort(step_of, kind="stable")  # each step's activities, found once
    bounds = np.searchsorted(step_of[order], np.arange(len(steps) + 1))
    for number, name in enumerate(steps["name"][:keep]):
        begin, end = begins[number], finals[number]
        mine = order[bounds[number]:bounds[number + 1]]
        if len(mine):
            rows += split_rows(starts[mine], ends[mine], types[mine], scale, parent=name)
            rows += combination_rows(starts[mine], ends[mine], types[mine], scale, parent=name)
        lengths = intervals.prioritised([_within(group, begin, end) for group in groups])
        lengths.append(end - begin - sum(lengths))
        rows += [row("step_time", category, "wall_time", length * scale, parent=name)
                 for category, length in zip(CATEGORIES, lengths, strict=True)]
    return rows


def overview_span(annotations: pd.DataFrame, ops: pd.DataFrame, device: pd.DataFrame,
                  runtime: pd.DataFrame) -> tuple[float, float] | None:
    """From the first kept step's begin to the last one's end, tiled as `_tiled` does; in a
    trace with no step, the operators' span taken as one step (as the plugin takes it)."""
    steps = _steps(annotations)
    if steps.empty:
        if ops.empty:
            return None
        first, last = float(ops["ts"].min()), float((ops["ts"] + ops["dur"]).max())
        steps = pd.DataFrame({"name": ["0"], "ts": [first], "dur": [last - first]})
    starts = device["ts"].to_numpy(float)
    ends = starts + device["dur"].to_numpy(float)
    begins, finals, keep = _tiled(steps, _launching_step(steps, device, runtime), starts, ends)
    return float(begins[0]), float(finals[keep - 1])
