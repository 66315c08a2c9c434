"""The operator tree of a trace: each operator under the path of the operators around it,
over all its calls (scope `operator_tree`: name the operator, parent the names above it
joined by `/`; calls, host time `cpu_time`, device time `gpu_time` with what the
operators inside it launched). TensorBoard's diff view set two runs' trees side by side;
report/operator_tree.py does.

Calls are merged into nodes a level at a time, vectorised: a node is (its parent's node,
its name). Only the nodes get paths, and those hold at most nesting.MAX_REGIONS nodes and
nesting.path_budget(calls) characters in names and paths, outermost first: the nodes
beyond (and all below them), and operators deeper than depth_cap.MAX_DEPTH, are left out
and counted.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from profile_all.depth_cap import MAX_DEPTH
from profile_all.readers import nesting
from profile_all.rows import region_path, row


def _nodes(ops: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(per call its node or -1 beyond MAX_DEPTH, per node its parent node or -1, per node
    its name's code, the names by code), nodes numbered level by level."""
    parent, depth = ops["parent"].to_numpy(), ops["depth"].to_numpy()
    codes, _names = pd.factorize(ops["name"])
    node = np.full(len(ops), -1)
    node_parent, node_name = [np.empty(0, int)], [np.empty(0, int)]
    made = 0
    for level in range(min(int(depth.max(initial=-1)) + 1, MAX_DEPTH)):
        here = np.flatnonzero(depth == level)
        above = node[parent[here]] if level else np.full(len(here), -1)
        key = (above + 1) * (len(_names) + 1) + codes[here]
        unique, inverse = np.unique(key, return_inverse=True)
        node[here] = made + inverse
        node_parent.append(unique // (len(_names) + 1) - 1)
        node_name.append(unique % (len(_names) + 1))
        made += len(unique)
    return (node, np.concatenate(node_parent), np.concatenate(node_name),
            _names.to_numpy(object))


def operator_tree_rows(ops: pd.DataFrame, path: object) -> tuple[list[list[Any]], list[str]]:
    """(the rows, the doubts on what was left out). `ops`: trace_links.operator_frame of
    the trace at `path`."""
    if ops.empty:
        return [], []
    node, node_parent, node_name, names = _nodes(ops)
    counted = node >= 0
    sums = {metric: np.bincount(node[counted], weights=ops[metric].to_numpy(float)[counted],
                                minlength=len(node_parent))
            for metric in ("cpu_time", "gpu_time") if metric in ops.columns}
    calls = np.bincount(node[counted], minlength=len(node_parent))
    paths = np.full(len(node_parent), None, dtype=object)
    used, kept, budget = 0, 0, nesting.path_budget(len(ops))
    for position, (above, code) in enumerate(zip(node_parent, node_name, strict=True)):
        parent_path = "" if above < 0 else paths[above]
        if parent_path is None or kept >= nesting.MAX_REGIONS:
            continue  # (its parent was left out)
        used += len(parent_path) + len(names[code])
        if used > budget:
            continue
        paths[position], kept = region_path(parent_path, names[code]), kept + 1
    rows = []
    for position in np.flatnonzero(pd.notna(paths)):
        above = node_parent[position]
        parent_path, name = "" if above < 0 else paths[above], names[node_name[position]]
        rows.append(row("operator_tree", name, "calls", calls[position], parent=parent_path))
        rows += [row("operator_tree", name, metric, values[position], parent=parent_path)
                 for metric, values in sums.items()]
    return rows, _said(path, len(node_parent) - kept, int((~counted).sum()))


def _said(path: object, nodes: int, too_deep: int) -> list[str]:
    said = [f"{path}: {nodes:,} nodes of the operator tree left out past "
            f"{nesting.MAX_REGIONS:,} nodes or {nesting.PATH_CHARS_PER_RANGE} characters an "
            "operator call of their names and paths (their time is in the nodes around them)"
            ] if nodes else []
    return said + ([f"{path}: {too_deep:,} operator calls deeper than {MAX_DEPTH} levels "
                    "left out of the operator tree"] if too_deep else [])
