"""A chrome trace's columns -> report rows: operators, kernels, copies, CUDA API calls,
steps and regions.

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

Regions (record_function ranges, `pa.region`) and steps (`ProfilerStep#N`) get the device
time of everything launched while they were open on their own thread; the ranges of a
process's main thread (the one with the steps, else the one with the most ranges) get
what any of the process's threads launched meanwhile, since the main thread waits inside
`backward()` while autograd's own thread launches the backward kernels. Device time is
device clock (CUPTI) durations; everything else host clock.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from profile_all.readers.chrome_trace import STEP_PREFIX, ChromeTrace
from profile_all.rows import UNATTRIBUTED, region_path, row
from profile_all.stats import summarize

_OP_COLUMNS = ["name", "thread", "ts", "dur", "external_id", "flops", "input_dims"]
_DEVICE_COLUMNS = ["name", "kind", "thread", "ts", "dur", "correlation", "bytes"]
_RUNTIME_COLUMNS = ["name", "thread", "ts", "dur", "correlation", "external_id"]


def _parents(ts: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
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


def _enclosing(ts: np.ndarray, end: np.ndarray, parent: np.ndarray,
               points: np.ndarray) -> np.ndarray:
    """For each point, the innermost interval (of one thread, sorted by (ts, -dur)) that
    holds it, or -1: the last interval started by then, else its nearest ancestor still
    open (any interval holding the point is that one or one of its ancestors)."""
    found = np.searchsorted(ts, points, side="right") - 1
    while True:
        open_ = found >= 0
        ended = np.zeros(len(found), dtype=bool)
        ended[open_] = end[found[open_]] < points[open_]
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


def _frame(columns: list[tuple], names: list[str]) -> pd.DataFrame:
    return pd.DataFrame(columns, columns=names)


def _linked(trace: ChromeTrace) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(device activities, runtime calls), each device activity with the position of the
    runtime call that launched it in `launch` (-1 when the trace lacks it)."""
    columns = trace.columns
    device = _frame(columns.device, _DEVICE_COLUMNS)
    runtime = _frame(columns.runtime, _RUNTIME_COLUMNS)
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
        local_parent, depth[first:stop] = _parents(ts[first:stop], end[first:stop])
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


def operator_frame(trace: ChromeTrace) -> pd.DataFrame:
    """A row per operator call with its parent (position, -1 for none), cpu_time,
    self_time (less its child operators and the runtime calls it made, as torch counts
    it), self_gpu_time and gpu_time (seconds). `attrs["unattributed"]` holds the device
    time (s) that reached no operator."""
    scale = trace.seconds_per_unit
    ops = _frame(trace.columns.ops, _OP_COLUMNS)
    ops = ops.sort_values(["thread", "ts", "dur"], ascending=[True, True, False],
                          kind="stable", ignore_index=True)
    parent, depth, threads = _nest(ops)
    fold = _folded(ops, parent)
    if fold.any():  # drop the folded ones: their children and launches go to the parent
        ops = ops[~fold].reset_index(drop=True)
        parent, depth, threads = _nest(ops)
    ts, dur = ops["ts"].to_numpy(float), ops["dur"].to_numpy(float)
    end = ts + dur

    device, runtime = _linked(trace)
    inside_of = np.full(len(runtime), -1)  # the innermost operator around each call
    launcher = np.full(len(runtime), -1)  # the operator that launched it
    for thread, calls in runtime.groupby("thread", sort=False).indices.items():
        if thread in threads:
            positions = threads[thread]
            first, stop = positions[0], positions[-1] + 1
            local_parent = np.where(parent[first:stop] >= 0, parent[first:stop] - first, -1)
            inside = _enclosing(ts[first:stop], end[first:stop], local_parent,
                                runtime["ts"].to_numpy(float)[calls])
            inside_of[calls] = np.where(inside >= 0, inside + first, -1)
            inside = _named_ancestor(inside, local_parent,
                                     ops["external_id"].to_numpy()[first:stop],
                                     runtime["external_id"].to_numpy()[calls])
            launcher[calls] = np.where(inside >= 0, inside + first, -1)
    owner = np.where(device["launch"] >= 0, launcher[device["launch"].clip(lower=0)], -1)
    device_dur = device["dur"].to_numpy(float)
    attributed = owner >= 0
    self_gpu = np.bincount(owner[attributed], weights=device_dur[attributed],
                           minlength=len(ops)).astype(float)
    in_op = inside_of >= 0  # a runtime call is a CPU child of its operator, as in torch
    children = np.zeros(len(ops))  # (bincount of nothing with weights gives integers)
    np.add.at(children, inside_of[in_op], runtime["dur"].to_numpy(float)[in_op])
    total_gpu = self_gpu.copy()
    for level in range(int(depth.max(initial=0)), 0, -1):  # deepest first: sums go up
        here = np.flatnonzero((depth == level) & (parent >= 0))
        np.add.at(children, parent[here], dur[here])
        np.add.at(total_gpu, parent[here], total_gpu[here])
    ops["parent"] = parent
    ops["cpu_time"] = dur * scale
    ops["self_time"] = (dur - children) * scale
    ops["self_gpu_time"] = self_gpu * scale
    ops["gpu_time"] = total_gpu * scale
    ops.attrs["unattributed"] = float(device_dur[~attributed].sum()) * scale
    ops.attrs["folded"] = int(fold.sum())
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
    unattributed = ops.attrs.get("unattributed", 0.0)
    if has_device and unattributed > 0:
        rows += [row("operator", UNATTRIBUTED, "gpu_time", unattributed),
                 row("operator", UNATTRIBUTED, "self_gpu_time", unattributed)]
    shaped = ops[ops["input_dims"].notna()]
    if not shaped.empty:
        by_shape = shaped.groupby(["name", "input_dims"], sort=False).agg(
            calls=("name", "size"), **{m: (m, "sum") for m in metrics})
        for (name, dims), values in by_shape.iterrows():
            label = f"{name} {dims}"
            rows.append(row("operator_shape", label, "calls", values["calls"]))
            rows += [row("operator_shape", label, m, values[m]) for m in metrics]
    return rows


def _device_rows(device: pd.DataFrame, scale: float) -> list[list[Any]]:
    """Kernels, and copies and fills by kind, with their bytes."""
    rows = []
    for (kind, name), group in device.groupby(["kind", "name"], sort=False):
        seconds = group["dur"].to_numpy(float) * scale
        rows += [row(kind, name, "calls", len(seconds)),
                 row(kind, name, "gpu_time", seconds.sum()),
                 row(kind, name, "gpu_time", seconds.mean(), stat="mean")]
        if kind != "kernel":
            rows.append(row(kind, name, "bytes", group["bytes"].sum()))
    return rows


def _api_rows(runtime: pd.DataFrame, scale: float) -> list[list[Any]]:
    rows = []
    for name, durations in runtime.groupby("name", sort=False)["dur"]:
        seconds = durations.to_numpy(float) * scale
        rows += [row("api", name, "calls", len(seconds)),
                 row("api", name, "wall_time", seconds.sum()),
                 row("api", name, "wall_time", seconds.mean(), stat="mean")]
    return rows


def _main_threads(annotations: pd.DataFrame) -> dict[str, str]:
    """Per process, the thread whose ranges stand for the whole program: the one with the
    steps (ProfilerStep#N), else the one with the most ranges."""
    ranked = annotations.assign(
        process=annotations["thread"].str.partition(":")[0],
        is_step=annotations["name"].str.startswith(STEP_PREFIX))
    counts = ranked.groupby(["process", "thread"])["is_step"].agg(["sum", "size"])
    counts = counts.sort_values(["sum", "size"], ascending=False).reset_index()
    return dict(counts.drop_duplicates("process")[["process", "thread"]].to_numpy())


def _launched_within(annotations: pd.DataFrame, device: pd.DataFrame,
                     runtime: pd.DataFrame) -> np.ndarray:
    """Per annotation: the device time (trace units) launched while it was open, on its
    own thread, or, for the process's main thread, on any thread of the process (the
    main thread waits inside `backward` while autograd's thread launches its kernels)."""
    launched_by = device["launch"] >= 0
    per_call = np.bincount(device["launch"][launched_by],
                           weights=device["dur"][launched_by].to_numpy(float),
                           minlength=len(runtime))
    threads = runtime["thread"].to_numpy(object)
    processes = runtime["thread"].str.partition(":")[0].to_numpy(object)
    starts = runtime["ts"].to_numpy(float)
    main = _main_threads(annotations)
    launched = np.zeros(len(annotations))
    for thread, positions in annotations.groupby("thread", sort=False).indices.items():
        process = thread.partition(":")[0]
        mine = np.flatnonzero(processes == process if main.get(process) == thread
                              else threads == thread)
        order = mine[np.argsort(starts[mine], kind="stable")]
        at = starts[order]
        cumulative = np.concatenate(([0.0], np.cumsum(per_call[order])))
        opened = annotations["ts"].to_numpy(float)[positions]
        closed = opened + annotations["dur"].to_numpy(float)[positions]
        launched[positions] = (cumulative[np.searchsorted(at, closed, side="right")]
                               - cumulative[np.searchsorted(at, opened, side="left")])
    return launched


def _annotation_rows(trace: ChromeTrace, device: pd.DataFrame,
                     runtime: pd.DataFrame) -> list[list[Any]]:
    """Steps (ProfilerStep#N) and regions (record_function, pa.region), with parent paths,
    host time, and the device time launched inside them (total and self)."""
    scale = trace.seconds_per_unit
    annotations = _frame(trace.columns.annotations, ["name", "thread", "ts", "dur"])
    if annotations.empty:
        return []
    annotations = annotations.sort_values(["thread", "ts", "dur"], ascending=[True, True, False],
                                          kind="stable", ignore_index=True)
    has_device = not device.empty
    launched = _launched_within(annotations, device, runtime) * scale if has_device else None
    children_gpu = np.zeros(len(annotations))
    keys: list[tuple[str, str, str]] = []  # (scope, name, parent) of each annotation
    stack: list[tuple[str, float, str, int]] = []  # (thread, end, path, position)
    for position, (name, thread, ts, dur) in enumerate(annotations.itertuples(index=False)):
        if name.startswith(STEP_PREFIX):
            keys.append(("step", "ProfilerStep", ""))
            continue
        while stack and (stack[-1][0] != thread or stack[-1][1] <= ts):
            stack.pop()
        parent = stack[-1][2] if stack else ""
        if stack and has_device:
            children_gpu[stack[-1][3]] += launched[position]
        keys.append(("region", name, parent))
        stack.append((thread, ts + dur, region_path(parent, name), position))

    annotations["key"] = keys
    rows = []
    for (scope, name, parent), group in annotations.groupby("key", sort=False):
        samples = group["dur"].to_numpy(float) * scale
        rows.append(row(scope, name, "calls", len(samples), parent=parent))
        rows += [row(scope, name, "wall_time", value, stat=stat, parent=parent)
                 for stat, value in summarize(list(samples)).items()]
        if has_device:
            total = launched[group.index].sum()
            rows += [row(scope, name, "gpu_time", total, parent=parent),
                     row(scope, name, "gpu_time", total / len(group), stat="mean",
                         parent=parent)]
            if scope == "region":
                rows.append(row(scope, name, "self_gpu_time",
                                total - children_gpu[group.index].sum(), parent=parent))
    parents: dict[str, set[str]] = {}
    for scope, name, parent in keys:
        if scope == "region":
            parents.setdefault(name, set()).add(parent)
    return rows + _span_rows(trace, parents)


def _span_rows(trace: ChromeTrace, parents: dict[str, set[str]]) -> list[list[Any]]:
    """`gpu_span` of each region: what Kineto's gpu_user_annotation spans on the device,
    from its first kernel's start to its last one's end (idle gaps included). Its rows
    carry the region's parent path when the region has only one."""
    spans: dict[str, list[float]] = {}
    for name, dur in trace.columns.gpu_annotations:
        if not name.startswith(STEP_PREFIX):
            spans.setdefault(name, []).append(dur * trace.seconds_per_unit)
    rows = []
    for name, samples in spans.items():
        known = parents.get(name, {""})
        parent = next(iter(known)) if len(known) == 1 else ""
        rows += [row("region", name, "gpu_span", sum(samples), parent=parent),
                 row("region", name, "gpu_span", sum(samples) / len(samples), stat="mean",
                     parent=parent)]
    return rows


def trace_rows(trace: ChromeTrace) -> list[list[Any]]:
    """Every row a chrome trace gives, in the report's MEASURED column order."""
    columns, scale = trace.columns, trace.seconds_per_unit
    rows = [row("run", "trace", "events", columns.events, unit="count")]
    spans = [(event[2], event[2] + event[3]) for event in columns.annotations]
    device, runtime = _linked(trace)
    if columns.ops:
        ops = operator_frame(trace)
        spans.append((ops["ts"].min(), (ops["ts"] + ops["dur"]).max()))
        rows += _operator_rows(ops, has_device=not device.empty)
        unattributed = ops.attrs["unattributed"]
    else:
        unattributed = device["dur"].sum() * scale
    if spans:  # host time from the first operator or region to the last
        first, last = min(s[0] for s in spans), max(s[1] for s in spans)
        rows.insert(1, row("run", "trace", "wall_time", (last - first) * scale))
    if not device.empty:
        busy = device["dur"].sum() * scale
        rows.append(row("run", "trace", "gpu_time", busy))
        rows.append(row("run", "trace", "attributed_share",
                        1 - unattributed / busy if busy > 0 else 1.0, stat="value"))
        rows += _device_rows(device, scale)
    rows += _api_rows(runtime, scale)
    return rows + _annotation_rows(trace, device, runtime)
