"""A chrome trace's operators, nested, with the device time they launched.

Nesting. On one thread, with operators sorted by start (longer first on ties), an
operator's depth is the number of earlier operators not yet ended when it starts, and its
parent is the last earlier operator one level up: two binary searches and a pass per
level instead of a Python stack. Self time is the duration less the direct children's.

Device time reaches operators as HTA and TensorBoard's plugin link it: a kernel, memcpy
or memset carries the `correlation` of the runtime call that launched it
(`cudaLaunchKernel`, `cudaMemcpyAsync`, ...; an `ac2g` flow event ties the two where the
id is missing), and that call lies inside the innermost operator of its own thread that
encloses its start (when the launch names the id of one of those enclosing operators, as
2021 Kineto traces do, that one). That operator's `self_gpu_time` is the device time it
launched; its `gpu_time` adds its descendants'. Device time that reaches no operator
(launched outside every operator, or by a call missing from the trace) is the
`(unattributed)` operator's, never dropped, and the share attributed is a row of its own.
The kernels' `External id` is not used: in most traces it holds the launch's correlation,
numbered apart from the operators' ids, so a join on it gives every operator 0 or someone
else's time.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from profile_all.readers.chrome_trace import ChromeTrace
from profile_all.readers.gpu_metrics import TENSOR_CORE_OPERATORS, uses_tensor_cores

_OP_COLUMNS = ["name", "thread", "ts", "dur", "external_id", "flops", "input_dims",
               "call_stack"]
_DEVICE_COLUMNS = ["name", "kind", "thread", "ts", "dur", "correlation", "bytes", "device",
                   "blocks_per_sm", "occupancy"]
_RUNTIME_COLUMNS = ["name", "thread", "ts", "dur", "correlation", "external_id"]


def parents(ts: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(parent index or -1, depth) of intervals of one thread sorted by (ts, -dur).

    A zero-length interval ends just after it starts, so that it is not counted as ended
    at its own start."""
    count = len(ts)
    end = np.where(end > ts, end, np.nextafter(ts, np.inf))
    depth = np.arange(count) - np.searchsorted(np.sort(end), ts, side="right")
    depth = np.maximum(depth, 0)
    parent = np.full(count, -1)
    for level in range(1, int(depth.max(initial=0)) + 1):
        above = np.flatnonzero(depth == level - 1)
        here = np.flatnonzero(depth == level)
        before = np.searchsorted(above, here) - 1
        parent[here[before >= 0]] = above[before[before >= 0]]
    return parent, depth


def enclosing(ts: np.ndarray, end: np.ndarray, parent: np.ndarray, points: np.ndarray,
              *, end_holds: bool = True) -> np.ndarray:
    """For each point, the innermost interval (of one thread, sorted by (ts, -dur)) that
    holds it, or -1: the last interval started by then, else its nearest ancestor still
    open (any interval holding the point is that one or one of its ancestors). A point at
    an interval's end is in it unless `end_holds` is False."""
    found = np.searchsorted(ts, points, side="right") - 1
    while True:
        open_ = found >= 0
        ended = np.zeros(len(found), dtype=bool)
        ended[open_] = (end[found[open_]] < points[open_]) if end_holds else \
            (end[found[open_]] <= points[open_])
        if not ended.any():
            return found
        found[ended] = parent[found[ended]]


def _named_ancestor(found: np.ndarray, parent: np.ndarray, ids: np.ndarray,
                    wanted: np.ndarray) -> np.ndarray:
    """`found`, or the ancestor of it whose external id is `wanted` when one is: in 2021
    Kineto traces a launch names its operator's id, which settles a launch that starts the
    very microsecond a child operator starts (it is then the parent's)."""
    chosen = found.copy()
    walking = (found >= 0) & (wanted >= 0)
    current = found.copy()
    while walking.any():
        hit = walking & (ids[current.clip(min=0)] == wanted)
        chosen[hit] = current[hit]
        walking &= ~hit
        current[walking] = parent[current[walking]]
        walking &= current >= 0
    return chosen


def columns_frame(columns: list[tuple], names: list[str]) -> pd.DataFrame:
    return pd.DataFrame(columns, columns=names)


def linked(trace: ChromeTrace) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(device activities, runtime calls), each device activity with the position of the
    runtime call that launched it in `launch` (-1 when the trace lacks it)."""
    columns = trace.columns
    device = columns_frame(columns.device, _DEVICE_COLUMNS)
    runtime = columns_frame(columns.runtime, _RUNTIME_COLUMNS)
    for frame, flows in ((device, columns.flow_finishes), (runtime, columns.flow_starts)):
        missing = frame["correlation"] < 0
        if missing.any() and flows:
            frame.loc[missing, "correlation"] = [
                flows.get((thread, ts), -1) for thread, ts
                in zip(frame.loc[missing, "thread"], frame.loc[missing, "ts"], strict=True)]
    known = runtime[runtime["correlation"] >= 0]
    by_correlation = pd.Series(known.index, index=known["correlation"].to_numpy())
    by_correlation = by_correlation[~by_correlation.index.duplicated()]
    launch = by_correlation.reindex(device["correlation"].to_numpy()).to_numpy()
    device["launch"] = np.where(np.isnan(launch), -1, launch).astype(int)
    device.loc[device["correlation"] < 0, "launch"] = -1
    return device, runtime


def _nest(ops: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]]:
    """(parent position or -1, depth, each thread's positions) of operators sorted by
    (thread, ts, -dur)."""
    ts, end = ops["ts"].to_numpy(float), (ops["ts"] + ops["dur"]).to_numpy(float)
    parent, depth = np.full(len(ops), -1), np.zeros(len(ops), dtype=int)
    threads = ops.groupby("thread", sort=False).indices
    for positions in threads.values():
        first, stop = positions[0], positions[-1] + 1
        local_parent, depth[first:stop] = parents(ts[first:stop], end[first:stop])
        parent[first:stop] = np.where(local_parent >= 0, local_parent + first, -1)
    return parent, depth, threads


def _folded(ops: pd.DataFrame, parent: np.ndarray) -> np.ndarray:
    """The operators torch's own tables fold into their parent (profiler_util's
    _remove_dup_nodes): an only child of the same name, such as `aten::sum` calling
    `aten::sum`, so that calls and total times count such a pair once."""
    names = ops["name"].to_numpy(object)
    has_parent = parent >= 0
    children = np.bincount(parent[has_parent], minlength=len(ops))
    fold = np.zeros(len(ops), dtype=bool)
    above = parent[has_parent]
    fold[has_parent] = (names[above] == names[has_parent]) & (children[above] == 1)
    return fold


def operator_frame(trace: ChromeTrace,
                   links: tuple[pd.DataFrame, pd.DataFrame] | None = None) -> pd.DataFrame:
    """A row per operator call with its parent (position, -1 for none), depth, cpu_time,
    self_time (less its child operators and the runtime calls it made, as torch counts
    it), self_gpu_time and gpu_time (seconds), the part of each in kernels that use Tensor
    Cores (tc_self_gpu_time, tc_gpu_time) and tc_eligible (1: an operator autocast runs in
    lower precision, one that launched a Tensor Core kernel, or one around such: the
    plugin's rule). `attrs["unattributed"]` holds the device
    time (s) that reached no operator, `attrs["launcher"]` the position of the operator
    that launched each device activity (-1: none). `links`: `linked(trace)`, where the caller has it
    (read, not changed)."""
    scale = trace.seconds_per_unit
    ops = columns_frame(trace.columns.ops, _OP_COLUMNS)
    ops = ops.sort_values(["thread", "ts", "dur"], ascending=[True, True, False],
                          kind="stable", ignore_index=True)
    parent, depth, threads = _nest(ops)
    fold = _folded(ops, parent)
    if fold.any():  # drop the folded ones: their children and launches go to the parent
        ops = ops[~fold].reset_index(drop=True)
        parent, depth, threads = _nest(ops)
    ts, dur = ops["ts"].to_numpy(float), ops["dur"].to_numpy(float)
    end = ts + dur

    device, runtime = links or linked(trace)
    inside_of = np.full(len(runtime), -1)  # the innermost operator around each call
    launcher = np.full(len(runtime), -1)  # the operator that launched it
    for thread, calls in runtime.groupby("thread", sort=False).indices.items():
        if thread in threads:
            positions = threads[thread]
            first, stop = positions[0], positions[-1] + 1
            local_parent = np.where(parent[first:stop] >= 0, parent[first:stop] - first, -1)
            inside = enclosing(ts[first:stop], end[first:stop], local_parent,
                                runtime["ts"].to_numpy(float)[calls])
            inside_of[calls] = np.where(inside >= 0, inside + first, -1)
            inside = _named_ancestor(inside, local_parent,
                                     ops["external_id"].to_numpy()[first:stop],
                                     runtime["external_id"].to_numpy()[calls])
            launcher[calls] = np.where(inside >= 0, inside + first, -1)
    launch = device["launch"].to_numpy()
    owner = np.full(len(device), -1)  # (a trace may have kernels and no runtime call)
    owner[launch >= 0] = launcher[launch[launch >= 0]]
    device_dur = device["dur"].to_numpy(float)
    attributed = owner >= 0
    self_gpu = np.bincount(owner[attributed], weights=device_dur[attributed],
                           minlength=len(ops)).astype(float)
    in_op = inside_of >= 0  # a runtime call is a CPU child of its operator, as in torch
    children = np.zeros(len(ops))  # (bincount of nothing with weights gives integers)
    np.add.at(children, inside_of[in_op], runtime["dur"].to_numpy(float)[in_op])
    tensor = attributed & device["name"].map(uses_tensor_cores).to_numpy(bool) \
        & (device["kind"] == "kernel").to_numpy()
    self_tc = np.bincount(owner[tensor], weights=device_dur[tensor],
                          minlength=len(ops)).astype(float)
    eligible = ops["name"].isin(TENSOR_CORE_OPERATORS).to_numpy() | (self_tc > 0)
    total_gpu, total_tc = self_gpu.copy(), self_tc.copy()
    for level in range(int(depth.max(initial=0)), 0, -1):  # deepest first: sums go up
        here = np.flatnonzero((depth == level) & (parent >= 0))
        np.add.at(children, parent[here], dur[here])
        np.add.at(total_gpu, parent[here], total_gpu[here])
        np.add.at(total_tc, parent[here], total_tc[here])
        eligible[parent[here[eligible[here]]]] = True
    ops["parent"], ops["depth"] = parent, depth
    ops["cpu_time"] = dur * scale
    ops["self_time"] = (dur - children) * scale
    ops["self_gpu_time"] = self_gpu * scale
    ops["gpu_time"] = total_gpu * scale
    ops["tc_self_gpu_time"], ops["tc_gpu_time"] = self_tc * scale, total_tc * scale
    ops["tc_eligible"] = eligible.astype(float)
    ops.attrs["unattributed"] = float(device_dur[~attributed].sum()) * scale
    ops.attrs["launcher"] = owner  # per device activity, the operator that launched it, or -1
    ops.attrs["folded"] = int(fold.sum())
    return ops
