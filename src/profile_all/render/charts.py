"""The report's charts as Plotly figures: plain dicts of data and layout, drawn in the
browser by plotly.js (inlined once in report.html). Nothing is drawn in Python, so saving
a report costs no plotting library, and the charts zoom, pan and show values on hover.

Each function takes a Report and returns None when the run has nothing to chart. Names
reach the charts as data, never as markup: html.py serialises the figures as JSON and
escapes `</` so that no name can end the script element.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pandas as pd

from profile_all import units as fmt
from profile_all.pass_record import PassRecord
from profile_all.render import trace_charts
from profile_all.render.flame_graph import call_flames
from profile_all.render.status import since
from profile_all.rows import DERIVED, region_paths

if TYPE_CHECKING:
    from profile_all.report.report import Report

TOP = 15
Figure = dict[str, Any]


def _layout(title: str, xlabel: str, rows: int, **more: Any) -> dict[str, Any]:
    return {"title": {"text": title, "x": 0, "xanchor": "left"},
            "xaxis": {"title": {"text": xlabel}, "automargin": True},
            "yaxis": {"automargin": True, "autorange": "reversed"},
            "height": max(220, 26 * rows + 120), "margin": {"l": 10, "r": 10, "t": 40},
            "legend": {"orientation": "h"}, **more}


def _barh(labels: list[str], values: list[float], xlabel: str, title: str) -> Figure:
    positive = [value for value in values if value is not None and value > 0]
    log = bool(positive) and max(positive) > 30 * min(positive)  # small bars stay visible
    layout = _layout(title, xlabel + (" (log scale)" if log else ""), len(labels))
    if log:
        layout["xaxis"]["type"] = "log"
    return {"data": [{"type": "bar", "orientation": "h", "y": labels, "x": values,
                      "hovertemplate": "%{y}: %{x:.4g}<extra></extra>"}],
            "layout": layout}


def _per_call(rows: pd.DataFrame, calls: pd.Series) -> pd.DataFrame:
    """median, min and p90 per region; where a backend kept only totals (nsys), the mean
    as the median and no spread."""
    stats = rows.groupby(["parent", "name", "stat"])["value"].median().unstack("stat")
    if "median" not in stats.columns:
        stats["median"] = stats["total"] / calls.reindex(stats.index)
    for stat in ("min", "p90"):
        if stat not in stats.columns:
            stats[stat] = stats["median"]
    return stats


def _ms(values: pd.Series) -> list[float | None]:
    return [None if pd.isna(value) else float(value) * 1e3 for value in values]


def region_times(report: Report) -> Figure | None:
    """A group of bars per region and step: the median per call measured by every backend
    that timed it (host or device time), with an error bar from the minimum to the p90.
    The backends that time regions (their facts say so) come first."""
    frame = report.scoped("region", "step")
    frame = frame[frame["backend"] != DERIVED]
    timed = frame[frame["metric"].isin(["wall_time", "gpu_time"])]
    if timed.empty:
        return None
    timers = {name for name, said in report.facts.items() if said.region_timer}
    both = timed.groupby("backend")["metric"].nunique()
    series = []
    for (backend, metric), rows in timed.groupby(["backend", "metric"], sort=False):
        calls = frame[(frame["backend"] == backend) & (frame["metric"] == "calls")] \
            .groupby(["parent", "name"])["value"].median()
        label = f"{backend} {metric}" if both[backend] > 1 else backend
        series.append((backend not in timers, label, _per_call(rows, calls)))
    series.sort(key=lambda entry: entry[0])
    order = series[0][2].sort_values("total", ascending=False).index[:TOP]
    labels = region_paths([parent for parent, _ in order], [name for _, name in order])
    data = []
    for _not_timer, label, stats in series:
        stats = stats.reindex(order)
        data.append({"type": "bar", "orientation": "h", "name": label, "y": labels,
                     "x": _ms(stats["median"]),
                     "error_x": {"type": "data", "symmetric": False,
                                 "array": _ms((stats["p90"] - stats["median"]).clip(lower=0)),
                                 "arrayminus": _ms((stats["median"] - stats["min"])
                                                   .clip(lower=0))},
                     "hovertemplate": "%{y}: %{x:.4g} ms<extra>" + label + "</extra>"})
    return {"data": data,
            "layout": _layout("Time per region, each timer",
                              "median per call (ms); error bar: min to p90",
                              len(labels) * len(data), barmode="group")}


def overheads(report: Report) -> Figure | None:
    """Each profiled pass's overhead with its interval, against the clean pass's 1."""
    passes = report.passes().dropna(subset=["overhead"])
    if passes.empty:
        return None
    labels = [f"pass {p}: {b}" for p, b in zip(passes["pass"], passes["backends"], strict=True)]
    points = passes["overhead"].astype(float)
    low = passes["overhead_low"].astype(float).fillna(points)
    high = passes["overhead_high"].astype(float).fillna(points)
    layout = _layout("Each pass's overhead over the clean timing pass",
                     "time / clean timing pass's (1 = no overhead); error bar: 95% interval",
                     len(labels))
    layout["shapes"] = [{"type": "line", "x0": 1, "x1": 1, "yref": "paper", "y0": 0, "y1": 1,
                         "line": {"color": "#cf222e", "width": 1}}]
    return {"data": [{"type": "bar", "orientation": "h", "y": labels,
                      "x": points.tolist(),
                      "error_x": {"type": "data", "symmetric": False,
                                  "array": (high - points).tolist(),
                                  "arrayminus": (points - low).tolist()},
                      "hovertemplate": "%{y}: %{x:.3f}x<extra></extra>"}],
            "layout": layout}


def sources(report: Report, scope: str) -> str:
    """The backends whose rows of `scope` a chart draws, as its title names them."""
    return ", ".join(dict.fromkeys(report.scoped(scope)["backend"]))


def top_functions(report: Report) -> Figure | None:
    functions = report.functions(TOP)
    if functions.empty or "self_time" not in functions.columns:
        return None
    names = [fmt.code_path(name, report.meta.cwd) for name in functions["name"]]  # as
    # the tables name them: a package's path from the package, not from /
    return _barh(names, _ms(functions["self_time"]), "self time (ms)",
                 f"Top {TOP} functions by self time ({sources(report, 'function')})")


def top_operators(report: Report) -> Figure | None:
    """Operators by self time: CPU and device side by side where a device ran them."""
    operators = report.operators(TOP)
    if operators.empty or "self_time" not in operators.columns:
        return None
    on_device = "self_gpu_time" in operators.columns and operators["self_gpu_time"].sum() > 0
    figure = _barh(list(operators["name"]), _ms(operators["self_time"]), "self time (ms)",
                   f"Top {TOP} operators ({sources(report, 'operator')})")
    figure["data"][0]["name"] = "CPU"
    if on_device:
        figure["data"].append({"type": "bar", "orientation": "h", "name": "device",
                               "y": list(operators["name"]),
                               "x": _ms(operators["self_gpu_time"]),
                               "hovertemplate": "%{y}: %{x:.4g} ms<extra>device</extra>"})
        figure["layout"].update(barmode="group",
                                height=max(220, 40 * len(operators) + 120))
    return figure


def top_kernels(report: Report) -> Figure | None:
    kernels = report.kernels(TOP)
    if kernels.empty or "gpu_time" not in kernels.columns:
        return None
    return _barh(list(kernels["name"]), _ms(kernels["gpu_time"]), "device time (ms)",
                 f"Top {TOP} kernels")


def memory_timeline(report: Report) -> Figure | None:
    """RSS over time in the first pass that sampled it, a line per rank, with a band for
    each call of the first rank's ten first top-level regions (a legend entry a name)."""
    timeline = report.memory()
    if timeline.empty:
        return None
    sampled = timeline[timeline["pass"] == timeline["pass"].iloc[0]]
    first = sampled[sampled["rank"] == sampled["rank"].iloc[0]]
    several = sampled["rank"].nunique() > 1
    data = [{"type": "scatter", "mode": "lines", "name": label, "x": one["time"].tolist(),
             "y": (one[series] / 2**20).tolist(),
             "hovertemplate": "%{x:.3f} s: %{y:.1f} MiB<extra>" + label + "</extra>"}
            for rank, one in sampled.groupby("rank")
            for series in ("process", "children")
            if series in one.columns and one[series].notna().any()
            for label in [f"rank {rank} {series}" if several else series]]
    calls = report.timeline[(report.timeline["series"] == "region")
                            & (report.timeline["pass"] == first["pass"].iloc[0])
                            & (report.timeline["rank"] == first["rank"].iloc[0])]
    names = sorted(set(calls["name"]))[:10]
    shapes = [{"type": "rect", "xref": "x", "yref": "paper", "x0": start, "x1": end,
               "y0": 0, "y1": 1, "line": {"width": 0}, "opacity": 0.15,
               "fillcolor": _COLORS[names.index(name) % len(_COLORS)]}
              for name, start, end in zip(calls["name"], calls["start"], calls["end"],
                                          strict=True) if name in names]
    # a legend entry per region name, not per call
    data += [{"type": "scatter", "mode": "markers", "x": [None], "y": [None], "name": name,
              "marker": {"color": _COLORS[index % len(_COLORS)], "symbol": "square",
                         "size": 12, "opacity": 0.4}}
             for index, name in enumerate(names)]
    layout = _layout("Memory over time, regions shaded", since(report),
                     8, shapes=shapes)
    layout["yaxis"] = {"title": {"text": "RSS (MiB)"}, "automargin": True}
    return {"data": data, "layout": layout}


_COLORS = ["#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3", "#937860", "#da8bc3",
           "#8c8c8c", "#ccb974", "#64b5cd"]


def region_timeline(report: Report) -> Figure | None:
    """Each call of the top-level regions over the target's time (the first pass and rank
    that timed them): stalls, gaps between steps and drift show here."""
    calls = report.timeline[report.timeline["series"] == "region"]
    if calls.empty:
        return None
    first = calls.iloc[0]
    calls = calls[(calls["backend"] == first["backend"]) & (calls["pass"] == first["pass"])
                  & (calls["rank"] == first["rank"])]
    data = [{"type": "bar", "orientation": "h", "name": name, "y": [name] * len(one),
             "base": one["start"].tolist(), "x": (one["end"] - one["start"]).tolist(),
             "marker": {"color": _COLORS[index % len(_COLORS)]},
             "hovertemplate": "%{y}: from %{base:.4f} s, %{x:.4g} s<extra></extra>"}
            for index, (name, one) in enumerate(calls.groupby("name", sort=False))]
    layout = _layout(f"Regions over time ({first['backend']}, pass {first['pass']})",
                     since(report), len(data), barmode="overlay",
                     showlegend=False)
    return {"data": data, "layout": layout}


def _step_numbers(summary: PassRecord | None, kept: int) -> list[int]:
    """The number of each step a timer's samples hold: per-step samples leave out step 1
    and the steps that compiled (ARCHITECTURE.md, "What a step spans"), and are thinned
    evenly past backends.base.MAX_SAMPLES as kept_samples thins them."""
    left_out = {1, *(summary.compile_steps if summary else [])}
    steps = (summary.steps if summary else None) or 0
    numbers = [n for n in range(1, steps + 1) if n not in left_out]
    if len(numbers) < kept:  # (a pass that does not say)
        return list(range(1, kept + 1))
    return [numbers[index * len(numbers) // kept] for index in range(kept)]


def step_times(report: Report) -> Figure | None:
    """Each step's time in order, a line per pass and rank of every region timer: warm-up,
    drift and stalls show where a median hides them."""
    timers = [name for name, facts in report.facts.items() if facts.region_timer]
    samples = report.samples
    steps = samples[(samples["scope"] == "step") & samples["backend"].isin(timers)]
    if steps.empty:
        return None
    data = []
    passes = {p.number: p for p in report.meta.passes}
    for (backend, run_pass, rank), one in steps.groupby(["backend", "pass", "rank"]):
        label = f"{backend} pass {run_pass}" + (f" rank {rank}" if steps["rank"].nunique() > 1
                                               else "")
        data.append({"type": "scatter", "mode": "lines+markers", "name": label,
                     "x": _step_numbers(passes.get(run_pass), len(one)),
                     "y": _ms(one["value"]),
                     "marker": {"size": 4},
                     "hovertemplate": "step %{x}: %{y:.3f} ms<extra>" + label + "</extra>"})
    layout = _layout("Each step's time", "step", 8)
    layout["yaxis"] = {"title": {"text": "ms"}, "automargin": True, "rangemode": "tozero"}
    return {"data": data, "layout": layout}


def counters(report: Report) -> Figure | None:
    table = report.counters()
    if table.empty:
        return None
    labels = [f"{module}: {counter}" for module, counter
              in zip(table["module"], table["counter"], strict=True)]
    return _barh(labels, (pd.to_numeric(table["flops"]) / 1e9).tolist(), "GFLOP per call",
                 "FLOPs per call by each counter (2 x MACs where a counter counts MACs)")


def all_charts(report: Report) -> list[tuple[str, Figure]]:
    """(title, figure) of every chart the run has data for, in the page's order."""
    drawn = [("Time per region", region_times(report)),
             ("Overhead of each pass", overheads(report)),
             ("Memory", memory_timeline(report)), ("Step times", step_times(report)),
             ("Device time per rank", trace_charts.device_time(report)),
             ("Step time breakdown", trace_charts.step_time(report)),
             *trace_charts.gpu_over_time(report),
             *trace_charts.held_memory(report), *trace_charts.device_memory(report),
             ("Regions over time", region_timeline(report)),
             ("Top functions", top_functions(report)), *call_flames(report),
             ("Top operators", top_operators(report)),
             ("Top kernels", top_kernels(report)), ("FLOP counters", counters(report))]
    return [(title, figure) for title, figure in drawn if figure is not None]
