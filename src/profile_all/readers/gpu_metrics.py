"""The GPU summary of TensorBoard's profiler plugin, per device of a trace (scope `gpu`,
named `GPU <device>`), computed as the plugin's GPUMetricsParser does:

- `utilization`: the time a kernel ran on the device within the steps (from the first
  step's begin to the last one's end, as step_time.py tiles them; the whole trace's host
  span where it has no step) over that span;
- `sm_efficiency` (estimated): each moment's blocks per SM of the kernels running then,
  summed and capped at 1, over the same span (Kineto's `blocks per SM`);
- `occupancy` (estimated achieved): the kernels' `est. achieved occupancy %` within the span,
  weighted by their time there;
- `tensor_core_share`: the device's kernel time in kernels that use Tensor Cores, told by
  their name as the plugin tells them (NVIDIA PyProf's list: `h884`, `hmma`, `xmma_gemm`...);
- `total_memory` and `compute_capability` (major + minor / 10) from the trace's
  `deviceProperties`, and its name in the `stat` column of `device_model`.
"""

from __future__ import annotations

from itertools import pairwise
from typing import Any

import numpy as np
import pandas as pd

from profile_all.readers import intervals
from profile_all.rows import row

#: substrings of the names of kernels that use Tensor Cores (the plugin's TC_Allowlist,
#: from NVIDIA PyProf's prof/tc.py)
TENSOR_CORE_KERNELS = ("h884", "s884", "h1688", "s1688", "hmma", "i8816", "16816",
                       "dgrad_1x1_stride_2x2", "first_layer_wgrad_kernel", "conv1x1",
                       "conv2d_c1_k1", "direct_group", "xmma_implicit_gemm", "xmma_sparse_conv",
                       "xmma_warp_specialized_implicit_gemm", "xmma_gemm", "xmma_sparse_gemm",
                       "c1688")


#: the operators that could run on Tensor Cores (the plugin's TC_OP_Allowlist: those autocast
#: runs in lower precision, and the backward of those)
TENSOR_CORE_OPERATORS = [
    "aten::_convolution", "aten::conv1d", "aten::conv2d", "aten::conv3d", "aten::conv_tbc",
    "aten::conv_transpose1d", "aten::conv_transpose2d", "aten::conv_transpose3d",
    "aten::convolution", "aten::cudnn_convolution", "aten::cudnn_convolution_transpose",
    "aten::prelu", "aten::addmm", "aten::addmv", "aten::addr", "aten::matmul", "aten::mm",
    "aten::mv", "aten::linear", "aten::addbmm", "aten::baddbmm", "aten::bmm",
    "aten::chain_matmul", "aten::linalg_multi_dot", "aten::_thnn_fused_lstm_cell",
    "aten::_thnn_fused_gru_cell", "aten::lstm_cell", "aten::gru_cell", "aten::rnn_tanh_cell",
    "aten::rnn_relu_cell", "CudnnConvolutionBackward", "BmmBackward0",
    "aten::cudnn_convolution_transpose_backward", "CudnnConvolutionTransposeBackward",
    "MmBackward", "aten::cudnn_convolution_backward_weight", "aten::addmm_", "AddmvBackward",
    "MvBackward", "aten::cudnn_convolution_transpose_backward_weight",
    "aten::cudnn_convolution_transpose_backward_input", "AddmmBackward",
    "aten::cudnn_convolution_backward_input", "AddbmmBackward",
    "aten::cudnn_convolution_backward"]


def uses_tensor_cores(name: str) -> bool:
    return any(pattern in name for pattern in TENSOR_CORE_KERNELS)


def _sm_efficiency(starts: np.ndarray, ends: np.ndarray, blocks: np.ndarray,
                   low: float, high: float) -> float:
    """The time-weighted sum of `min(blocks per SM of the kernels running, 1)` within
    [low, high] (each moment's running sum, as the plugin sweeps the kernels' ends)."""
    begin, end, value = _levels(starts, ends, blocks)
    return float((value * (np.clip(end, low, high) - np.clip(begin, low, high))).sum())


def _levels(starts: np.ndarray, ends: np.ndarray, blocks: np.ndarray
            ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(starts, ends, values): each span between two kernel edges and its estimated SM
    efficiency, the blocks per SM of the kernels running then summed and capped at 1."""
    times = np.concatenate([starts, ends])
    steps = np.concatenate([blocks, -blocks])
    order = np.lexsort((np.r_[np.zeros(len(starts)), np.ones(len(ends))], times))
    times, level = times[order], np.cumsum(steps[order])
    value = np.where(level[:-1] > 0, np.minimum(level[:-1], 1.0), 0.0)
    return times[:-1], times[1:], value


def _device_rows(name: str, kernels: pd.DataFrame, low: float, high: float,
                 scale: float) -> list[list[Any]]:
    starts = kernels["ts"].to_numpy(float)
    ends = starts + kernels["dur"].to_numpy(float)
    length = high - low
    rows = []
    if length > 0:
        merged = intervals.merged(starts, ends)
        busy = intervals.clipped(*merged, low, high)
        rows.append(row("gpu", name, "utilization", float((busy[1] - busy[0]).sum()) / length,
                        stat="value", unit="ratio"))
        blocks = kernels["blocks_per_sm"].to_numpy(float)
        known = blocks > 0
        if known.any():
            rows.append(row("gpu", name, "sm_efficiency", _sm_efficiency(
                starts[known], ends[known], blocks[known], low, high) / length,
                stat="value", unit="ratio"))
    occupancy = kernels["occupancy"].to_numpy(float)
    inside = np.clip(ends, low, high) - np.clip(starts, low, high)
    weighted = (occupancy >= 0) & (inside > 0)
    if weighted.any():
        rows.append(row("gpu", name, "occupancy", float(np.average(
            occupancy[weighted], weights=inside[weighted])), stat="value", unit="ratio"))
    durations = kernels["dur"].to_numpy(float)
    if durations.sum() > 0:
        tensor = kernels["name"].map(uses_tensor_cores).to_numpy(bool)
        rows.append(row("gpu", name, "tensor_core_share",
                        durations[tensor].sum() / durations.sum(), stat="value", unit="ratio"))
    rows.append(row("gpu", name, "gpu_time", durations.sum() * scale))
    return rows


def _properties(name: str, properties: dict) -> list[list[Any]]:
    rows = []
    if isinstance(properties.get("name"), str):
        rows.append(row("gpu", name, "device_model", 1, stat=properties["name"], unit="count"))
    memory = properties.get("totalGlobalMem")
    if isinstance(memory, int | float) and memory > 0:
        rows.append(row("gpu", name, "total_memory", memory, stat="value", unit="B"))
    major, minor = properties.get("computeMajor"), properties.get("computeMinor")
    if isinstance(major, int) and isinstance(minor, int):
        rows.append(row("gpu", name, "compute_capability", major + minor / 10, stat="value",
                        unit="count"))
    return rows


def gpu_rows(device: pd.DataFrame, span: tuple[float, float] | None,
             properties: list[Any], scale: float) -> list[list[Any]]:
    """Per device that ran a kernel, its summary rows; `span`: the steps' (begin, end), in
    the trace's unit; `properties`: the trace's deviceProperties, by device id."""
    kernels = device[device["kind"] == "kernel"]
    if kernels.empty or span is None:
        return []
    rows = []
    by_id = {entry.get("id", number): entry for number, entry in enumerate(properties)
             if isinstance(entry, dict)}
    for device_id, group in kernels.groupby(kernels["device"].fillna(-1), sort=True):
        number = int(device_id)
        name = f"GPU {number}" if number >= 0 else "GPU (unknown)"
        rows += _device_rows(name, group, *span, scale)
        rows += _properties(name, by_id.get(number, {}))
    return rows


#: the most buckets of the GPU metrics over time (the plugin's: a power of ten of µs each)
BUCKETS = 100


def gpu_timeline(device: pd.DataFrame, extent: tuple[float, float], scale: float
                 ) -> list[list[Any]]:
    """The timeline's `gpu:<device>` series: utilization, estimated SM efficiency and
    occupancy in buckets as the plugin makes them for its GPU utilization: over `extent`
    (the trace's unit: the profiler's own span, else its events'), of a power of ten of
    microseconds that makes at most BUCKETS, the last one longer to reach the extent's end;
    each at its bucket's start (seconds since the extent's start)."""
    kernels = device[device["kind"] == "kernel"]
    if kernels.empty:
        return []
    origin, end = extent
    size = 1e-6 / scale  # one µs in the trace's unit
    while (end - origin) / size > BUCKETS:
        size *= 10
    edges = origin + size * np.arange(max(int((end - origin) / size), 1) + 1)
    edges[-1] = max(end, origin + size)
    entries = []
    for device_id, group in kernels.groupby(kernels["device"].fillna(-1), sort=True):
        starts = group["ts"].to_numpy(float)
        ends = starts + group["dur"].to_numpy(float)
        merged = intervals.merged(starts, ends)
        blocks = group["blocks_per_sm"].to_numpy(float)
        known = blocks > 0
        levels = _levels(starts[known], ends[known], blocks[known]) if known.any() else None
        occupancy = group["occupancy"].to_numpy(float)
        series = f"gpu:GPU {int(device_id)}" if device_id >= 0 else "gpu:GPU (unknown)"
        for low, high in pairwise(edges):
            at, width = (low - origin) * scale, high - low
            busy = intervals.clipped(*merged, low, high)
            entries.append([series, "utilization", at, at,
                            float((busy[1] - busy[0]).sum()) / width, "ratio"])
            if levels is not None:
                held = np.clip(levels[1], low, high) - np.clip(levels[0], low, high)
                entries.append([series, "sm_efficiency", at, at,
                                float((levels[2] * held).sum()) / width, "ratio"])
            inside = np.clip(ends, low, high) - np.clip(starts, low, high)
            weighted = (occupancy >= 0) & (inside > 0)
            if weighted.any():
                entries.append([series, "occupancy", at, at, float(np.average(
                    occupancy[weighted], weights=inside[weighted])), "ratio"])
    return entries
