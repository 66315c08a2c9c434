"""Numbers computed from measured ones: achieved FLOP/s of a model and of its regions.

Achieved FLOP/s = the FLOPs of one iteration / the median latency of one iteration
(bench). The FLOPs are the exact count (flop-counter) when it ran, else thop's or
flops-profiler's forward count, x3 with --train (backward estimated as 2x forward), and
the row's name says which.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

FORWARD_ONLY_COUNTERS = ("thop", "flops-profiler")


def iteration_flops(frame: pd.DataFrame, train: bool) -> tuple[float, str] | None:
    """(FLOPs of one iteration, which counter) from the counters' rows."""
    exact = frame[(frame["backend"] == "flop-counter") & (frame["scope"] == "run")
                  & (frame["metric"] == "flops")]
    if not exact.empty:
        return float(exact["value"].iloc[0]), "flop-counter"
    for counter in FORWARD_ONLY_COUNTERS:
        roots = frame[(frame["backend"] == counter) & (frame["scope"] == "module")
                      & (frame["metric"] == "flops") & ~frame["name"].str.contains(r"\.")]
        if not roots.empty:
            factor = 3 if train else 1
            return float(roots["value"].sum()) * factor, counter + (" x3" if train else "")
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
    whose FLOPs were used; `frame` holds the measured rows (report columns)."""
    latency = frame[(frame["backend"] == "bench") & (frame["metric"] == "latency")
                    & (frame["stat"] == "median")]
    if latency.empty:
        return [], None
    region = latency["name"].iloc[0]
    counted = iteration_flops(frame, train=region == "train_step")
    if counted is None:
        return [], None
    flops, counter = counted
    achieved = flops / float(latency["value"].iloc[0])
    prefix = ["derived", 0, 0, "model", region, ""]
    out = [[*prefix, "achieved_flops", "value", achieved, "FLOP/s"]]
    if peak_flops:
        out.append([*prefix, "peak_fraction", "value", achieved / peak_flops, "ratio"])
    return out, counter
