"""The trace analyses as stacked bars (Plotly figures, as charts.py draws them): each
rank's device time by type and idle, and each rank's steps by TensorBoard's categories;
and memory by what holds it over time, stacked areas a device."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pandas as pd

if TYPE_CHECKING:
    from profile_all.report.report import Report

Figure = dict[str, Any]
_DEVICE_PARTS = ["computation", "communication", "memory", "other", "idle"]
_STEP_PARTS = ["kernel", "memcpy", "memset", "communication", "runtime", "data_loader", "cpu",
               "other"]


def _stacked(labels: list[str], table: pd.DataFrame, parts: list[str], title: str,
             axis: str) -> Figure:
    data = [{"type": "bar", "orientation": "h", "name": part.replace("_", " "),
             "y": labels, "x": (table[part] * 1e3).tolist(),
             "hovertemplate": "%{y}: %{x:.4g} ms<extra>" + part.replace("_", " ")
                              + "</extra>"}
            for part in parts if table[part].gt(0).any()]
    return {"data": data, "layout": {
        "barmode": "stack", "title": {"text": title, "x": 0, "xanchor": "left"},
        "xaxis": {"title": {"text": axis}, "automargin": True},
        "yaxis": {"automargin": True, "autorange": "reversed"},
        "height": max(220, 26 * len(labels) + 140), "margin": {"l": 10, "r": 10, "t": 40},
        "legend": {"orientation": "h"}}}


def device_time(report: Report) -> Figure | None:
    table = report.device_time()
    if table.empty:
        return None
    labels = [f"rank {rank}" for rank in table["rank"]]
    return _stacked(labels, table, _DEVICE_PARTS,
                    "Each rank's device time by type (a union over streams)", "ms")


def step_time(report: Report) -> Figure | None:
    table = report.step_time()
    if table.empty:
        return None
    labels = [f"rank {rank} {step}" for rank, step in zip(table["rank"], table["step"],
                                                         strict=True)]
    return _stacked(labels, table, _STEP_PARTS, "Each step's time by category (TensorBoard's "
                    "step time breakdown)", "ms")


_SINCE_TRACE = "s since the trace's start"


def _over_time(title: str, x_title: str, y_axis: dict[str, Any], height: int = 360
               ) -> dict[str, Any]:
    """The layout of a chart over time: its title, seconds across, `y_axis` up."""
    return {"title": {"text": title, "x": 0, "xanchor": "left"},
            "xaxis": {"title": {"text": x_title}, "automargin": True},
            "yaxis": {**y_axis, "automargin": True}, "height": height,
            "margin": {"l": 10, "r": 10, "t": 40}, "legend": {"orientation": "h"}}


def held_memory(report: Report) -> list[tuple[str, Figure]]:
    """Per device (and rank), each category's bytes over the pass, stacked."""
    timeline = report.timeline
    series = timeline[timeline["series"].str.startswith("held_memory:")]
    if series.empty:
        return []
    figures = []
    for (device, rank), one in series.groupby([series["series"].str.partition(":")[2],
                                               series["rank"]]):
        data = [{"type": "scatter", "mode": "lines", "stackgroup": "held",
                 "name": name.replace("_", " "), "x": points["start"].tolist(),
                 "y": (points["value"] / 2**20).tolist(),
                 "hovertemplate": "%{x:.3f} s: %{y:.1f} MiB<extra>" + name + "</extra>"}
                for name, points in one.groupby("name", sort=False)]
        title = f"Memory by what holds it, {device}" + (
            f" rank {rank}" if series["rank"].nunique() > 1 else "")
        figures.append((title, {"data": data, "layout": _over_time(
            title, "s since the pass started", {"title": {"text": "MiB"},
                                                 "rangemode": "tozero"})}))
    return figures


def device_memory(report: Report) -> list[tuple[str, Figure]]:
    """Per device (and rank) of a trace recorded with memory, the allocated and reserved
    bytes over time, each step shaded (TensorBoard's memory curve)."""
    timeline = report.timeline
    series = timeline[timeline["series"].str.startswith("memory:")]
    if series.empty:
        return []
    figures = []
    for (device, number, rank), one in series.groupby(
            [series["series"].str.partition(":")[2], series["pass"], series["rank"]]):
        data = [{"type": "scatter", "mode": "lines", "line": {"shape": "hv"}, "name": name,
                 "x": points["start"].tolist(), "y": (points["value"] / 2**20).tolist(),
                 "hovertemplate": "%{x:.4f} s: %{y:.2f} MiB<extra>" + name + "</extra>"}
                for name, points in one.groupby("name", sort=False)]
        steps = timeline[(timeline["series"] == "step") & (timeline["pass"] == number)
                         & (timeline["rank"] == rank)]
        shapes = [{"type": "rect", "xref": "x", "yref": "paper", "x0": start, "x1": end,
                   "y0": 0, "y1": 1, "line": {"width": 0}, "opacity": 0.12,
                   "fillcolor": "#636efa" if position % 2 else "#00cc96"}
                  for position, (start, end) in enumerate(zip(steps["start"], steps["end"],
                                                               strict=True))]
        title = f"Memory allocated and reserved, {device}" + (
            f" rank {rank}" if series["rank"].nunique() > 1 else "")
        figures.append((title, {"data": data, "layout": {**_over_time(
            title, _SINCE_TRACE, {"title": {"text": "MiB"}, "rangemode": "tozero"}),
            "shapes": shapes}}))
    return figures


def gpu_over_time(report: Report) -> list[tuple[str, Figure]]:
    """Per device (and rank), TensorBoard's GPU utilization over time, with the estimated SM
    efficiency and achieved occupancy in the same buckets."""
    timeline = report.timeline
    series = timeline[timeline["series"].str.startswith("gpu:")]
    if series.empty:
        return []
    figures = []
    for (device, rank), one in series.groupby([series["series"].str.partition(":")[2],
                                               series["rank"]]):
        data = [{"type": "scatter", "mode": "lines", "line": {"shape": "hv"},
                 "name": name.replace("_", " "), "x": points["start"].tolist(),
                 "y": (points["value"] * 100).tolist(),
                 "hovertemplate": "%{x:.4f} s: %{y:.1f}%<extra>" + name + "</extra>"}
                for name, points in one.groupby("name", sort=False)]
        title = f"GPU utilization over time, {device}" + (
            f" rank {rank}" if series["rank"].nunique() > 1 else "")
        figures.append((title, {"data": data, "layout": _over_time(
            title, _SINCE_TRACE, {"title": {"text": "%"}, "range": [0, 105]}, height=320)}))
    return figures
