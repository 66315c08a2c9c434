"""The kernel view of TensorBoard's profiler plugin: per kernel (scope `kernel`) its calls,
device time (total, mean, min, max), whether it uses Tensor Cores (told by its name, as
gpu_metrics.py tells it), and the means of its `blocks per SM` and `est. achieved
occupancy %` weighted by duration (over the calls that carry them: the plugin counts a
call without them as 0); and the same per kernel and the operator that launched it (scope
`kernel_operator`, the operator its parent), as the plugin's "group by kernel and
operator". Copies and fills (scopes `memcpy`, `memset`) get their calls, time and bytes.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from profile_all.readers.gpu_metrics import uses_tensor_cores
from profile_all.rows import row

_UNKNOWN_OPERATOR = "(no operator)"


def _weighted(values: np.ndarray, weights: np.ndarray) -> float | None:
    known = ~np.isnan(values)
    if not known.any() or weights[known].sum() <= 0:
        return None
    return float(np.average(values[known], weights=weights[known]))


def _kernel_rows(scope: str, name: str, parent: str, calls: pd.DataFrame,
                 scale: float) -> list[list[Any]]:
    seconds = calls["dur"].to_numpy(float) * scale
    rows = [row(scope, name, "calls", len(seconds), parent=parent),
            row(scope, name, "gpu_time", seconds.sum(), parent=parent),
            row(scope, name, "gpu_time", seconds.mean(), stat="mean", parent=parent),
            row(scope, name, "gpu_time", seconds.min(), stat="min", parent=parent),
            row(scope, name, "gpu_time", seconds.max(), stat="max", parent=parent),
            row(scope, name, "tensor_cores", float(uses_tensor_cores(name)), stat="value",
                parent=parent)]
    for metric in ("blocks_per_sm", "occupancy"):
        mean = _weighted(calls[metric].to_numpy(float), seconds)
        if mean is not None:
            rows.append(row(scope, name, metric, mean, stat="mean", parent=parent))
    return rows


def device_rows(device: pd.DataFrame, operators: pd.DataFrame | None,
                scale: float) -> list[list[Any]]:
    """Kernels (alone, and by the operator that launched them: `operators` is
    trace_links.operator_frame, None without operators), copies and fills with bytes."""
    rows = []
    kernels = device[device["kind"] == "kernel"]
    for name, calls in kernels.groupby("name", sort=False):
        rows += _kernel_rows("kernel", name, "", calls, scale)
    if operators is not None and not kernels.empty:
        launcher = operators.attrs["launcher"][(device["kind"] == "kernel").to_numpy()]
        names = np.where(launcher >= 0, operators["name"].to_numpy(object)[launcher],
                         _UNKNOWN_OPERATOR)
        for (name, operator), calls in kernels.assign(operator=names).groupby(
                ["name", "operator"], sort=False):
            rows += _kernel_rows("kernel_operator", name, operator, calls, scale)
    for (kind, name), calls in device[device["kind"] != "kernel"].groupby(
            ["kind", "name"], sort=False):
        seconds = calls["dur"].to_numpy(float) * scale
        rows += [row(kind, name, "calls", len(seconds)), row(kind, name, "gpu_time", seconds.sum()),
                 row(kind, name, "gpu_time", seconds.mean(), stat="mean"),
                 row(kind, name, "bytes", calls["bytes"].sum())]
    return rows
