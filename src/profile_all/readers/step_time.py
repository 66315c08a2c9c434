"""Where each step's time goes, per rank: the device's time by type (device_time.py, for
the activities the step launched) and TensorBoard's step time breakdown.

A step is a `ProfilerStep#N` range of the host. Its device activities are those launched
by runtime calls made while it was open (on any of the process's threads: autograd's
thread launches the backward). TensorBoard's plugin extends a step to the end of the
device work it launched; so does this: a step spans from its range's start to the later
of its range's end and its last activity's end. Each moment of that span counts once, for
the first of kernel, memcpy, memset, runtime (a CUDA runtime or driver call), data loader
(`enumerate(DataLoader)...`: a range in torch 2 traces, an operator in older ones), CPU
execution (any other operator),
other (none of them: Python between operators, waiting) that was busy then, as the
plugin's overview does.
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
CATEGORIES = ("kernel", "memcpy", "memset", "runtime", "data_loader", "cpu", "other")
_DATA_LOADER = "enumerate(DataLoader)"


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


def step_rows(annotations: pd.DataFrame, ops: pd.DataFrame, device: pd.DataFrame,
              runtime: pd.DataFrame, scale: float) -> list[list[Any]]:
    """`step_time` (TensorBoard's breakdown, `wall_time`) and `device_time` rows per step,
    the step's range name their parent."""
    steps = _steps(annotations)
    if steps.empty:
        return []
    is_loader = ops["name"].str.startswith(_DATA_LOADER)
    loading = pd.concat([ops.loc[is_loader, ["ts", "dur"]], annotations.loc[
        annotations["name"].str.startswith(_DATA_LOADER), ["ts", "dur"]]])
    groups = [_merged(device[device["kind"] == kind]) for kind in ("kernel", "memcpy", "memset")]
    groups += [_merged(runtime), _merged(loading), _merged(ops[~is_loader])]
    starts = device["ts"].to_numpy(float)
    ends = starts + device["dur"].to_numpy(float)
    types = typed(device) if not device.empty else np.empty(0, dtype=object)
    step_of = _launching_step(steps, device, runtime)
    rows = []
    for number, (name, ts, dur) in enumerate(steps[["name", "ts", "dur"]].itertuples(False)):
        begin, end = float(ts), float(ts) + float(dur)
        mine = np.flatnonzero(step_of == number)
        if len(mine):
            end = max(end, float(ends[mine].max()))
            rows += split_rows(starts[mine], ends[mine], types[mine], scale, parent=name)
            rows += combination_rows(starts[mine], ends[mine], types[mine], scale, parent=name)
        lengths = intervals.prioritised([_within(group, begin, end) for group in groups])
        lengths.append(end - begin - sum(lengths))
        rows += [row("step_time", category, "wall_time", length * scale, parent=name)
                 for category, length in zip(CATEGORIES, lengths, strict=True)]
    return rows
