"""The trace analyses (report/trace_analyses.py) and memory by what holds it
(report/held_memory.py) as display tables, one function a view.

A `pass` column is shown only where one rank's rows come from several passes (an ingest
of two files of one rank)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pandas as pd

from profile_all import units as fmt

if TYPE_CHECKING:
    from profile_all.report.report import Report


def _shown(table: pd.DataFrame, columns: dict[str, tuple[str, Callable[[Any], str]]]
           ) -> pd.DataFrame:
    """`columns`: source column -> (header, format)."""
    if table.empty:
        return pd.DataFrame()
    out = pd.DataFrame({"rank": table["rank"].astype(int).astype(str)})
    if table.groupby("rank")["pass"].nunique().gt(1).any():
        out["pass"] = table["pass"].astype(int).astype(str)
    for column, (header, form) in columns.items():
        out[header] = table[column].map(form)
    return out


def device_time_table(report: Report) -> pd.DataFrame:
    table = report.device_time()
    return _shown(table, {
        "computation": ("computation", fmt.seconds),
        "communication": ("communication", fmt.seconds),
        "memory": ("memory", fmt.seconds), "other": ("other", fmt.seconds),
        "idle": ("idle", fmt.seconds), "span": ("span", fmt.seconds),
        "idle_share": ("idle %", fmt.share),
        "computation_share": ("computation %", fmt.share),
        "non_computation_share": ("non-computation %", fmt.share)})


def gpu_metrics_table(report: Report) -> pd.DataFrame:
    table = report.gpu_metrics()
    return _shown(table, {
        "device": ("device", str), "model": ("model", _text),
        "utilization": ("utilization", fmt.share), "sm_efficiency": ("est. SM efficiency",
                                                                     fmt.share),
        "occupancy": ("est. occupancy", fmt.share),
        "tensor_core_share": ("Tensor Cores", fmt.share), "gpu_time": ("kernel time",
                                                                       fmt.seconds),
        "total_memory": ("memory", fmt.size), "compute_capability": ("compute", _capability)})


def _capability(value: Any) -> str:
    return "" if pd.isna(value) else f"{value:.1f}"


def _text(value: Any) -> str:
    return "" if pd.isna(value) else f"{value:.3g}" if isinstance(value, float) else str(value)


def step_time_table(report: Report) -> pd.DataFrame:
    """A trace with no device activity shows no device column (all zero)."""
    table = report.step_time()
    device = {"kernel": ("kernel", fmt.seconds), "memcpy": ("memcpy", fmt.seconds),
              "memset": ("memset", fmt.seconds), "communication": ("communication", fmt.seconds),
              "runtime": ("runtime", fmt.seconds)}
    if not table.empty and not table[list(device)].to_numpy().any():
        device = {}
    return _shown(table, {
        "step": ("step", str), "step_time": ("step time", fmt.seconds), **device,
        "data_loader": ("data loader", fmt.seconds), "cpu": ("CPU exec", fmt.seconds),
        "other": ("other", fmt.seconds)})


def overlap_table(report: Report) -> pd.DataFrame:
    table = report.overlap()
    return _shown(table, {
        "on": ("on", str), "communication": ("communication", fmt.seconds),
        "overlapped": ("overlapped by computation", fmt.seconds),
        "overlap_share": ("overlap %", fmt.share)})


def kernel_types_table(report: Report) -> pd.DataFrame:
    table = report.kernel_types()
    return _shown(table, {"kernel_type": ("busy", str), "gpu_time": ("device time", fmt.seconds),
                          "share": ("share", fmt.share)})


def top_kernels_table(report: Report) -> pd.DataFrame:
    table = report.top_kernels()
    return _shown(table, {"name": ("kernel", str), "type": ("type", str),
                          "calls": ("calls", fmt.count),
                          "gpu_time": ("device time", fmt.seconds),
                          "share": ("share of the rank's", fmt.share)})


def launches_table(report: Report) -> pd.DataFrame:
    table = report.launches()
    return _shown(table, {
        "name": ("call", str), "calls": ("calls", fmt.count),
        "cpu_mean": ("CPU mean", fmt.seconds), "gpu_mean": ("device mean", fmt.seconds),
        "delay_mean": ("delay mean", fmt.seconds), "delay_median": ("median", fmt.seconds),
        "delay_max": ("max", fmt.seconds),
        "short_kernels": ("shorter than launch", fmt.count),
        "slow_launches": ("calls > 50 µs", fmt.count),
        "late_launches": ("delays > 100 µs", fmt.count)})


def idle_streams_table(report: Report) -> pd.DataFrame:
    table = report.idle_streams()
    return _shown(table, {
        "stream": ("stream", str), "busy": ("busy", fmt.seconds),
        "host_wait": ("host wait", fmt.seconds), "kernel_wait": ("kernel wait", fmt.seconds),
        "other_wait": ("other", fmt.seconds), "host_share": ("host %", fmt.share),
        "kernel_share": ("kernel %", fmt.share), "other_share": ("other %", fmt.share)})


def stragglers_table(report: Report) -> pd.DataFrame:
    table = report.stragglers()
    if table.empty:
        return pd.DataFrame()
    return pd.DataFrame({
        "step": table["step"], "ranks": table["ranks"].astype(str),
        "median": table["median"].map(fmt.seconds), "max": table["max"].map(fmt.seconds),
        "slowest rank": table["slowest_rank"].astype(str),
        "spread": table["spread"].map(fmt.share),
        "most computation": table["most_computation_rank"].map(
            lambda rank: "" if pd.isna(rank) else str(int(rank))),
        "its excess": table["computation_spread"].map(fmt.share)})


def held_memory_table(report: Report) -> pd.DataFrame:
    table = report.held_memory()
    if table.empty:
        return pd.DataFrame()
    shown = pd.DataFrame({
        "device": table["device"],
        "step": table["step"].where(table["step"] != "", "whole pass"),
        "when": table["moment"].map({"at_end": "end", "at_peak": "peak",
                                     "max": "each's largest"})})
    if table["rank"].nunique() > 1:
        shown.insert(0, "rank", table["rank"].astype(str))
    for column in ("parameters", "gradients", "optimizer_state", "activations",
                   "temporaries"):
        shown[column.replace("_", " ")] = table[column].map(fmt.size)
    shown["other"] = table[["inputs", "autograd", "other"]].sum(axis=1).map(fmt.size)
    shown["total"] = table["total"].map(fmt.size)
    shown["largest"] = table["largest"].str.replace("_", " ")
    return shown


def operator_memory_table(report: Report) -> pd.DataFrame:
    table = report.operator_memory()
    return _shown(table, {
        "device": ("device", str), "operator": ("operator", str), "calls": ("calls", fmt.count),
        "self_increase": ("self increase", fmt.size), "self_allocated": ("self allocated",
                                                                       fmt.size),
        "self_allocations": ("self allocs", fmt.count), "increase": ("increase", fmt.size),
        "allocated": ("allocated", fmt.size), "allocations": ("allocs", fmt.count)})


def module_view_table(report: Report) -> pd.DataFrame:
    """The module tree, each module indented under the one around it."""
    table = report.module_view()
    if table.empty:
        return pd.DataFrame()
    table = table.assign(shown=["  " * depth + module for depth, module
                                in zip(table["depth"], table["module"], strict=True)])
    columns = {"shown": ("module", str), "calls": ("calls", fmt.count),
               "operators": ("operators", fmt.count), "cpu_time": ("host", fmt.seconds),
               "self_time": ("host self", fmt.seconds)}
    if table["gpu_time"].any():
        columns.update({"gpu_time": ("device", fmt.seconds),
                        "self_gpu_time": ("device self", fmt.seconds)})
    return _shown(table, {**columns, "mean": ("mean", fmt.seconds)})


def operator_shapes_table(report: Report, by: str = "shape") -> pd.DataFrame:
    view = report.operators(by=by)
    column = "input_shapes" if by == "shape" else "call_stack"
    shown = pd.DataFrame({"operator": view["name"],
                          column.replace("_", " "): view[column]})
    for column, header in (("calls", "calls"), ("cpu_time", "CPU total"),
                           ("self_time", "CPU self"), ("gpu_time", "device total"),
                           ("self_gpu_time", "device self")):
        if column in view.columns:
            shown[header] = view[column].map(fmt.count if column == "calls" else fmt.seconds)
    return shown


def operator_stacks_table(report: Report) -> pd.DataFrame:
    return operator_shapes_table(report, by="stack")


def kernels_table(report: Report, by: str = "kernel") -> pd.DataFrame:
    """TensorBoard's kernel view; the columns no kernel has a value in left out (a trace
    without blocks per SM, an Nsight file's kernels)."""
    view = report.kernels(by=by)
    columns = {"calls": ("calls", fmt.count), "gpu_time": ("device time", fmt.seconds),
               "mean": ("mean", fmt.seconds), "min": ("min", fmt.seconds),
               "max": ("max", fmt.seconds), "tensor_cores": ("Tensor Cores", _used),
               "blocks_per_sm": ("blocks/SM", _text), "occupancy": ("est. occupancy",
                                                                   fmt.share)}
    shown = pd.DataFrame({"kernel": view["name"]})
    if by == "operator":
        shown["operator"] = view["operator"]
    for column, (header, form) in columns.items():
        if view[column].notna().any():
            shown[header] = view[column].map(form)
    return shown


def kernel_operators_table(report: Report) -> pd.DataFrame:
    return kernels_table(report, by="operator")


def _used(value: Any) -> str:
    return "" if pd.isna(value) else "yes" if value else "no"
