"""A model benchmark's tables for display: its latency, the batch-size search, the FLOP
counters side by side per root module, and each counter's FLOPs per module."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pandas as pd

from profile_all import units as fmt

if TYPE_CHECKING:
    from profile_all.report.report import Report


def latency_table(report: Report) -> pd.DataFrame:
    """A row per measure; a value column, or one per timing pass when it was repeated."""
    latency = report.latency()
    if latency.empty:
        return pd.DataFrame()
    latency = latency.assign(
        text=[fmt.by_unit(v, u) for v, u in zip(latency["value"], latency["unit"],
                                                   strict=True)],
        measure=[m if s in ("total", "value") else f"{m} {s}"
                 for m, s in zip(latency["metric"], latency["stat"], strict=True)])
    timing = sorted(p for p in latency["pass"].unique() if p > 0)
    latency["column"] = latency["pass"].map(
        lambda p: "value" if len(timing) < 2 else ("all passes" if p == 0 else f"pass {p}"))
    table = latency.pivot_table(index=["name", "measure"], columns="column", values="text",
                                aggfunc="first", sort=False).fillna("")
    table.columns.name = None
    return table.reset_index().rename(columns={"name": "region"})


def counters_table(report: Report) -> pd.DataFrame:
    """Per root module and counter, per call: exact FLOPs (no rounding: the causes are
    sizes in FLOPs), the calls each counter saw, and why it differs from the exact count."""
    counters = report.counters()
    if counters.empty:
        return pd.DataFrame()
    shown = pd.DataFrame({"module": counters["module"], "counter": counters["counter"],
                          "calls": counters["calls"].map(fmt.count)})
    if (counters["backward"] != "").any():  # training: the backward apart, and how it was had
        shown["calls"] += [f" + {fmt.count(b)} backward" if b > 0 else ""
                           for b in counters["backward_calls"].fillna(0)]
        shown["forward FLOP/call"] = counters["forward_flops"].map(fmt.count)
        shown["backward FLOP/call"] = [f"{fmt.count(flops)} ({how})" for flops, how in zip(
            counters["backward_flops"], counters["backward"], strict=True)]
    shown["FLOP/call"] = counters["flops"].map(fmt.count)
    shown["params"] = counters["params"].map(fmt.count)
    shown[f"vs {report.counting.reference or 'exact count'}"] = \
        counters["vs_reference"].map(fmt.change)
    shown["why"] = counters["cause"]
    return shown


def modules_table(report: Report) -> pd.DataFrame:
    """Per module, each counter's forward FLOPs per call of the module (and the exact
    counter's backward per backward call), with the calls it saw in brackets."""
    modules = report.modules()
    if modules.empty:
        return pd.DataFrame()
    counted = modules[[c for c in modules.columns[3:] if not c.endswith(" calls")]]
    modules = modules[counted.notna().any(axis=1)]  # a module no counter saw called
    shown = pd.DataFrame({"module": modules["module"], "type": modules["type"].fillna(""),
                          "params": modules["params"].map(fmt.count)})
    for column in modules.columns[3:]:
        if not column.endswith(" calls"):
            calls = modules[f"{column} calls"]
            shown[f"{column} FLOP/call (calls)"] = [
                "" if pd.isna(n) else f"{fmt.count(flops)} ({fmt.count(n)})"
                for flops, n in zip(modules[column], calls, strict=True)]
    return shown


def batches_table(report: Report) -> pd.DataFrame:
    batches = report.batches()
    if batches.empty:
        return pd.DataFrame()
    return pd.DataFrame({
        "batch size": batches["batch_size"].astype(str),
        "latency": batches["latency"].map(fmt.seconds),
        "throughput": batches["throughput"].map(fmt.rate),
        "peak memory": batches["peak_memory"].map(fmt.size),
    })
