"""profile-all's views of a trace beside TensorBoard's profiler plugin's own, on the same
trace.

The plugin (`pip install torch-tb-profiler==0.4.3`, which brings tensorboard) computes its
views with `RunProfileData`; profile-all ingests the same file. Compared: per step of the
plugin's overview, the step's time and each category of its breakdown (kernel, memcpy,
memset, communication, runtime, data loader, CPU exec, other), each within TOLERANCE (1%)
of the plugin's, absolute for a figure under 1% of the step; the GPU summary's shares
(utilization, estimated SM efficiency and occupancy, Tensor Core share) within half a
point, and its GPU utilization over time bucket by bucket; the kernel view's TOP kernels
(calls, time, blocks per SM, occupancy), alone and by the operator that launched them; the
operator view's TOP operators of most self device time (times, Tensor Core eligibility and
shares) and their call stacks; the memory view, per device and operator, exactly; the
module view, module by module.

On traces written by torch 2 and later the plugin (last released in 2022) is wrong in three
ways, known from the trace itself: it reads no CUDA runtime or driver call (their
categories, `cuda_runtime` and `cuda_driver`, are not in its `EventTypeMap`: its runtime
is 0 for a trace that holds thousands of `cudaLaunchKernel`); it counts NCCL's kernels as
computation kernels (it ties a kernel to communication only through the external id of an
`nccl:` operator, which torch 2's launches through `record_param_comms` do not carry); and
it drops every `user_annotation` range but steps and collectives, the DataLoader's
`enumerate(DataLoader)#...__next__` among them (its data loader is 0). On such a trace the
runtime it misses is its CPU exec, NCCL's kernel time its kernel, the data loader its CPU
exec and other: the step's time is compared, its device part (kernel, memcpy, memset,
communication) and its host part (runtime, data loader, CPU exec, other).

    python scripts/checks/against_tb_plugin.py TRACE [TRACE...]
"""

from __future__ import annotations

import gzip
import json
import logging
import sys
import tempfile
from pathlib import Path

import pandas as pd

import profile_all as pa

TOLERANCE = 0.01
SHARE_POINTS = 0.005  # half a point, for shares
TOP = 10  # kernels compared, most device time first
US = 1e-6
#: the plugin's ProfileRole order (its overview's legend), as profile-all names them
CATEGORIES = ["kernel", "memcpy", "memset", "communication", "runtime", "data_loader", "cpu",
              "other"]
#: the categories of a torch 2 trace the plugin cannot tell apart (above), compared summed
BLIND_SUMMED = {"device": ["kernel", "memcpy", "memset", "communication"],
                "host": ["runtime", "data_loader", "cpu", "other"]}


def _plugin(path: str):
    logging.disable(logging.WARNING)
    from torch_tb_profiler.profiler.data import RunProfileData

    return RunProfileData.parse("worker", "span", path, tempfile.mkdtemp())


def _blind(path: str) -> bool:
    """Whether the trace holds CUDA runtime calls in the categories the plugin drops."""
    opened = gzip.open if path.endswith(".gz") else open
    with opened(path, "rt") as source:
        events = json.load(source)
    events = events["traceEvents"] if isinstance(events, dict) else events
    return any(str(e.get("cat", "")).lower() in ("cuda_runtime", "cuda_driver") or (
        e.get("cat") == "user_annotation" and str(e.get("name")).startswith("enumerate("))
        for e in events)


def _check(label: str, ours: float, theirs: float, scale: float) -> bool:
    fine = abs(ours - theirs) <= TOLERANCE * max(abs(theirs), scale * TOLERANCE)
    print(f"{'ok  ' if fine else 'FAIL'} {label:44} profile-all {ours:12.1f} µs  "
          f"plugin {theirs:12.1f} µs")
    return fine


def _gpu(plugin, report) -> list[bool]:
    """The GPU summary per device: utilization, estimated SM efficiency and occupancy (the
    plugin's in percent), and the share of kernel time in Tensor Core kernels (the
    plugin's kernel view's, of every kernel: its summary's counts only the kernels it tied
    to an operator, none on a torch 2 trace)."""
    metrics = plugin.gpu_metrics_parser
    ours = report.gpu_metrics().set_index("device")
    fine = [sorted(ours.index) == [f"GPU {gpu}" for gpu in sorted(metrics.gpu_ids)]]
    for gpu in sorted(metrics.gpu_ids):
        mine = ours.loc[f"GPU {gpu}"]
        theirs = {"utilization": metrics.gpu_utilization[gpu],
                  "sm_efficiency": metrics.avg_approximated_sm_efficiency_per_device[gpu],
                  "occupancy": (metrics.avg_occupancy_per_device[gpu] or 0) / 100}
        if len(metrics.gpu_ids) == 1:
            theirs["tensor_core_share"] = plugin.tc_used_ratio or 0.0
        fine += [_share(f"GPU {gpu} {name}", mine[name], value)
                 for name, value in theirs.items() if value is not None]
    return fine


def _gpu_over_time(plugin, report) -> list[bool]:
    """GPU utilization over time, bucket by bucket (the plugin's last entry, a 0 at the
    end, is no bucket)."""
    timeline = report.timeline
    fine = []
    metrics = plugin.gpu_metrics_parser
    for gpu in sorted(metrics.gpu_ids):
        buckets = metrics.gpu_util_buckets[gpu]
        mine = timeline[(timeline["series"] == f"gpu:GPU {gpu}")
                        & (timeline["name"] == "utilization")]["value"].to_numpy()
        theirs = [value for _start, value in buckets[:-1]]
        worst = max((abs(a - b) for a, b in zip(mine, theirs, strict=False)), default=0.0)
        fine.append(len(mine) == len(theirs) and worst <= SHARE_POINTS)
        print(f"{'ok  ' if fine[-1] else 'FAIL'} GPU {gpu} utilization over time: "
              f"{len(mine)} buckets (plugin {len(theirs)}), largest difference "
              f"{100 * worst:.2f} points")
    return fine


def _kernels(plugin, report, blind: bool) -> list[bool]:
    """The kernel view's TOP kernels by device time: calls, total, mean, min and max time;
    blocks per SM and occupancy where every call carries them (the plugin counts a call
    without them as 0). On a trace it is not blind to (above), the same per kernel and the
    operator that launched it (the plugin's groups, finer by launch shape, summed)."""
    if plugin.kernel_stat is None:
        return []
    theirs = plugin.kernel_stat.sort_values("sum", ascending=False).head(TOP)
    ours = report.kernels().set_index("name")
    fine = []
    for name, kernel in theirs.iterrows():
        mine, label = ours.loc[name], f"kernel {name[:30]}"
        fine.append(mine["calls"] == kernel["count"])
        fine += [_check(f"{label} {what}", mine[column] / US, kernel[key], kernel[key])
                 for what, column, key in (("total", "gpu_time", "sum"),
                                           ("mean", "mean", "mean"), ("min", "min", "min"),
                                           ("max", "max", "max"))]
        fine += [_check(f"{label} {column}", mine[column] * scale, kernel[column],
                        kernel[column]) for column, scale in (("blocks_per_sm", 1),
                                                              ("occupancy", 100))
                 if not pd.isna(mine[column]) and kernel[column] > 0]
    if blind:
        return fine
    groups: dict[tuple[str, str], list[float]] = {}
    for group in plugin.kernel_list_groupby_name_op:
        summed = groups.setdefault((group.name, group.op_name), [0, 0.0])
        summed[0] += group.calls
        summed[1] += group.total_duration
    by_operator = report.kernels(by="operator").set_index(["name", "operator"])
    for (name, operator), (calls, total) in sorted(groups.items(), key=lambda g: -g[1][1])[:TOP]:
        mine = by_operator.loc[(name, operator)]
        fine.append(mine["calls"] == calls)
        fine.append(_check(f"kernel {name[:20]} by {operator[:20]}", mine["gpu_time"] / US,
                           total, total))
    return fine


def _operators(plugin, report) -> list[bool]:
    """The operator view's TOP operators by self device time: calls, host and device time
    (self and total), Tensor Core eligibility and shares. profile-all folds an operator
    that is the only child of one of its name into it (as torch's own tables do; the
    plugin keeps both): those are compared by device time alone."""
    theirs = sorted(plugin.op_list_groupby_name, key=lambda op: -op.self_device_duration)
    ours = report.operators().set_index("name")
    fine = []
    for op in theirs[:TOP]:
        mine, label = ours.loc[op.name], f"operator {op.name[:28]}"
        pairs = [("self device", mine.get("self_gpu_time", 0.0) / US, op.self_device_duration),
                 ("device", mine.get("gpu_time", 0.0) / US, op.device_duration)]
        if mine["calls"] == op.calls:
            pairs += [("self host", mine["self_time"] / US, op.self_host_duration),
                      ("host", mine["cpu_time"] / US, op.host_duration)]
        fine += [_check(f"{label} {what}", value, other, other)
                 for what, value, other in pairs]
        if "tc_eligible" not in mine:  # a trace without device work: no Tensor Core column
            continue
        fine.append(bool(mine["tc_eligible"]) == op.tc_eligible)
        fine += [_share(f"{label} Tensor Cores self", _known(mine["tc_self_share"]),
                        op.tc_self_ratio),
                 _share(f"{label} Tensor Cores total", _known(mine["tc_total_share"]),
                        op.tc_total_ratio)]
    return fine


def _modules(plugin, report) -> list[bool]:
    """The module view of a trace recorded with modules: per module of the plugin's tree,
    its calls and operators equal, host and device time (own and total) within 1%."""
    from torch_tb_profiler.profiler.module_op import aggegate_module_view

    theirs = aggegate_module_view(plugin.tid2tree, plugin.events)
    if not theirs:
        return []
    ours = report.module_view().set_index("path")
    fine = []

    def walk(modules, above: str) -> None:
        for module in modules:
            path = f"{above}/{module.name}" if above else module.name
            mine = ours.loc[path]
            fine.append(mine["calls"] == module.occurences
                        and mine["operators"] == module.operators)
            fine.extend(_check(f"module {path[-30:]} {what}", value / US, other, other)
                        for what, value, other in (
                            ("host", mine["cpu_time"], module.host_duration),
                            ("host self", mine["self_time"], module.self_host_duration),
                            ("device", mine["gpu_time"], module.device_duration),
                            ("device self", mine["self_gpu_time"],
                             module.self_device_duration)))
            walk(module.children, path)

    walk(theirs, "")
    return fine


def _stacks(plugin, report) -> list[bool]:
    """The operator view grouped by call stack (2021 traces recorded with_stack): each of
    the TOP operators' stacks, its calls equal and its host time within 1%."""
    ours = report.operators(by="stack").set_index(["name", "call_stack"])
    fine = []
    for name in [op.name for op in sorted(plugin.op_list_groupby_name,
                                          key=lambda op: -op.self_device_duration)][:TOP]:
        for group in plugin.stack_lists_group_by_name.get(name, []):
            stack = next(iter(group.callstacks))
            mine = ours.loc[(name, stack)]
            fine.append(mine["calls"] == group.calls)
            fine.append(_check(f"operator {name[:20]} by stack {stack[-20:]} host",
                               mine["cpu_time"] / US, group.host_duration, group.host_duration))
    return fine


def _known(value: float) -> float:
    """A share profile-all leaves NaN (no device time to share) is the plugin's 0."""
    return 0.0 if pd.isna(value) else value


def _memory(plugin, report) -> list[bool]:
    """The memory view of a trace recorded with memory: per device and operator its six
    figures and calls, each equal to the plugin's (bytes and counts: no tolerance)."""
    if plugin.memory_snapshot is None:
        return []
    theirs = plugin.memory_snapshot.get_memory_statistics(plugin.tid2tree)
    ours = report.operator_memory().set_index(["device", "operator"])
    columns = ["self_increase", "self_allocated", "self_allocations", "increase", "allocated",
               "allocations", "calls"]
    fine = [len(ours) == sum(len(operators) for operators in theirs.values())]
    print(f"{'ok  ' if fine[0] else 'FAIL'} memory view: {len(ours)} rows, plugin "
          f"{sum(len(operators) for operators in theirs.values())}")
    for device, operators in theirs.items():
        for operator, values in operators.items():
            mine = ours.loc[(device, operator), columns].tolist() \
                if (device, operator) in ours.index else None
            same = mine == [float(value) for value in values]
            if not same:
                print(f"FAIL memory {device} {operator}: profile-all {mine}, plugin {values}")
            fine.append(same)
    return fine


def _share(label: str, ours: float, theirs: float) -> bool:
    fine = abs(ours - theirs) <= SHARE_POINTS
    print(f"{'ok  ' if fine else 'FAIL'} {label:44} profile-all {ours:12.2%}     "
          f"plugin {theirs:12.2%}")
    return fine


def compare(path: str) -> bool:
    plugin = _plugin(path)
    report = pa.ingest([path], Path(tempfile.mkdtemp()) / "run")
    ours = report.step_time().set_index("step")
    blind = _blind(path)
    fine = [sorted(ours.index) == sorted(f"ProfilerStep#{n}" for n in plugin.steps_names)]
    print(f"{'ok  ' if fine[0] else 'FAIL'} steps: profile-all {list(ours.index)}, plugin "
          f"{plugin.steps_names}")
    for number, name in enumerate(plugin.steps_names):
        costs = plugin.steps_costs[number].costs
        step = ours.loc[f"ProfilerStep#{name}"]
        total = costs[len(CATEGORIES)]
        fine.append(_check(f"step {name} time", step["step_time"] / US, total, total))
        if blind:
            fine += [_check(f"step {name} {part}", step[summed].sum() / US,
                            sum(costs[CATEGORIES.index(c)] for c in summed), total)
                     for part, summed in BLIND_SUMMED.items()]
            continue
        fine += [_check(f"step {name} {category}", step[category] / US, costs[index], total)
                 for index, category in enumerate(CATEGORIES)]
    fine += _gpu(plugin, report) + _gpu_over_time(plugin, report)
    fine += _kernels(plugin, report, blind) + _memory(plugin, report)
    fine += _modules(plugin, report)
    if not blind:
        fine += _operators(plugin, report) + _stacks(plugin, report)
    print(f"{Path(path).name}: {'every figure within 1% of the plugin' if all(fine) else 'FAIL'}"
          + (" (a torch 2 trace: the step, its device and host parts)" if blind else ""))
    return all(fine)


if __name__ == "__main__":
    sys.exit(0 if all([compare(path) for path in sys.argv[1:]]) else 1)
