"""Numbers computed from measured ones: achieved FLOP/s of a model and of its regions.

Achieved FLOP/s = the FLOPs of one iteration / the median latency of one iteration
(bench). The FLOPs of one iteration are per call of the root module, as
`Report.counters()` compares them (a counter's FLOPs divided by the calls it saw): the
exact count (backward measured) when an exact counter ran, else a forward-only counter's,
x3 with --train (backward estimated as 2x forward), and the row's name says which.
Which backends count and which time regions is what they state (`rows.Facts`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from profile_all.report.counters import Counting, counters
from profile_all.rows import BENCHMARK, DERIVED, Facts

#: a region's device time first, else its host time
_TIMER_ORDER = ("gpu_time", "wall_time")


def iteration_flops(frame: pd.DataFrame, counting: Counting,
                    train: bool) -> tuple[float, str] | None:
    """(FLOPs of one call of every root module, which counter) from the counters' rows."""
    table = counters(frame, counting, train)
    for counter in counting.counters:
        per_call = table.loc[table["counter"] == counter, "flops"]
        if not per_call.empty:
            estimated = train and counter in counting.forward_only
            return float(per_call.sum()), counter + (" x3" if estimated else "")
    return None


def _timers(facts: Mapping[str, Facts]) -> list[tuple[str, str]]:
    """(backend, metric) of every backend that times regions, device time first."""
    timers = [(name, said.region_timer) for name, said in facts.items() if said.region_timer]
    return sorted(timers, key=lambda timer: _TIMER_ORDER.index(timer[1])
                  if timer[1] in _TIMER_ORDER else len(_TIMER_ORDER))


def region_achieved_flops_rows(frame: pd.DataFrame,
                               facts: Mapping[str, Facts]) -> list[list[Any]]:
    """Per region: the exact counter's FLOPs per call / a timer's median time of the
    region (device time when a timer measured it, else host time)."""
    reference = Counting.of(facts).reference
    flops = frame[(frame["backend"] == reference) & (frame["scope"] == "region")
                  & (frame["metric"] == "flops") & (frame["stat"] == "mean")]
    out = []
    for _, counted in flops[flops["value"] > 0].iterrows():  # no FLOPs counted: no rate
        for backend, metric in _timers(facts):
            timed = frame[(frame["backend"] == backend) & (frame["scope"] == "region")
                          & (frame["name"] == counted["name"])
                          & (frame["parent"] == counted["parent"])
                          & (frame["metric"] == metric) & (frame["stat"] == "median")]
            if not timed.empty and timed["value"].iloc[0] > 0:
                out.append([DERIVED, 0, 0, "region", counted["name"], counted["parent"],
                            "achieved_flops", "value",
                            counted["value"] / timed["value"].iloc[0], "FLOP/s"])
                break
    return out


def achieved_flops_rows(frame: pd.DataFrame, facts: Mapping[str, Facts],
                        peak_flops: float | None) -> tuple[list[list[Any]], str | None]:
    """Rows of a model's achieved FLOP/s (and the fraction of `peak_flops`), and the counter
    whose FLOPs were used; `frame` holds the measured rows (report columns). With repeated
    timing passes, over the median of their medians."""
    latency = frame[(frame["backend"] == BENCHMARK) & (frame["metric"] == "latency")
                    & (frame["stat"] == "median")]
    if latency.empty:
        return [], None
    region = latency["name"].iloc[0]
    counted = iteration_flops(frame, Counting.of(facts), train=region == "train_step")
    if counted is None:
        return [], None
    flops, counter = counted
    if flops <= 0:  # nothing counted is no rate: "achieved 0 GFLOP/s" led the findings
        return [], None
    achieved = flops / float(latency["value"].median())
    prefix = [DERIVED, 0, 0, "model", region, ""]
    out = [[*prefix, "achieved_flops", "value", achieved, "FLOP/s"]]
    if peak_flops:
        out.append([*prefix, "peak_fraction", "value", achieved / peak_flops, "ratio"])
    return out, counter
