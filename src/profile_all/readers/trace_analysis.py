"""A chrome trace's columns -> report rows: operators, kernels, copies, CUDA API calls,
steps and regions.

Nesting and device time per operator: trace_links.

Steps' statistics leave out ProfilerStep#0 and the steps that compiled (compile_ranges);
their calls and total keep them.

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

from profile_all.readers import intervals, nesting
from profile_all.readers.chrome_trace import STEP_PREFIX, ChromeTrace
from profile_all.readers.compile_ranges import left_out_steps
from profile_all.readers.device_time import device_time_rows
from profile_all.readers.gpu_metrics import gpu_rows, gpu_timeline
from profile_all.readers.host_communication import host_communication_rows
from profile_all.readers.kernel_rows import device_rows
from profile_all.readers.module_rows import module_rows
from profile_all.readers.operator_memory import memory_curve, operator_memory_rows
from profile_all.readers.operator_tree import operator_tree_rows
from profile_all.readers.python_stacks import call_stacks, stacks_said
from profile_all.readers.step_time import launched_in_steps, overview_span, step_rows
from profile_all.readers.trace_links import columns_frame, linked, operator_frame
from profile_all.rows import UNATTRIBUTED, region_path, row
from profile_all.stats import summarize


def _sums(ops: pd.DataFrame, by: str | list[str], columns: list[str]) -> pd.DataFrame:
    """Per group of `by`, in order of first appearance: `calls` (its size), then the sum of
    each of `columns` (one groupby sum: a named aggregation per column took 5x longer)."""
    grouped = ops.groupby(by, sort=False)
    totals = grouped[columns].sum()
    totals.insert(0, "calls", grouped.size())
    return totals


def _operator_rows(ops: pd.DataFrame, has_device: bool) -> list[list[Any]]:
    rows = []
    metrics = ["cpu_time", "self_time"] + (["gpu_time", "self_gpu_time", "tc_gpu_time",
                                             "tc_self_gpu_time", "tc_eligible"]
                                            if has_device else [])
    totals = _sums(ops, "name", ["flops", *metrics])
    if has_device:  # eligible where any call was (not a count of calls)
        totals["tc_eligible"] = totals["tc_eligible"].clip(upper=1.0)
    for name, calls, flops, *values in totals.itertuples():  # (iterrows: 40% of a read)
        rows.append(row("operator", name, "calls", calls))
        rows += [row("operator", name, metric, value)
                 for metric, value in zip(metrics, values, strict=True)]
        rows.append(row("operator", name, "cpu_time", values[0] / calls, stat="mean"))
        if flops > 0:
            rows.append(row("operator", name, "flops", flops))
    unattributed = ops.attrs.get("unattributed", 0.0)
    if has_device and unattributed > 0:
        rows += [row("operator", UNATTRIBUTED, "gpu_time", unattributed),
                 row("operator", UNATTRIBUTED, "self_gpu_time", unattributed)]
    for scope, column in (("operator_shape", "input_dims"), ("operator_stack", "call_stack")):
        known = ops[ops[column].notna()] if column in ops.columns else ops.iloc[:0]
        if known.empty:
            continue
        by_group = _sums(known, ["name", column], metrics[:4])
        for (name, group), calls, *values in by_group.itertuples():
            rows.append(row(scope, name, "calls", calls, parent=group))
            rows += [row(scope, name, metric, value, parent=group)
                     for metric, value in zip(metrics[:4], values, strict=True)]
    return rows


def _busy_row(device: pd.DataFrame, scale: float) -> list[Any]:
    """How long the device was busy: the union over streams, not the sum (what the steps
    launched, split by type, is device_time.py's)."""
    starts = device["ts"].to_numpy(float)
    ends = starts + device["dur"].to_numpy(float)
    return row("run", "trace", "gpu_busy", intervals.union_length(starts, ends) * scale)


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
    main thread waits inside `backward` while autograd's thread launches its kernels).
    Without runtime calls in the trace no kernel is known to be launched by anything."""
    if runtime.empty:
        return np.zeros(len(annotations))
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


def _annotation_rows(trace: ChromeTrace, annotations: pd.DataFrame, device: pd.DataFrame,
                     runtime: pd.DataFrame, doubts: list[str]) -> list[list[Any]]:
    """Steps (ProfilerStep#N) and regions (record_function, pa.region), with parent paths,
    host time, and the device time launched inside them (total and self); regions beyond
    nesting.MAX_REGION_PATH_CHARS of paths are left out, said in `doubts`."""
    scale = trace.seconds_per_unit
    if annotations.empty:
        return []
    annotations = annotations.sort_values(["thread", "ts", "dur"], ascending=[True, True, False],
                                          kind="stable", ignore_index=True)
    launched = _launched_within(annotations, device, runtime) * scale \
        if not device.empty else None
    keys, children_gpu = _nest(annotations, launched)
    left_out = left_out_steps(annotations)
    durations = annotations["dur"].to_numpy(float) * scale
    bounded = nesting.bounded_paths([name for _s, name, _p in keys],
                                    [parent for _s, _n, parent in keys])
    doubts += nesting.paths_said(trace.path, int((~bounded).sum()), "annotation")
    groups: dict[tuple[str, str, str], list[int]] = {}  # (in order of first appearance)
    for position, key in enumerate(keys):
        if bounded[position]:
            groups.setdefault(key, []).append(position)
    rows = []
    for (scope, name, parent), positions in groups.items():
        samples = durations[positions]
        rows.append(row(scope, name, "calls", len(samples), parent=parent))
        kept = samples[~left_out[positions]] if scope == "step" else samples
        if scope == "step":  # every step counted; its statistics without the left out
            rows.append(row(scope, name, "excluded_calls", len(samples) - len(kept)))
        stats = {**summarize(list(kept if len(kept) else samples)),
                 "total": float(samples.sum())}
        rows += [row(scope, name, "wall_time", value, stat=stat, parent=parent)
                 for stat, value in stats.items()]
        if launched is not None:
            rows += _launched_rows(scope, name, parent, launched[positions],
                                   children_gpu[positions])
    parents: dict[str, set[str]] = {}
    for scope, name, parent in keys:
        if scope == "region":
            parents.setdefault(name, set()).add(parent)
    return rows + _span_rows(trace, parents)


def _nest(annotations: pd.DataFrame, launched: np.ndarray | None
          ) -> tuple[list[tuple[str, str, str]], np.ndarray]:
    """(scope, name, parent path) of each annotation (sorted by thread and start), each
    region inside the innermost one of its thread still open; and per annotation, the
    device time its child regions launched."""
    children_gpu = np.zeros(len(annotations))
    keys: list[tuple[str, str, str]] = []
    stack: list[tuple[str, float, str, int]] = []  # (thread, end, path, position)
    for position, (name, thread, ts, dur) in enumerate(annotations.itertuples(index=False)):
        if name.startswith(STEP_PREFIX):
            keys.append(("step", "ProfilerStep", ""))
            continue
        while stack and (stack[-1][0] != thread or stack[-1][1] <= ts):
            stack.pop()
        parent = stack[-1][2] if stack else ""
        if stack and launched is not None:
            children_gpu[stack[-1][3]] += launched[position]
        keys.append(("region", name, parent))
        stack.append((thread, ts + dur, region_path(parent, name), position))
    return keys, children_gpu


def _launched_rows(scope: str, name: str, parent: str, launched: np.ndarray,
                 children: np.ndarray) -> list[list[Any]]:
    """The device time launched inside an annotation's calls: total, mean per call, and a
    region's own (less its child regions')."""
    total = launched.sum()
    rows = [row(scope, name, "gpu_time", total, parent=parent),
            row(scope, name, "gpu_time", total / len(launched), stat="mean", parent=parent)]
    if scope == "region":
        rows.append(row(scope, name, "self_gpu_time", total - children.sum(), parent=parent))
    return rows


def _span_rows(trace: ChromeTrace, parents: dict[str, set[str]]) -> list[list[Any]]:
    """`gpu_span` of each region: what Kineto's gpu_user_annotation spans on the device,
    from its first kernel's start to its last one's end (idle gaps included), total and
    statistics over its calls (HTA's user-annotation breakdown on the device). Its rows
    carry the region's parent path when the region has only one."""
    spans: dict[str, list[float]] = {}
    for name, dur in trace.columns.gpu_annotations:
        if not name.startswith(STEP_PREFIX):
            spans.setdefault(name, []).append(dur * trace.seconds_per_unit)
    rows = []
    for name, samples in spans.items():
        known = parents.get(name, {""})
        parent = next(iter(known)) if len(known) == 1 else ""
        rows += [row("region", name, "gpu_span", value, stat=stat, parent=parent)
                 for stat, value in summarize(samples).items()]
    return rows


def _device_totals(device: pd.DataFrame, unattributed: float, scale: float
                   ) -> list[list[Any]]:
    """The trace's device time summed, its union over streams, and the share of it that
    reached an operator."""
    busy = device["dur"].sum() * scale
    return [row("run", "trace", "gpu_time", busy), _busy_row(device, scale),
            row("run", "trace", "attributed_share",
                1 - unattributed / busy if busy > 0 else 1.0, stat="value")]


def _over_time(trace: ChromeTrace, device: pd.DataFrame) -> list[list[Any]]:
    """The timeline's GPU metrics, memory and steps, in seconds since the trace's start
    (the profiler's own span's, else its first event's)."""
    extent = trace.extent()
    steps = [(name, ts, dur) for name, _thread, ts, dur in trace.columns.annotations
             if name.startswith(STEP_PREFIX)]
    return gpu_timeline(device, extent, trace.seconds_per_unit) + memory_curve(
        trace.columns.memory, steps, trace.seconds_per_unit, extent[0])


def trace_rows(trace: ChromeTrace, timeline: list[list[Any]] | None = None,
               doubts: list[str] | None = None) -> list[list[Any]]:
    """Every row a chrome trace gives, in the report's MEASURED column order; `timeline`,
    where given, gets its entries over time (rows.TIMELINE_COLUMNS less the first three):
    the GPU metrics, memory allocated and reserved, the steps, in seconds since the trace's
    start (ChromeTrace.extent); `doubts` what was left out as the rows were made."""
    columns, scale = trace.columns, trace.seconds_per_unit
    doubts = doubts if doubts is not None else []
    rows = [row("run", "trace", "events", columns.events, unit="count")]
    spans = [(event[2], event[2] + event[3]) for event in columns.annotations]
    device, runtime = linked(trace)
    if columns.ops:
        ops = operator_frame(trace, (device, runtime))
        stacks, left_out = call_stacks(columns.frames, ops)  # (torch 2 with_stack)
        ops["call_stack"] = ops["call_stack"].where(ops["call_stack"].notna(), stacks)
        doubts += stacks_said(trace.path, left_out)
        tree, said = operator_tree_rows(ops, trace.path)
        rows += tree
        doubts += said  # (the caller's list)
        spans.append((ops["ts"].min(), (ops["ts"] + ops["dur"]).max()))
        rows += _operator_rows(ops, has_device=not device.empty)
        rows += operator_memory_rows(ops, columns.memory)
        rows += module_rows(columns.modules, ops, scale)
        unattributed = ops.attrs["unattributed"]
    else:
        ops = columns_frame([], ["name", "thread", "ts", "dur"])
        unattributed = device["dur"].sum() * scale
    if spans:  # host time from the first operator or region to the last
        first, last = min(s[0] for s in spans), max(s[1] for s in spans)
        rows.insert(1, row("run", "trace", "wall_time", (last - first) * scale))
    annotations = columns_frame(columns.annotations, ["name", "thread", "ts", "dur"])
    if not device.empty:
        rows += _device_totals(device, unattributed, scale)
        rows += device_rows(device, ops if columns.ops else None, scale) + device_time_rows(
            launched_in_steps(annotations, device, runtime), runtime, scale)
    rows += _api_rows(runtime, scale)
    rows += step_rows(annotations, ops, device, runtime, scale)
    rows += gpu_rows(device, overview_span(annotations, ops, device, runtime),
                     trace.meta.get("deviceProperties") or [], scale)
    if timeline is not None and (spans or not device.empty):
        timeline += _over_time(trace, device)
    rows += host_communication_rows(annotations, ops, scale)
    return rows + _annotation_rows(trace, annotations, device, runtime, doubts)
