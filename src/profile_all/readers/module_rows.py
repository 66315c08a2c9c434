"""The module view of TensorBoard's profiler plugin, from a trace recorded with `with_stack`
or `with_modules` (its `nn.Module: Linear_0` python_function events).

Per module (scope `trace_module`: name as the plugin shows it, `Linear_0`; `parent` the
path of the modules around it, `Sequential_0/Sequential_1`), over its calls: `calls`;
`operators`, the operators directly inside it (not inside one of its operators or
modules); `cpu_time`, its host time; `self_time`, less the operators and modules directly
inside it; `gpu_time`, the device time of everything it launched; `self_gpu_time`, that
of the operators directly inside it (each with what it launched itself), as the plugin's
ModuleNode counts them.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from profile_all.readers.trace_links import parents
from profile_all.rows import row

_COLUMNS = ["name", "thread", "ts", "dur"]


def _one_thread(modules: pd.DataFrame, ops: pd.DataFrame) -> list[tuple]:
    """(path, name, dur, children's dur, direct operators, gpu, self gpu) of each module
    call of one thread."""
    both = pd.concat([modules.assign(module=True, gpu=0.0, self_gpu=0.0),
                      ops.assign(module=False, gpu=ops["gpu_time"],
                                 self_gpu=ops["self_gpu_time"])], ignore_index=True)
    both = both.sort_values(["ts", "dur", "module"], ascending=[True, False, False],
                            kind="stable", ignore_index=True)
    ts, dur = both["ts"].to_numpy(float), both["dur"].to_numpy(float)
    parent, depth = parents(ts, ts + dur)
    is_module = both["module"].to_numpy(bool)
    inside = np.zeros(len(both))  # the durations of what lies directly inside
    operators = np.zeros(len(both))
    gpu, self_gpu = both["gpu"].to_numpy(float).copy(), np.zeros(len(both))
    has_parent = parent >= 0
    np.add.at(inside, parent[has_parent], dur[has_parent])
    direct_op = has_parent & ~is_module
    np.add.at(operators, parent[direct_op], 1.0)
    np.add.at(self_gpu, parent[direct_op], both["self_gpu"].to_numpy(float)[direct_op])
    for level in range(int(depth.max(initial=0)), 0, -1):  # modules sum what is inside
        here = np.flatnonzero((depth == level) & has_parent & is_module)
        np.add.at(gpu, parent[here], gpu[here])
        here = np.flatnonzero((depth == level) & has_parent & ~is_module)
        mine = here[is_module[parent[here]]]
        np.add.at(gpu, parent[mine], gpu[mine])
    names = both["name"].to_numpy(object)
    calls = []
    for position in np.flatnonzero(is_module):
        path, above = [], parent[position]
        while above >= 0:
            if is_module[above]:
                path.append(names[above])
            above = parent[above]
        calls.append(("/".join(reversed(path)), names[position], dur[position],
                      inside[position], operators[position], gpu[position],
                      self_gpu[position]))
    return calls


def module_rows(modules: list[tuple], ops: pd.DataFrame, scale: float) -> list[list[Any]]:
    """`ops`: trace_links.operator_frame (its gpu_time and self_gpu_time in seconds)."""
    if not modules:
        return []
    calls_of = pd.DataFrame(modules, columns=_COLUMNS)
    if "gpu_time" not in ops.columns:
        ops = ops.assign(gpu_time=0.0, self_gpu_time=0.0)
    found = []
    for thread, mine in calls_of.groupby("thread", sort=False):
        found += _one_thread(mine, ops.loc[ops["thread"] == thread,
                                           [*_COLUMNS, "gpu_time", "self_gpu_time"]])
    table = pd.DataFrame(found, columns=["parent", "name", "dur", "inside", "operators",
                                         "gpu", "self_gpu"])
    rows = []
    for (parent, name), one in table.groupby(["parent", "name"], sort=False):
        host, inside = one["dur"].sum(), one["inside"].sum()
        rows += [row("trace_module", name, "calls", len(one), parent=parent),
                 row("trace_module", name, "operators", one["operators"].sum(), parent=parent,
                     unit="count"),
                 row("trace_module", name, "cpu_time", host * scale, parent=parent),
                 row("trace_module", name, "self_time", (host - inside) * scale, parent=parent),
                 row("trace_module", name, "gpu_time", one["gpu"].sum(), parent=parent),
                 row("trace_module", name, "self_gpu_time", one["self_gpu"].sum(),
                     parent=parent)]
    return rows
