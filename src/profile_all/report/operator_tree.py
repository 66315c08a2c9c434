"""A trace's operator tree (readers/operator_tree.py) as a table, and two runs' trees side
by side, as TensorBoard's diff view set a baseline's and an experiment's: each operator
under the path of those around it, its calls, host and device time on each side and the
change, in the tree's order (depth first; siblings by the larger host time of the two,
largest first). An operator in one run only has the other's figures empty.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from profile_all.rows import region_path

if TYPE_CHECKING:
    from profile_all.report.run_data import RunData

MEASURES = ["calls", "cpu_time", "gpu_time"]
_KEYS = ["parent", "name"]


def tree(data: RunData) -> pd.DataFrame:
    """The run's operator tree, over its ranks and passes: `path` (of the operators around
    it), `name`, `depth`, calls, cpu_time, gpu_time."""
    return data.once("operator_tree", lambda: _ordered(_summed(data), ["cpu_time"]))


def side_by_side(a: RunData, b: RunData) -> pd.DataFrame:
    """Run `a`'s and `b`'s trees joined node by node: `path`, `name`, `depth`, then each
    measure for a and b (`calls_a`, `calls_b`, ...) and the change b / a - 1 of the times
    (`cpu_change`, `gpu_change`)."""
    both = _summed(a).merge(_summed(b), on=_KEYS, how="outer", suffixes=("_a", "_b"))
    for metric in MEASURES:
        for side in ("_a", "_b"):
            if metric + side not in both.columns:
                both[metric + side] = np.nan
    for metric, change in (("cpu_time", "cpu_change"), ("gpu_time", "gpu_change")):
        before = both[f"{metric}_a"]
        both[change] = both[f"{metric}_b"] / before.where(before > 0) - 1
    columns = [f"{metric}{side}" for metric in MEASURES for side in ("_a", "_b")]
    ordered = _ordered(both, ["cpu_time_a", "cpu_time_b"])
    return ordered[["path", "name", "depth", *columns, "cpu_change", "gpu_change"]]


def _summed(data: RunData) -> pd.DataFrame:
    rows = data.scoped("operator_tree")
    rows = rows[rows["stat"] == "total"]
    if rows.empty:
        return pd.DataFrame(columns=[*_KEYS, *MEASURES])
    table = rows.groupby([*_KEYS, "metric"], sort=False)["value"].sum().unstack()
    table = table.reindex(columns=[m for m in MEASURES if m in table.columns]).reset_index()
    table.columns.name = None
    return table


def _ordered(table: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    """`table` in its tree's order, depth first, each node's children by the largest of
    `by` first; with `path` (the parent's path) and `depth`."""
    if table.empty:
        return table.rename(columns={"parent": "path"}).assign(depth=pd.Series(dtype=int))
    weight = table[by].max(axis=1).fillna(0.0).to_numpy()
    children: dict[str, list[int]] = {}
    for position, parent in enumerate(table["parent"]):
        children.setdefault(parent, []).append(position)
    order, depths = [], []
    names, parents = table["name"].to_numpy(object), table["parent"].to_numpy(object)
    stack = [(position, 0) for position in sorted(children.get("", []),
                                                   key=lambda p: weight[p])]
    while stack:
        position, depth = stack.pop()
        order.append(position)
        depths.append(depth)
        below = children.get(region_path(parents[position], names[position]), [])
        stack += [(child, depth + 1) for child in sorted(below, key=lambda p: weight[p])]
    ordered = table.iloc[order].rename(columns={"parent": "path"}).reset_index(drop=True)
    ordered.insert(2, "depth", depths)
    return ordered
