"""Where one rank's device time goes, as Holistic Trace Analysis (HTA) splits it: its
kernels by type, the time by type as a union over streams, each stream's idle gaps by
cause, and each launch's CPU time, device time and delay.

Kernel types are HTA's (`hta.utils.utils`): communication is a kernel named `nccl...Kernel`;
memory a copy or a fill (`Memcpy`, `Memset`, `dma`); computation any other kernel, less
those HTA counts as neither (a name holding `Memcpy` or `Sync`: `other`).

- `device_time`: from the first device activity's start to the last one's end (`span`),
  split so that each moment counts once, for the first type busy then: computation, then
  communication, memory, other; idle is the span that nothing covers. HTA's
  `non_compute_time` is communication + memory + other.
- `kernel_type`: the same time by the combination of types busy together ("computation +
  communication"), as HTA's kernel-type breakdown (computation, communication, memory).
- `stream`: each stream's busy time and its idle gaps (from one activity's end to the next
  one's start, HTA's idle time breakdown): host wait (the launch came after the stream had
  finished: the CPU did not keep up), kernel wait (a gap shorter than KERNEL_WAIT: the cost
  of launching back to back), other.
- `launch`: per runtime call (cudaLaunchKernel...), its CPU time, its activity's device
  time, and the launch delay (from the call's end to the activity's start, never below 0),
  with HTA's outliers: calls over SLOW_LAUNCH, delays over LATE_LAUNCH, and activities
  shorter than their launch (launch-bound work).
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pandas as pd

from profile_all.readers import intervals
from profile_all.rows import row

_COMMUNICATION = re.compile(r"nccl.*Kernel")
_MEMORY = re.compile(r"Memcpy|Memset|dma")
_NOT_COMPUTATION = re.compile(r"nccl.*Kernel|.*Memcpy|Memset|.*Sync")
#: device time types, in the order a moment is given to the first busy one
TYPES = ("computation", "communication", "memory", "other")
#: HTA's thresholds (microseconds in its API): a gap between two kernels of one stream
#: below which it is the cost of launching back to back; a runtime call, and a launch
#: delay, above which they are outliers
KERNEL_WAIT = 30e-6
SLOW_LAUNCH = 50e-6
LATE_LAUNCH = 100e-6


def launch_times(device: pd.DataFrame, runtime: pd.DataFrame) -> np.ndarray:
    """Per device activity, the start of the runtime call that launched it (NaN where the
    trace does not say)."""
    launch = device["launch"].to_numpy()
    launched = np.full(len(device), np.nan)
    launched[launch >= 0] = runtime["ts"].to_numpy(float)[launch[launch >= 0]]
    return launched


def _in_units(seconds: float, scale: float) -> float:
    """A threshold in the trace's units, rounded so that a gap of exactly 30 µs compares
    as HTA compares it in microseconds."""
    return round(seconds / scale, 6)


def kernel_type(name: str, kind: str) -> str:
    if kind != "kernel" or _MEMORY.match(name):
        return "memory"
    if _COMMUNICATION.match(name):
        return "communication"
    return "other" if _NOT_COMPUTATION.match(name) else "computation"


def typed(device: pd.DataFrame) -> np.ndarray:
    """Each device activity's type (TYPES)."""
    names = device["name"]
    by_name = {name: kernel_type(name, "kernel") for name in names.unique()}
    types = names.map(by_name).to_numpy(object)
    types[(device["kind"] != "kernel").to_numpy()] = "memory"
    return types


def _by_type(starts: np.ndarray, ends: np.ndarray, types: np.ndarray
             ) -> list[tuple[np.ndarray, np.ndarray]]:
    return [(starts[types == kind], ends[types == kind]) for kind in TYPES]


def split_rows(starts: np.ndarray, ends: np.ndarray, types: np.ndarray, scale: float,
               parent: str = "") -> list[list[Any]]:
    """`device_time` rows of activities within one span (the trace's, or a step's)."""
    if not len(starts):
        return []
    span = float(ends.max() - starts.min())
    lengths = intervals.prioritised(_by_type(starts, ends, types))
    lengths = [*lengths, span - sum(lengths)]
    rows = [row("device_time", kind, "gpu_time", length * scale, parent=parent)
            for kind, length in zip((*TYPES, "idle"), lengths, strict=True)]
    rows.append(row("device_time", "span", "gpu_span", span * scale, parent=parent))
    return rows


def combination_rows(starts: np.ndarray, ends: np.ndarray, types: np.ndarray,
                     scale: float, parent: str = "") -> list[list[Any]]:
    kinds = TYPES[:3]
    together = intervals.combinations(_by_type(starts, ends, types)[:3])
    return [row("kernel_type", " + ".join(k for bit, k in enumerate(kinds) if mask >> bit & 1),
                "gpu_time", length * scale, parent=parent) for mask, length in together.items()]


def _stream_rows(device: pd.DataFrame, launched_at: np.ndarray, scale: float
                 ) -> list[list[Any]]:
    rows = []
    streams = device["thread"].str.partition(":")[2]
    for stream, positions in device.groupby(streams.to_numpy(), sort=True).indices.items():
        order = positions[np.argsort(device["ts"].to_numpy(float)[positions], kind="stable")]
        starts = device["ts"].to_numpy(float)[order]
        ends = starts + device["dur"].to_numpy(float)[order]
        previous_end = np.maximum.accumulate(ends)[:-1]
        gaps = np.maximum(starts[1:] - previous_end, 0)
        host = launched_at[order][1:] > previous_end  # (NaN, no launch known: not host)
        short = ~host & (gaps < _in_units(KERNEL_WAIT, scale))
        gaps = gaps * scale
        name = stream if stream.startswith("stream") else f"stream {stream}"
        rows += [row("stream", name, "gpu_busy", intervals.union_length(starts, ends) * scale),
                 row("stream", name, "host_wait", gaps[host].sum()),
                 row("stream", name, "kernel_wait", gaps[short].sum()),
                 row("stream", name, "other_wait", gaps[~host & ~short].sum())]
    return rows


def _launch_rows(device: pd.DataFrame, runtime: pd.DataFrame, scale: float
                 ) -> list[list[Any]]:
    launched = device[device["launch"] >= 0]
    if launched.empty:
        return []
    calls = runtime.iloc[launched["launch"].to_numpy()]
    cpu = calls["dur"].to_numpy(float)
    gpu = launched["dur"].to_numpy(float)
    delay = np.maximum(launched["ts"].to_numpy(float)
                       - (calls["ts"] + calls["dur"]).to_numpy(float), 0)
    slow, late = _in_units(SLOW_LAUNCH, scale), _in_units(LATE_LAUNCH, scale)
    rows = []
    for name, positions in calls.groupby("name", sort=False).indices.items():
        mine_cpu, mine_gpu, mine_delay = cpu[positions], gpu[positions], delay[positions]
        rows += [row("launch", name, "calls", len(positions)),
                 row("launch", name, "wall_time", mine_cpu.sum() * scale),
                 row("launch", name, "gpu_time", mine_gpu.sum() * scale),
                 row("launch", name, "launch_delay", mine_delay.mean() * scale, stat="mean"),
                 row("launch", name, "launch_delay", np.median(mine_delay) * scale,
                     stat="median"),
                 row("launch", name, "launch_delay", mine_delay.max() * scale, stat="max"),
                 row("launch", name, "short_kernels", (mine_gpu < mine_cpu).sum()),
                 row("launch", name, "slow_launches", (mine_cpu > slow).sum()),
                 row("launch", name, "late_launches", (mine_delay > late).sum())]
    return rows


def device_time_rows(device: pd.DataFrame, runtime: pd.DataFrame, scale: float
                     ) -> list[list[Any]]:
    """Every row above, for one trace's device activities (`linked`: with the position of
    the runtime call that launched each, -1 where unknown), those its steps launched
    (step_time.launched_in_steps)."""
    if device.empty:
        return []
    starts = device["ts"].to_numpy(float)
    ends = starts + device["dur"].to_numpy(float)
    types = typed(device)
    launched_at = launch_times(device, runtime)
    return (split_rows(starts, ends, types, scale)
            + combination_rows(starts, ends, types, scale)
            + _stream_rows(device, launched_at, scale)
            + _launch_rows(device, runtime, scale))
