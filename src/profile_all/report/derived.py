"""Numbers computed from measured ones: achieved FLOP/s of a model and of its regions.

Achieved FLOP/s = the FLOPs of one iteration / the median latency of one iteration
(bench). The FLOPs of one iteration are per call of the root module, as
`Report.counters()` compares them (a counter's FLOPs divided by the calls it saw): the
exact count (flop-counter, backward measured) when it ran, else thop's or flops-profiler's
forward count, x3 with --train (backward estimated as 2x forward), and the row's name says
which.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from profile_all.report.counters import COUNTERS, FORWARD_ONLY, counters


def iteration_flops(frame: pd.DataFrame, train: bool) -> tuple[float, str] | None:
    """(FLOPs of one call of every root module, which counter) from the counters' rows."""
    table = counters(frame, train)
    for counter in COUNTERS:
        per_call = table.loc[table["counter"] == counter, "flops"]
        if not per_call.empty:
            estimated = train and counter in FORWARD_ONLY
            return float(per_call.sum()), counter + (" x3" if estimated else "")
    return None


def region_achieved_flops_rows(frame: pd.DataFrame) -> list[list[Any]]:
    """Per region: flop-counter's FLOPs per call / a timer's median time of the region
    (device time from cuda-events when it ran, else wallclock's host time)."""
    flops = frame[(frame["backend"] == "flop-counter") & (frame["scope"] == "region")
                  & (frame["metric"] == "flops") & (frame["stat"] == "mean")]
    out = []
    for _, counted in flops[flops["value"] > 0].iterrows():  # no FLOPs counted: no rate
        for backend, metric in (("cuda-events", "gpu_time"), ("wallclock", "wall_time")):
            timed = frame[(frame["backend"] == backend) & (frame["scope"] == "region")
                          & (frame["name"] == counted["name"])
                          & (frame["parent"] == counted["parent"])
                          & (frame["metric"] == metric) & (frame["stat"] == "median")]
            if not timed.empty and timed["value"].iloc[0] > 0:
                out.append(["derived", 0, 0, "region", counted["name"], counted["parent"],
                            "achieved_flops", "value",
                            counted["value"] / timed["value"].iloc[0], "FLOP/s"])
                break
    return out


def achieved_flops_rows(frame: pd.DataFrame,
                        peak_flops: float | None) -> tuple[list[list[Any]], str | None]:
    """Rows of a model's achieved FLOP/s (and the fraction of `peak_flops`), and the counter
    whose FLOPs were used; `frame` holds the measured rows (report columns). With repeated
    timing passes, over the median of their medians."""
    latency = frame[(frame["backend"] == "bench") & (frame["metric"] == "latency")
                    & (frame["stat"] == "median")]
    if latency.empty:
        return [], None
    region = latency["name"].iloc[0]
    counted = iteration_flops(frame, train=region == "train_step")
    if counted is None:
        return [], None
    flops, counter = counted
    achieved = flops / float(latency["value"].median())
    prefix = ["derived", 0, 0, "model", region, ""]
    out = [[*prefix, "achieved_flops", "value", achieved, "FLOP/s"]]
    if peak_flops:
        out.append([*prefix, "peak_fraction", "value", achieved / peak_flops, "ratio"])
    return out, counter
