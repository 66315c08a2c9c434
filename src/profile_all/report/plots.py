"""The report's plots, drawn with matplotlib (Agg) and returned as PNG bytes.

Each function takes a Report and returns None when the run has nothing to plot. Names
reach the figures as plain text: math text is off, so a `$` in a region name is a dollar.
"""

from __future__ import annotations

import io
from typing import TYPE_CHECKING

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import pandas as pd
from matplotlib import ticker

from profile_all.rows import DERIVED, region_paths

if TYPE_CHECKING:
    from profile_all.report.report import Report

_STYLE = {"text.parse_math": False, "font.size": 9, "axes.spines.top": False,
          "axes.spines.right": False, "figure.dpi": 100}
TOP = 15


def _png(figure: plt.Figure) -> bytes:
    buffer = io.BytesIO()
    figure.tight_layout()
    figure.savefig(buffer, format="png")
    plt.close(figure)
    return buffer.getvalue()


def _short(name: str, width: int = 60) -> str:
    return name if len(name) <= width else name[: width - 1] + "…"


def _barh(labels: list[str], values: list[float], xlabel: str, title: str) -> bytes:
    with plt.rc_context(_STYLE):
        figure, axes = plt.subplots(figsize=(9, 0.3 * len(labels) + 1.2))
        axes.barh(range(len(labels)), values, color="#4c72b0")
        positive = [value for value in values if value > 0]
        if positive and max(positive) > 30 * min(positive):  # small bars stay visible
            axes.set_xscale("log")
            # the log scale's own labels are math text, which is off here
            axes.xaxis.set_major_formatter(ticker.FuncFormatter(lambda value, _: f"{value:g}"))
            axes.xaxis.set_minor_formatter(ticker.NullFormatter())
            xlabel += " (log scale)"
        axes.set_yticks(range(len(labels)), [_short(label) for label in labels])
        axes.invert_yaxis()
        axes.set_xlabel(xlabel)
        axes.set_title(title, loc="left")
        return _png(figure)


def _per_call(rows: pd.DataFrame, calls: pd.Series) -> pd.DataFrame:
    """median, min and p90 per region; where a backend kept only totals (nsys), the mean
    as the median and no spread."""
    stats = rows.pivot_table(index=["parent", "name"], columns="stat", values="value",
                             aggfunc="median")
    if "median" not in stats.columns:
        stats["median"] = stats["total"] / calls.reindex(stats.index)
    for stat in ("min", "p90"):
        if stat not in stats.columns:
            stats[stat] = stats["median"]
    return stats


def region_times(report: Report) -> bytes | None:
    """A group of bars per region and step: the median per call measured by every backend
    that timed it (host or device time), with a whisker from the minimum to the p90."""
    frame = report.frame[report.frame["scope"].isin(["region", "step"])
                         & (report.frame["backend"] != DERIVED)]
    timed = frame[frame["metric"].isin(["wall_time", "gpu_time"])]
    if timed.empty:
        return None
    both = timed.groupby("backend")["metric"].nunique()
    series = []
    for (backend, metric), rows in timed.groupby(["backend", "metric"], sort=False):
        calls = frame[(frame["backend"] == backend) & (frame["metric"] == "calls")] \
            .groupby(["parent", "name"])["value"].median()
        label = f"{backend} {metric}" if both[backend] > 1 else backend
        series.append((label, _per_call(rows, calls)))
    series.sort(key=lambda entry: entry[0] != "wallclock")  # the clean timer's order first
    order = series[0][1].sort_values("total", ascending=False).index[:TOP]
    labels = region_paths([parent for parent, _ in order], [name for _, name in order])
    height = 0.8 / len(series)
    with plt.rc_context(_STYLE):
        figure, axes = plt.subplots(figsize=(9, 0.35 * len(labels) * len(series) + 1.4))
        for position, (backend, stats) in enumerate(series):
            stats = stats.reindex(order)
            median = stats["median"] * 1e3
            low = (stats["median"] - stats["min"]).clip(lower=0) * 1e3
            high = (stats["p90"] - stats["median"]).clip(lower=0) * 1e3
            rows = [i + position * height for i in range(len(labels))]
            axes.barh(rows, median.fillna(0), height=height, label=backend,
                      xerr=[low.fillna(0), high.fillna(0)], capsize=2)
        axes.set_yticks([i + 0.4 - height / 2 for i in range(len(labels))],
                        [_short(label) for label in labels])
        axes.invert_yaxis()
        axes.set_xlabel("median per call (ms); whisker: min to p90")
        axes.set_title("Time per region, each timer", loc="left")
        axes.legend()
        return _png(figure)


def overheads(report: Report) -> bytes | None:
    """Each profiled pass's overhead with its interval, against the clean pass's 1."""
    passes = report.passes().dropna(subset=["overhead"])
    if passes.empty:
        return None
    labels = [f"pass {p}: {b}" for p, b in zip(passes["pass"], passes["backends"], strict=True)]
    points = passes["overhead"].to_numpy(float)
    low = passes["overhead_low"].astype(float).fillna(passes["overhead"]).to_numpy()
    high = passes["overhead_high"].astype(float).fillna(passes["overhead"]).to_numpy()
    with plt.rc_context(_STYLE):
        figure, axes = plt.subplots(figsize=(9, 0.3 * len(labels) + 1.2))
        axes.barh(range(len(labels)), points, color="#4c72b0",
                  xerr=[points - low, high - points], ecolor="#333333", capsize=3)
        axes.axvline(1.0, color="#cf222e", linewidth=1)
        axes.set_yticks(range(len(labels)), [_short(label) for label in labels])
        axes.invert_yaxis()
        axes.set_xlabel("time / clean timing pass's (1 = no overhead); whisker: 95% interval")
        axes.set_title("Each pass's overhead over the clean timing pass", loc="left")
        return _png(figure)


def top_functions(report: Report) -> bytes | None:
    functions = report.functions(TOP)
    if functions.empty or "self_time" not in functions.columns:
        return None
    return _barh(list(functions["name"]), list(functions["self_time"] * 1e3), "self time (ms)",
                 f"Top {TOP} functions by self time (cProfile)")


def top_operators(report: Report) -> bytes | None:
    operators = report.operators(TOP)
    if operators.empty:
        return None
    on_device = "self_gpu_time" in operators.columns and operators["self_gpu_time"].sum() > 0
    metric = "self_gpu_time" if on_device else "self_time"
    if metric not in operators.columns:
        return None
    where = "device" if on_device else "CPU"
    return _barh(list(operators["name"]), list(operators[metric] * 1e3),
                 f"self {where} time (ms)", f"Top {TOP} operators (torch.profiler)")


def top_kernels(report: Report) -> bytes | None:
    kernels = report.kernels(TOP)
    if kernels.empty or "gpu_time" not in kernels.columns:
        return None
    return _barh(list(kernels["name"]), list(kernels["gpu_time"] * 1e3), "device time (ms)",
                 f"Top {TOP} kernels")


def memory_timeline(report: Report) -> bytes | None:
    """RSS over time, with a band for each call of the ten first top-level regions."""
    timeline = report.memory()
    if timeline.empty:
        return None
    first = timeline[(timeline["pass"] == timeline["pass"].iloc[0])
                     & (timeline["rank"] == timeline["rank"].iloc[0])]
    calls = report.timeline[(report.timeline["series"] == "region")
                            & (report.timeline["pass"] == first["pass"].iloc[0])
                            & (report.timeline["rank"] == first["rank"].iloc[0])]
    with plt.rc_context(_STYLE):
        figure, axes = plt.subplots(figsize=(9, 3.6))
        for series in ("process", "children"):
            if series in first.columns and first[series].notna().any():
                axes.plot(first["time"], first[series] / 2**20, label=series)
        colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
        names = sorted(set(calls["name"]))[:10]
        for name, start, end in zip(calls["name"], calls["start"], calls["end"], strict=True):
            if name in names:
                axes.axvspan(start, end, alpha=0.15, label=name,
                             color=colors[names.index(name) % len(colors)])
        handles, labels = axes.get_legend_handles_labels()
        unique = dict(zip(labels, handles, strict=True))
        axes.legend(unique.values(), unique.keys(), fontsize=8, loc="upper left")
        axes.set_xlabel("seconds since the target started")
        axes.set_ylabel("RSS (MiB)")
        axes.set_title("Memory over time, regions shaded", loc="left")
        return _png(figure)


def counters(report: Report) -> bytes | None:
    table = report.counters()
    if table.empty:
        return None
    return _barh(list(table["counter"]), list(pd.to_numeric(table["flops"]) / 1e9), "GFLOP",
                 "FLOPs by each counter (2 x MACs where a counter counts MACs)")


def draw_all(report: Report) -> list[tuple[str, bytes]]:
    """(title, PNG) of every plot the run has data for, in the page's order."""
    drawn = [("Time per region", region_times(report)),
             ("Overhead of each pass", overheads(report)),
             ("Memory", memory_timeline(report)),
             ("Top functions", top_functions(report)), ("Top operators", top_operators(report)),
             ("Top kernels", top_kernels(report)), ("FLOP counters", counters(report))]
    return [(title, png) for title, png in drawn if png is not None]
