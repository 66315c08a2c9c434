"""The row contract, below everything else: the report's columns, units, the helper that
makes one row, the region path, and the facts a backend states about its rows.

Backends and readers make rows; the report reads them. Neither knows the other: what the
report must know of a backend's rows (that they count FLOPs, forward only...) travels as
`Facts` in the run's meta, so a plug-in's counter or timer is used like a built-in one.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import Any

#: Column order of `Report.frame`. `parent` is the path of the enclosing region
#: ("train_step/forward"), empty for top-level regions and for every other scope.
COLUMNS = ["backend", "pass", "rank", "scope", "name", "parent", "metric", "stat", "value", "unit"]

#: Per-call samples (`Report.samples`, samples.parquet): a row per call of a region, step
#: or model iteration, kept so that two runs can be compared with their spread.
SAMPLE_COLUMNS = ["backend", "pass", "rank", "scope", "name", "parent", "metric", "value"]

#: The timeline (`Report.timeline`, timeline.parquet): what happened over the target's time,
#: in seconds since the pass's target started: a row per sample of a series (series `rss`:
#: name `process` or `children`, value in bytes, start = end; series `cuda`: name
#: `allocated`, the CUDA memory allocated as each step ended; series `step`: each step's end,
#: start = end, no value) or per call of a top-level region (series `region`: name its
#: path, start and end, no value).
TIMELINE_COLUMNS = ["backend", "pass", "rank", "series", "name", "start", "end", "value",
                    "unit"]

#: Columns a backend fills; the worker adds backend, pass and rank.
MEASURED = ["scope", "name", "parent", "metric", "stat", "value", "unit"]

#: rows profile-all makes itself: the model benchmark's timing, and numbers computed from
#: measured ones (achieved FLOP/s)
BENCHMARK = "bench"
DERIVED = "derived"
#: rows of what torch.compile did in a pass (scope `compile`), from torch's own records
COMPILER = "torch.compile"

#: the operator row that holds device time no operator launched (kernels launched outside
#: any operator, or whose launch is not in the trace): kept, never dropped
UNATTRIBUTED = "(unattributed)"

UNIT_OF_METRIC = {
    "wall_time": "s",
    "cpu_time": "s",
    "gpu_time": "s",
    "self_time": "s",
    "cumulative_time": "s",
    "self_gpu_time": "s",
    "calls": "count",
    "primitive_calls": "count",
    "events": "count",
    "flops": "FLOP",
    "macs": "MAC",
    "params": "count",
    # FLOP counters, per module: forward calls are `calls`
    "backward_calls": "count",
    "backward_flops": "FLOP",
    "attention_flops": "FLOP",  # forward FLOPs of scaled dot-product attention operators
    "outputs": "count",  # output elements, over the calls seen
    "bias_adds": "count",  # one per output element of a module with a `bias` parameter
    "module_type": "count",  # 1, with the module's class name in the stat column
    "latency": "s",
    "iterations": "count",
    "page_faults": "count",  # per timed iteration of a model (its process's, getrusage)
    # a model's median latency on CPU with glibc's heap held, where its timing pass's
    # iterations faulted pages in (model/allocator.py)
    "latency_memory_kept": "s",
    # ... and just before it, as it is (the two blocks of the comparison), its page faults
    # an iteration then, a page fault's time on the machine, the machine's speed change
    # around the two blocks (a ratio)
    "latency_memory_given_back": "s",
    "page_faults_given_back": "count",
    "page_fault_cost": "s",
    "timing_drift": "ratio",
    "peak_memory": "B",
    "bytes": "B",
    "gpu_span": "s",
    # a trace's device time as a union over streams; gloo's collectives' union on the host,
    # and how much of it operators overlapped (readers/host_communication.py)
    "gpu_busy": "s",
    "communication_time": "s",
    "communication_overlap": "s",
    "attributed_share": "ratio",
    # TensorBoard's GPU summary, per device of a trace (readers/gpu_metrics.py): shares of
    # the steps' span, and the device's properties (its name in the stat column of
    # `device_model`)
    "utilization": "ratio",
    "sm_efficiency": "ratio",
    "occupancy": "ratio",
    "tensor_core_share": "ratio",
    "device_model": "count",
    "total_memory": "B",
    "compute_capability": "count",
    # the plugin's kernel view (readers/kernel_rows.py): 1 where a kernel uses Tensor Cores;
    # Kineto's blocks per SM and estimated achieved occupancy (a share), duration-weighted
    "tensor_cores": "count",
    # an operator's device time in Tensor Core kernels (its own launches, and with those
    # inside it), and 1 where it could use them (readers/trace_links.operator_frame)
    "tc_gpu_time": "s",
    "tc_self_gpu_time": "s",
    "tc_eligible": "count",
    "blocks_per_sm": "count",
    # HTA's analyses of a trace (readers/device_time.py): a stream's idle gaps by cause,
    # and per launch (runtime call) its delay and its outliers
    "host_wait": "s",
    "kernel_wait": "s",
    "other_wait": "s",
    "launch_delay": "s",
    "short_kernels": "count",
    "slow_launches": "count",
    "late_launches": "count",
    # torch.compile, per pass (scope `compile`): Dynamo's and its backend's time, graphs made,
    # compilations of a frame, recompiles (a guard failed), graph breaks
    "compile_time": "s",
    "graphs": "count",
    "compiles": "count",
    "recompiles": "count",
    "graph_breaks": "count",
    # steps left out of per-step statistics (the first; those that compiled)
    "excluded_calls": "count",
    # a sampling profiler's (Facts.sampled): stacks seen, those where a function was the
    # innermost frame, the time between two samples, and a thread's time on the CPU (its
    # samples, where only running threads were sampled) and off it (idle: its wall time
    # less its samples)
    "samples": "count",
    "self_samples": "count",
    "sample_interval": "s",
    "active_time": "s",
    "sampled_time": "s",  # what a thread's samples stand for, idle ones among them
    "idle_time": "s",
    # a process's threads, as the OS counts them (profile-all attach)
    "threads": "count",
    # 1 on a line of a function asked for by name (--memory-lines, --py-spy-lines)
    "named": "count",
    # a root module's calls of one grad mode and input shapes, and their forward FLOPs (the
    # group in the stat column: "grad 4x16", "no_grad 1x17")
    "group_calls": "count",
    "group_flops": "FLOP",
    "group_outputs": "count",
    # a module's forward calls and FLOPs within one such group (of the groups a report can
    # stand for: the training calls, the most numerous)
    "group_module_calls": "count",
    "group_module_flops": "FLOP",
    # a root module's first call (what per-call counters count): each module's FLOPs and
    # attention FLOPs in it, and the root's output elements
    "first_call_flops": "FLOP",
    "first_call_attention_flops": "FLOP",
    "first_call_outputs": "count",
}


def row(scope: str, name: str, metric: str, value: float, *, stat: str = "total",
        parent: str = "", unit: str | None = None) -> list[Any]:
    """One measured value, in the MEASURED column order, in SI base units."""
    return [scope, name, parent, metric, stat, float(value), unit or UNIT_OF_METRIC[metric]]


def region_path(parent: str, name: str) -> str:
    """`parent/name` for a region inside another, `name` for the rest."""
    return f"{parent}/{name}" if parent else name


#: joins a call tree's callers (scope `call`): function names hold `/`
CALL_SEPARATOR = " ▸ "


def call_path(parent: str, name: str) -> str:
    """A call tree node's id: the path of its callers, then its own name."""
    return f"{parent}{CALL_SEPARATOR}{name}" if parent else name


def region_paths(parents: Iterable[str], names: Iterable[str]) -> list[str]:
    return [region_path(parent, name) for parent, name in zip(parents, names, strict=True)]


@dataclasses.dataclass(frozen=True)
class Facts:
    """What the report must know of a backend's rows to use them without naming it."""

    #: its `module` rows count FLOPs (and `macs` where it counts those): the counters table
    counts_flops: bool = False
    #: it counts the forward pass only; with training the backward is estimated as 2x
    forward_only: bool = False
    #: its count is exact, forward and backward measured: the one others are compared with
    exact: bool = False
    #: products it cannot place in a module (a functional matmul) are counted at the root
    unplaced_at_root: bool = False
    #: the metric its `region` rows time regions with ("gpu_time", "wall_time"): FLOP/s
    region_timer: str = ""
    #: its function, call and line rows are estimates from stacks sampled at a rate
    #: (`samples` rows give the counts, `sample_interval` the rate), not measured call by
    #: call: they carry a sampling error, and the profiler does not slow what it samples
    sampled: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {key: value for key, value in dataclasses.asdict(self).items() if value}

    @classmethod
    def from_dict(cls, given: Mapping[str, Any]) -> Facts:
        known = {field.name for field in dataclasses.fields(cls)}
        return cls(**{key: value for key, value in given.items() if key in known})
