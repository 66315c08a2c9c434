"""The analyses people open Holistic Trace Analysis (HTA) and TensorBoard's profiler plugin
for, per rank and per step, each a DataFrame from the rows a trace gave (readers/
device_time.py and step_time.py say how each is measured and how it differs from HTA).

A rank's rows may come from several passes (an ingest of two files of one rank): each
(pass, rank) is a row of its own.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from profile_all.readers.device_time import kernel_type

if TYPE_CHECKING:
    from profile_all.report.run_data import RunData

DEVICE_TYPES = ["computation", "communication", "memory", "other"]
STEP_CATEGORIES = ["kernel", "memcpy", "memset", "communication", "runtime", "data_loader",
                   "cpu", "other"]
_KEYS = ["pass", "rank"]


def _in_order(table: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    """`table` sorted by `by`, a step (`ProfilerStep#10`) by its number, not its text."""
    if "step" not in by:
        return table.sort_values(by, ignore_index=True)
    number = pd.to_numeric(table["step"].str.extract(r"(\d+)$")[0], errors="coerce")
    keys = [column if column != "step" else "_number" for column in by]
    return table.assign(_number=number).sort_values([*keys, "step"], ignore_index=True) \
        .drop(columns="_number")


def _scope(frame: pd.DataFrame, scope: str) -> pd.DataFrame:
    return frame[(frame["scope"] == scope)]


def _summed(rows: pd.DataFrame, index: list[str], column: str) -> pd.DataFrame:
    """`rows.pivot_table(index, column, "value", aggfunc="sum")`, its columns unnamed: made
    by a groupby sum, in a third of pivot_table's time on a report's small tables."""
    table = rows.groupby([*index, column])["value"].sum().unstack(column)
    table.columns.name = None
    return table


def _wide(rows: pd.DataFrame, index: list[str], columns: list[str]) -> pd.DataFrame:
    return _summed(rows, index, "name").reindex(columns=columns).fillna(0.0).reset_index()


def device_time(frame: pd.DataFrame, per_step: bool = False) -> pd.DataFrame:
    """Per rank (and per step: the `step` column), the device's time by type as a union
    over streams, idle, the span they split, and the shares of the span HTA gives (idle,
    computation, non-computation: communication, memory and other)."""
    rows = _scope(frame, "device_time")
    rows = rows[(rows["parent"] != "") == per_step].rename(columns={"parent": "step"})
    index = [*_KEYS, "step"] if per_step else _KEYS
    columns = ["rank", *(["step"] if per_step else []), *DEVICE_TYPES, "idle", "span",
               "idle_share", "computation_share", "non_computation_share", "pass"]
    if rows.empty:
        return pd.DataFrame(columns=columns)
    table = _wide(rows, index, [*DEVICE_TYPES, "idle", "span"])
    span = table["span"].where(table["span"] > 0)
    table["idle_share"] = table["idle"] / span
    table["computation_share"] = table["computation"] / span
    table["non_computation_share"] = table[DEVICE_TYPES[1:]].sum(axis=1) / span
    return _in_order(table, ["rank", *index[2:], "pass"])[columns]


def step_time(frame: pd.DataFrame) -> pd.DataFrame:
    """Per rank and step, TensorBoard's step time breakdown: kernel, memcpy, memset,
    runtime, data loader, CPU execution, other (each moment counted once) and the step."""
    rows = _scope(frame, "step_time").rename(columns={"parent": "step"})
    columns = ["rank", "step", *STEP_CATEGORIES, "step_time", "pass"]
    if rows.empty:
        return pd.DataFrame(columns=columns)
    table = _wide(rows, [*_KEYS, "step"], STEP_CATEGORIES)
    table["step_time"] = table[STEP_CATEGORIES].sum(axis=1)
    return _in_order(table, ["rank", "step", "pass"])[columns]


def kernel_types(frame: pd.DataFrame) -> pd.DataFrame:
    """Per rank, the device time by the types busy together (computation, communication,
    memory, and their combinations), and each one's share, as HTA's kernel breakdown."""
    rows = _scope(frame, "kernel_type")
    rows = rows[rows["parent"] == ""]
    columns = ["rank", "kernel_type", "gpu_time", "share", "pass"]
    if rows.empty:
        return pd.DataFrame(columns=columns)
    table = rows.groupby([*_KEYS, "name"], sort=False)["value"].sum().reset_index()
    table = table.rename(columns={"name": "kernel_type", "value": "gpu_time"})
    table["share"] = table["gpu_time"] / table.groupby(_KEYS)["gpu_time"].transform("sum")
    return table.sort_values(["rank", "pass", "gpu_time"], ascending=[True, True, False],
                             ignore_index=True)[columns]


def overlap(frame: pd.DataFrame, per_step: bool = False) -> pd.DataFrame:
    """Per rank (and step): the communication's time (a union) and how much of it
    computation overlapped, and that share (HTA's comp_comm_overlap): NCCL kernels against
    computation kernels on the device (`on` device), else gloo's collectives against the
    process's operators on the host (`on` host, the whole trace only)."""
    rows = _scope(frame, "kernel_type")
    rows = rows[(rows["parent"] != "") == per_step].rename(columns={"parent": "step"})
    index = [*_KEYS, "step"] if per_step else _KEYS
    columns = ["rank", *(["step"] if per_step else []), "on", "communication", "overlapped",
               "overlap_share", "pass"]
    talking = rows[rows["name"].str.contains("communication")]
    table = talking.groupby(index)["value"].sum().rename("communication").to_frame()
    table["overlapped"] = talking[talking["name"].str.contains("computation")].groupby(
        index)["value"].sum()
    table = table.fillna(0.0).reset_index().assign(on="device")
    host = _scope(frame, "host_communication")
    if not per_step and not host.empty:
        host = _summed(host, _KEYS, "metric")
        host = host.rename(columns={"communication_time": "communication",
                                    "communication_overlap": "overlapped"}).reset_index()
        host = host[~host.set_index(_KEYS).index.isin(table.set_index(_KEYS).index)]
        table = pd.concat([table, host.assign(on="host")], ignore_index=True)
    if table.empty:
        return pd.DataFrame(columns=columns)
    table["overlap_share"] = table["overlapped"] / table["communication"].where(
        table["communication"] > 0)
    return _in_order(table, ["rank", *index[2:], "pass"])[columns]


def top_kernels(frame: pd.DataFrame, top: int = 5) -> pd.DataFrame:
    """Per rank, its `top` kernels by device time, each with its type and its share of
    the rank's kernel time."""
    rows = frame[(frame["scope"] == "kernel") & (frame["stat"] == "total")
                 & frame["metric"].isin(["calls", "gpu_time"])]
    columns = ["rank", "name", "type", "calls", "gpu_time", "share", "pass"]
    if rows.empty or rows["rank"].nunique() < 1:
        return pd.DataFrame(columns=columns)
    table = _summed(rows, [*_KEYS, "name"], "metric").reset_index()
    table = table.reindex(columns=[*_KEYS, "name", "calls", "gpu_time"]).fillna(0.0)
    table["share"] = table["gpu_time"] / table.groupby(_KEYS)["gpu_time"].transform("sum")
    table["type"] = [kernel_type(name, "kernel") for name in table["name"]]
    table["calls"] = table["calls"].astype("int64")
    table = table.sort_values(["rank", "pass", "gpu_time"], ascending=[True, True, False])
    return table.groupby(_KEYS, sort=False).head(top).reset_index(drop=True)[columns]


def launches(frame: pd.DataFrame) -> pd.DataFrame:
    """Per rank and runtime call (cudaLaunchKernel...), HTA's launch statistics: calls,
    the mean CPU time of a call and device time of what it launched, the launch delay
    (mean, median, max), and the outliers: activities shorter than their launch, calls
    over 50 µs, delays over 100 µs."""
    rows = _scope(frame, "launch")
    columns = ["rank", "name", "calls", "cpu_mean", "gpu_mean", "delay_mean", "delay_median",
               "delay_max", "short_kernels", "slow_launches", "late_launches", "pass"]
    if rows.empty:
        return pd.DataFrame(columns=columns)
    keyed = rows.assign(measure=np.where(rows["metric"] == "launch_delay",
                                         "delay_" + rows["stat"], rows["metric"]))
    table = _summed(keyed, [*_KEYS, "name"], "measure").reset_index()
    table["cpu_mean"] = table["wall_time"] / table["calls"]
    table["gpu_mean"] = table["gpu_time"] / table["calls"]
    return table.sort_values(["rank", "pass", "calls"], ascending=[True, True, False],
                             ignore_index=True)[columns]


def idle_streams(frame: pd.DataFrame) -> pd.DataFrame:
    """Per rank and stream, its busy time and its idle gaps by cause, HTA's idle time
    breakdown: host wait, kernel wait, other, and the share of the idle time each is."""
    rows = _scope(frame, "stream")
    waits = ["host_wait", "kernel_wait", "other_wait"]
    columns = ["rank", "stream", "busy", *waits, "host_share", "kernel_share", "other_share",
               "pass"]
    if rows.empty:
        return pd.DataFrame(columns=columns)
    table = _summed(rows, [*_KEYS, "name"], "metric").reset_index()
    table = table.rename(columns={"name": "stream", "gpu_busy": "busy"})
    idle = table[waits].sum(axis=1).where(lambda total: total > 0)
    for wait, share in zip(waits, columns[6:9], strict=True):
        table[share] = table[wait] / idle
    return table.sort_values(["rank", "pass", "busy"], ascending=[True, True, False],
                             ignore_index=True)[columns]


def stragglers(frame: pd.DataFrame) -> pd.DataFrame:
    """Per step that two ranks or more ran: each rank's step time, computation and
    communication (device time by type, where the trace has a device), the slowest
    rank, and how far the slowest and the median rank are apart (spread: (max - median)
    / median); the rank that computed the most, which the others wait for in their
    collectives."""
    steps = step_time(frame)
    columns = ["step", "ranks", "median", "max", "slowest_rank", "spread",
               "most_computation_rank", "computation_spread"]
    if steps.empty or steps["rank"].nunique() < 2:
        return pd.DataFrame(columns=columns)
    device = device_time(frame, per_step=True)
    merged = steps.merge(device[["rank", "step", "pass", "computation"]],
                         on=["rank", "step", "pass"], how="left")
    out = []
    for step, group in merged.groupby("step", sort=False):  # (in step_time's order)
        if group["rank"].nunique() < 2:
            continue
        median = group["step_time"].median()
        slowest = group.loc[group["step_time"].idxmax()]
        computing = group["computation"].dropna()
        busiest = group.loc[computing.idxmax()] if not computing.empty else None
        out.append({"step": step, "ranks": group["rank"].nunique(), "median": median,
                    "max": slowest["step_time"], "slowest_rank": int(slowest["rank"]),
                    "spread": (slowest["step_time"] - median) / median if median else np.nan,
                    "most_computation_rank": int(busiest["rank"]) if busiest is not None
                    else None,
                    "computation_spread": (busiest["computation"] - computing.median())
                    / computing.median() if busiest is not None and computing.median() > 0
                    else np.nan})
    return pd.DataFrame(out, columns=columns)


GPU_METRICS = ["utilization", "sm_efficiency", "occupancy", "tensor_core_share", "gpu_time",
               "total_memory", "compute_capability"]


def gpu_metrics(frame: pd.DataFrame) -> pd.DataFrame:
    """Per rank and device, TensorBoard's GPU summary (readers/gpu_metrics.py): utilization,
    estimated SM efficiency and achieved occupancy, the Tensor Core share of kernel time,
    kernel time, and the device's name, memory and compute capability where the trace
    has them (NaN where it has not)."""
    rows = _scope(frame, "gpu").rename(columns={"name": "device"})
    columns = ["rank", "device", "model", *GPU_METRICS, "pass"]
    if rows.empty:
        return pd.DataFrame(columns=columns)
    models = rows[rows["metric"] == "device_model"].set_index([*_KEYS, "device"])["stat"]
    table = _summed(rows[rows["metric"] != "device_model"], [*_KEYS, "device"], "metric")
    table = table.reindex(columns=GPU_METRICS)
    table["model"] = models.reindex(table.index)
    return _in_order(table.reset_index(), ["rank", "device", "pass"])[columns]


OPERATOR_MEMORY = ["calls", "self_increase", "self_allocated", "self_allocations",
                   "increase", "allocated", "allocations"]


def operator_memory(frame: pd.DataFrame) -> pd.DataFrame:
    """Per rank, device and operator, TensorBoard's memory view (readers/operator_memory.py):
    bytes allocated less freed, allocated, and allocations, its own and with the operators
    inside it; most bytes allocated (with those inside) first."""
    rows = _scope(frame, "operator_memory").rename(columns={"parent": "device",
                                                            "name": "operator"})
    columns = ["rank", "device", "operator", *OPERATOR_MEMORY, "pass"]
    if rows.empty:
        return pd.DataFrame(columns=columns)
    table = _summed(rows, [*_KEYS, "device", "operator"], "metric")
    table = table.reindex(columns=OPERATOR_MEMORY).reset_index()
    return table.sort_values(["rank", "device", "allocated", "operator"],
                             ascending=[True, True, False, True], ignore_index=True)[columns]


MODULE_VIEW = ["calls", "operators", "cpu_time", "self_time", "gpu_time", "self_gpu_time"]


def module_view(frame: pd.DataFrame) -> pd.DataFrame:
    """Per rank, TensorBoard's module view of a trace recorded with modules (readers/
    module_rows.py): each module under the path of those around it, in the tree's order
    (depth first, by name), its calls, operators directly inside it, host and device time,
    own and total, and `mean` (a call's device time, else its host time, as the plugin)."""
    rows = _scope(frame, "trace_module")
    columns = ["rank", "module", "path", "depth", *MODULE_VIEW, "mean", "pass"]
    if rows.empty:
        return pd.DataFrame(columns=columns)
    table = _summed(rows, [*_KEYS, "parent", "name"], "metric")
    table = table.reindex(columns=MODULE_VIEW).fillna(0.0).reset_index()
    table["path"] = [f"{parent}/{name}" if parent else name
                     for parent, name in zip(table["parent"], table["name"], strict=True)]
    table["depth"] = table["path"].str.count("/")
    table["mean"] = (table["gpu_time"].where(table["gpu_time"] > 0, table["cpu_time"])
                     / table["calls"])
    table = table.rename(columns={"name": "module"})
    return table.sort_values(["rank", "pass", "path"], ignore_index=True)[columns]


#: each view, and the scopes of the rows it reads
_VIEWS = {device_time: ("device_time",), step_time: ("step_time",),
          kernel_types: ("kernel_type",), overlap: ("kernel_type", "host_communication"),
          top_kernels: ("kernel",), launches: ("launch",), idle_streams: ("stream",),
          stragglers: ("step_time", "device_time"), gpu_metrics: ("gpu",),
          operator_memory: ("operator_memory",), module_view: ("trace_module",)}
_BY_NAME = {view.__name__: (view, scopes) for view, scopes in _VIEWS.items()}


def of(data: RunData, view: str, *args: object) -> pd.DataFrame:
    """`view(rows, *args)` of the rows of the scopes it reads, made once per frame: the
    Report's methods, the findings and the sections share it (each asks several times)."""
    compute, scopes = _BY_NAME[view]
    return data.once(f"{view}{args}", lambda: compute(data.scoped(*scopes), *args))
