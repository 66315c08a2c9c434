"""Operators as torch.profiler traced them (TensorBoard's operator view): per operator, or
per operator and its input shapes, its calls, host times, device times, FLOPs, and where
the trace has device work the plugin's Tensor Core columns: `tc_eligible` (1: it could use
Tensor Cores), `tc_self_share` and `tc_total_share` (its own device time, and with the
operators inside it, in kernels that use them)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pandas as pd

if TYPE_CHECKING:
    from profile_all.report.run_data import RunData

METRICS = ["calls", "cpu_time", "self_time", "gpu_time", "self_gpu_time", "flops",
           "tc_eligible", "tc_gpu_time", "tc_self_gpu_time"]


def _shares(table: pd.DataFrame) -> pd.DataFrame:
    if "tc_gpu_time" not in table.columns:
        return table
    table["tc_eligible"] = table["tc_eligible"].clip(upper=1.0)
    self_time = table["self_gpu_time"].where(table["self_gpu_time"] > 0)
    table["tc_self_share"] = table.pop("tc_self_gpu_time") / self_time
    table["tc_total_share"] = table.pop("tc_gpu_time") / table["gpu_time"].where(
        table["gpu_time"] > 0)
    return table


#: the grouping `by` asks for: its scope, and the column its group goes to
GROUPS = {"shape": ("operator_shape", "input_shapes"), "stack": ("operator_stack", "call_stack")}


def _grouped(data: RunData, by: str) -> pd.DataFrame:
    scope, column = GROUPS[by]
    rows = data.scoped(scope)
    rows = rows[rows["stat"] == "total"]
    if rows.empty:
        return pd.DataFrame(columns=["name", column, *METRICS[:5]])
    table = rows.groupby(["name", "parent", "metric"], sort=False)["value"].sum().unstack()
    table = table.reindex(columns=[m for m in METRICS[:5] if m in table.columns])
    table = table.reset_index().rename(columns={"parent": column})
    table.columns.name = None
    by = "self_gpu_time" if "self_gpu_time" in table and table["self_gpu_time"].sum() > 0 \
        else "self_time"
    return table.sort_values(by, ascending=False, ignore_index=True)


def grouped(data: RunData, by: str, top: int | None) -> pd.DataFrame:
    """Per operator and input shapes (`by="shape"`: the `input_shapes` column, traces
    recorded with `record_shapes=True`) or call stack (`by="stack"`: the `call_stack`
    column, traces whose operators carry a `Call stack`, recorded with `with_stack`)."""
    if by not in GROUPS:
        raise ValueError(f"operators(by=...) is 'operator', 'shape' or 'stack', not {by!r}")
    out = data.once(f"operator_view:{by}", lambda: _grouped(data, by))
    return out.head(top) if top else out


def with_shares(table: pd.DataFrame, top: int | None) -> pd.DataFrame:
    """The operators' table (`RunData._table` of METRICS), device time first where there
    is, with the Tensor Core shares."""
    if "gpu_time" in table.columns and table["gpu_time"].sum() > 0:
        table = table.sort_values("self_gpu_time", ascending=False, ignore_index=True)
    table = _shares(table.copy())
    return table.head(top) if top else table
