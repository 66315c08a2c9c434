"""The memory view of TensorBoard's profiler plugin, from a trace recorded with memory
(`profile_memory=True`: a `[memory]` instant per allocation and free).

Per operator and device (scope `operator_memory`, `parent` the device: `CPU`, `GPU0`), as
the plugin's MemorySnapshot counts them: an allocation or free belongs to the innermost
operator of its thread that holds its time (an operator's end not included); its
`self_increase` is the bytes it allocated less those it freed, `self_allocated` the bytes
it allocated, `self_allocations` how many times; `increase`, `allocated` and
`allocations` add those of the operators inside it; `calls` are the operator's calls.
An operator of no memory record on a device has no row for it. `Optimizer.*`, the
DataLoader's `__next__` and `(Distributed)DataParallel.forward` are not operators here, as in
the plugin: what they allocate themselves counts in none, nor what lies outside every
operator.

The curve of allocated and reserved memory per device over time goes to the timeline
(series `memory:<device>`, `allocated` and `reserved`, bytes).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from profile_all.readers.trace_links import enclosing
from profile_all.rows import row

#: ranges the plugin does not take for operators in this view (its is_operator_node)
_NOT_OPERATORS = ("Optimizer.", "enumerate(DataPipe)#")
_NOT_OPERATOR_NAMES = ["DataParallel.forward", "DistributedDataParallel.forward"]
_RECORD_COLUMNS = ["thread", "ts", "device", "bytes", "allocated", "reserved"]
METRICS = ["self_increase", "self_allocated", "self_allocations", "increase", "allocated",
           "allocations"]


def _owners(ops: pd.DataFrame, records: pd.DataFrame) -> np.ndarray:
    """Per record, the position in `ops` of the innermost operator holding it, or -1."""
    owner = np.full(len(records), -1)
    ts, end = ops["ts"].to_numpy(float), (ops["ts"] + ops["dur"]).to_numpy(float)
    parent = ops["parent"].to_numpy()
    threads = ops.groupby("thread", sort=False).indices
    for thread, mine in records.groupby("thread", sort=False).indices.items():
        positions = threads.get(thread)
        if positions is None:
            continue
        first, stop = positions[0], positions[-1] + 1
        local_parent = np.where(parent[first:stop] >= 0, parent[first:stop] - first, -1)
        found = enclosing(ts[first:stop], end[first:stop], local_parent,
                          records["ts"].to_numpy(float)[mine], end_holds=False)
        owner[mine] = np.where(found >= 0, found + first, -1)
    return owner


def operator_memory_rows(ops: pd.DataFrame, memory: list[tuple]) -> list[list[Any]]:
    """`ops`: trace_links.operator_frame (sorted by thread and time, with parents)."""
    records = pd.DataFrame(memory, columns=_RECORD_COLUMNS).dropna(subset=["ts", "bytes"])
    if records.empty or ops.empty:
        return []
    names = ops["name"]
    counted = ~(names.str.startswith(_NOT_OPERATORS) | names.isin(_NOT_OPERATOR_NAMES)
                | (names.str.startswith("enumerate(DataLoader)#")
                   & names.str.endswith(".__next__"))).to_numpy()
    owner = _owners(ops, records)
    owner = np.where((owner >= 0) & counted[owner.clip(min=0)], owner, -1)
    size, depth = records["bytes"].to_numpy(float), ops["depth"].to_numpy()
    parent = ops["parent"].to_numpy()
    rows = []
    for device, mine in records.groupby("device", sort=True).indices.items():
        held = owner[mine] >= 0
        who, amount = owner[mine][held], size[mine][held]
        own = np.zeros((3, len(ops)))
        np.add.at(own[0], who, amount)
        np.add.at(own[1], who, np.where(amount > 0, amount, 0.0))
        np.add.at(own[2], who, (amount > 0).astype(float))
        total = own.copy()
        for level in range(int(depth.max(initial=0)), 0, -1):  # deepest first: sums go up
            here = np.flatnonzero((depth == level) & (parent >= 0))
            for metric in range(3):
                np.add.at(total[metric], parent[here], total[metric][here])
        table = pd.DataFrame(np.vstack([own, total]).T, columns=METRICS)
        table["name"] = ops["name"].to_numpy()
        table = table[counted].groupby("name", sort=False).sum()
        calls = ops[counted].groupby("name", sort=False).size()
        table = table[(table != 0).any(axis=1)]
        for name, values in table.iterrows():
            rows += [row("operator_memory", name, metric, values[metric], parent=device,
                         unit="count" if metric.endswith("allocations") else "B")
                     for metric in METRICS]
            rows.append(row("operator_memory", name, "calls", calls[name], parent=device))
    return rows


def memory_curve(memory: list[tuple], steps: list[tuple], scale: float,
                 origin: float) -> list[list[Any]]:
    """The timeline's `memory:<device>` series (allocated and reserved bytes at each
    record) and its `step` bands (each ProfilerStep range: name, start, end), in seconds
    since `origin`; `steps`: (name, start, duration) in the trace's unit."""
    if not memory:  # the steps shade the memory curve: none without one
        return []
    records = pd.DataFrame(memory, columns=_RECORD_COLUMNS).dropna(subset=["ts"])
    entries = [["step", name, (start - origin) * scale, (start + length - origin) * scale,
                float("nan"), "s"] for name, start, length in steps]
    for device, one in records.sort_values("ts", kind="stable").groupby("device", sort=True):
        at = (one["ts"].to_numpy(float) - origin) * scale
        for name in ("allocated", "reserved"):
            values = one[name].to_numpy(float)
            keep = ~np.isnan(values)
            entries += [[f"memory:{device}", name, moment, moment, value, "B"]
                        for moment, value in zip(at[keep], values[keep], strict=True)]
    return entries
