"""The kernel view of TensorBoard's profiler plugin (readers/kernel_rows.py): per kernel, or
per kernel and the operator that launched it, its calls and device time (total, mean, min,
max), whether it uses Tensor Cores, and its blocks per SM and estimated achieved occupancy
(means weighted by device time, over every pass and rank that ran it; NaN where no trace
said them: an Nsight file, an older trace)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

if TYPE_CHECKING:
    from profile_all.report.run_data import RunData

COLUMNS = ["calls", "gpu_time", "mean", "min", "max", "tensor_cores", "blocks_per_sm",
           "occupancy"]
_KEYS = ["backend", "pass", "rank", "name", "parent"]


def _details(rows: pd.DataFrame) -> pd.DataFrame:
    """Per (name, parent): min, max, tensor_cores, and the weighted means."""
    def picked(metric: str, stat: str) -> pd.Series:
        chosen = rows[(rows["metric"] == metric) & (rows["stat"] == stat)]
        return chosen.set_index(_KEYS)["value"]

    out = pd.DataFrame({"min": picked("gpu_time", "min").groupby(level=[3, 4]).min(),
                        "max": picked("gpu_time", "max").groupby(level=[3, 4]).max(),
                        "tensor_cores": picked("tensor_cores", "value")
                        .groupby(level=[3, 4]).max()})
    weights = picked("gpu_time", "total")
    for metric in ("blocks_per_sm", "occupancy"):
        means = picked(metric, "mean")
        weight = weights.reindex(means.index).fillna(0.0)
        summed = (means * weight).groupby(level=[3, 4]).sum()
        out[metric] = summed / weight.groupby(level=[3, 4]).sum().replace(0.0, np.nan)
    return out


def table(data: RunData, by: str, top: int | None) -> pd.DataFrame:
    """`by`: "kernel" (a row per kernel) or "operator" (per kernel and its operator, the
    `operator` column)."""
    scope = {"kernel": "kernel", "operator": "kernel_operator"}[by]
    rows = data.scoped(scope)
    keys = ["name", "operator"] if by == "operator" else ["name"]
    if rows.empty:
        return pd.DataFrame(columns=[*keys, *COLUMNS])

    def whole() -> pd.DataFrame:
        totals = rows[rows["stat"] == "total"].groupby(
            ["name", "parent", "metric", "backend"], sort=False)["value"].sum()
        base = totals.groupby(level=[0, 1, 2], sort=False).max().unstack("metric")
        base = base.reindex(columns=["calls", "gpu_time"])
        base["mean"] = base["gpu_time"] / base["calls"].where(base["calls"] > 0)
        out = base.join(_details(rows)).reindex(columns=COLUMNS)
        out = out.sort_values("gpu_time", ascending=False).reset_index()
        out = out.rename(columns={"parent": "operator"})
        return out[[*keys, *COLUMNS]]

    out = data.once(f"kernel_view:{by}", whole)
    return out.head(top) if top else out
