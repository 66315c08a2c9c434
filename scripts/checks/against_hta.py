"""profile-all's trace analyses beside Holistic Trace Analysis's own, on the same files.

HTA (`pip install --no-deps HolisticTraceAnalysis pydot pyyaml networkx`: its jupyterlab
requirement is not needed to compute) loads a folder of rank traces; profile-all ingests
the same folder. Compared per rank, where both define the measure the same way:

- temporal breakdown: idle, computation and non-computation time, and the span (HTA's
  `get_temporal_breakdown`, with `include_last_profiler_step=True`: HTA otherwise leaves
  the last step out, while profile-all's per-rank figures hold every step it launched);
- communication-computation overlap (`get_comm_comp_overlap`);
- the kernel-type breakdown (`get_gpu_kernel_breakdown`: time by types busy together);
- idle time per stream by cause (`get_idle_time_breakdown`, every stream);
- kernel launches (`get_cuda_kernel_launch_stats`: count, mean launch delay);
- device-side annotation ranges (`get_gpu_user_annotation_breakdown`: each range's time
  on the device, total, mean, min, max and standard deviation over its calls; profile-all's
  `gpu_span`).

On a trace of nanosecond times HTA rounds each event to whole microseconds by default
(on the A100 fixture that moves computation time 2.3% and the memory kernels' 45%);
the comparison turns that off (HTA_DISABLE_NS_ROUNDING=1), so that both read the same times.

Each figure within TOLERANCE (1%) of HTA's, else the line says FAIL and the exit code is 1.

    python scripts/checks/against_hta.py DIR_OF_RANK_TRACES
"""

from __future__ import annotations

import logging
import os
import sys
import tempfile
from pathlib import Path

import pandas as pd

import profile_all as pa

TOLERANCE = 0.01
US = 1e-6


def _hta(folder: str):
    """HTA shrinks every event of a nanosecond trace to whole microseconds (its start
    rounded up, its end down: pytorch/pytorch#122425) unless told not to; profile-all
    keeps the trace's times. Compared on the same times: HTA's rounding off."""
    logging.disable(logging.WARNING)
    os.environ["HTA_DISABLE_NS_ROUNDING"] = "1"
    from hta.trace_analysis import TraceAnalysis

    return TraceAnalysis(trace_dir=folder, include_last_profiler_step=True)


def _check(label: str, ours: float, theirs: float, scale: float = 1.0) -> bool:
    """Within TOLERANCE of HTA's, relative; absolute for figures under 1% of `scale`."""
    difference = abs(ours - theirs)
    fine = difference <= TOLERANCE * max(abs(theirs), scale * TOLERANCE)
    print(f"{'ok  ' if fine else 'FAIL'} {label:58} profile-all {ours:14.6g}  "
          f"HTA {theirs:14.6g}")
    return fine


def _kernel_types(analysis, report) -> list[bool]:
    """HTA's kernel-type breakdown truncates each piece of time to whole microseconds
    (`.astype(int)` in its breakdown_analysis), which its temporal breakdown does not: on
    a trace of whole microseconds that changes nothing and every combination is compared;
    on one of nanoseconds the time with computation in it is compared with HTA's
    temporal computation time instead."""
    types, _kernels = analysis.get_gpu_kernel_breakdown(visualize=False,
                                                        include_memory_kernels=True)
    mine = report.kernel_types()
    by_type = mine.groupby("kernel_type")["gpu_time"].sum()
    whole_us = all((trace["ts"] % 1 == 0).all() and (trace["dur"] % 1 == 0).all()
                   for trace in analysis.t.traces.values())
    if not whole_us:
        print("     kernel types: the trace's times are nanoseconds, HTA's breakdown "
              "truncates them; its temporal breakdown is the reference")
        temporal = analysis.get_temporal_breakdown(visualize=False).set_index("rank")
        return [_check(f"rank {rank} kernel types with computation (s)",
                       group.loc[group["kernel_type"].str.contains("computation"),
                                 "gpu_time"].sum(),
                       temporal.loc[rank, "compute_time(us)"] * US,
                       temporal.loc[rank, "kernel_time(us)"] * US)
                for rank, group in mine.groupby("rank")]
    results = []
    for _, theirs in types.iterrows():
        name = " + ".join(sorted(theirs["kernel_type"].lower().split(" overlapping "),
                                 key=["computation", "communication", "memory"].index))
        results.append(_check(f"kernel types, all ranks: {name} (s)",
                              by_type.get(name, 0.0), theirs["sum"] * US,
                              types["sum"].sum() * US))
    return results


def _annotations(analysis, report) -> list[bool]:
    """Each gpu_user_annotation range's time on the device, as HTA sums it (every range
    kept: no "other" group)."""
    theirs = analysis.get_gpu_user_annotation_breakdown(visualize=False, duration_ratio=1.0,
                                                        num_kernels=10**6)
    if theirs is None:
        return []
    rows = report.frame
    spans = rows[(rows["scope"] == "region") & (rows["metric"] == "gpu_span")]
    results = []
    for _, range_ in theirs.iterrows():
        if range_["name"].startswith("ProfilerStep#"):  # the steps: step_time()'s
            continue
        mine = spans[(spans["rank"] == int(range_["rank"])) & (spans["name"] == range_["name"])]
        mine = mine.set_index("stat")["value"]
        results += [_check(f"rank {int(range_['rank'])} {range_['name'][:30]} {stat} (s)",
                           mine.get(ours, float("nan")), range_[f"{stat} (us)"] * US)
                    for stat, ours in (("sum", "total"), ("mean", "mean"), ("min", "min"),
                                       ("max", "max"))]
        results.append(_check(f"rank {int(range_['rank'])} {range_['name'][:30]} std (s)",
                              mine.get("std", float("nan")), range_["stddev"] * US,
                              range_["mean (us)"] * US))
    return results


def compare(folder: str) -> bool:
    with tempfile.TemporaryDirectory() as out:
        report = pa.ingest([folder], out=Path(out) / "run")
    if report.device_time().empty:
        sys.exit(f"{folder}: no device activity in its traces: HTA's analyses are of GPU "
                 "kernels (HTA itself fails on such a trace)")
    analysis = _hta(folder)
    results = []
    ours = report.device_time().set_index("rank")
    for _, theirs in analysis.get_temporal_breakdown(visualize=False).iterrows():
        mine, rank = ours.loc[int(theirs["rank"])], int(theirs["rank"])
        span = theirs["kernel_time(us)"]
        results += [
            _check(f"rank {rank} span (s)", mine["span"], span * US),
            _check(f"rank {rank} idle (s)", mine["idle"], theirs["idle_time(us)"] * US,
                   span * US),
            _check(f"rank {rank} computation (s)", mine["computation"],
                   theirs["compute_time(us)"] * US, span * US),
            _check(f"rank {rank} non-computation (s)",
                   mine[["communication", "memory", "other"]].sum(),
                   theirs["non_compute_time(us)"] * US, span * US)]
    overlap = report.overlap().set_index("rank")
    for _, theirs in analysis.get_comm_comp_overlap(visualize=False).iterrows():
        rank = int(theirs["rank"])
        results.append(_check(f"rank {rank} communication overlapped (%)",
                              100 * overlap.loc[rank, "overlap_share"],
                              theirs["comp_comm_overlap_pctg"], 100))
    results += _kernel_types(analysis, report) + _annotations(analysis, report)
    streams = report.idle_streams()
    for rank in sorted(streams["rank"].unique()):
        theirs, _ = analysis.get_idle_time_breakdown(ranks=[int(rank)], visualize=False)
        mine = streams[streams["rank"] == rank].set_index("stream")
        for _, wait in theirs.iterrows():
            stream = f"stream {wait['stream']}"
            column = wait["idle_category"].replace("_wait", "") + "_wait"
            column = column if column in mine.columns else "other_wait"
            results.append(_check(f"rank {rank} {stream} {wait['idle_category']} (s)",
                                  mine.loc[stream, column], wait["idle_time"] * US,
                                  mine.loc[stream, ["host_wait", "kernel_wait",
                                                    "other_wait"]].sum()))
    launches = report.launches()
    ranks = sorted(launches["rank"].unique().tolist())
    for rank, theirs in analysis.get_cuda_kernel_launch_stats(
            ranks=ranks, visualize=False).items():
        mine = launches[launches["rank"] == rank]
        results += [
            _check(f"rank {rank} launches", mine["calls"].sum(), len(theirs)),
            _check(f"rank {rank} mean launch delay (s)",
                   (mine["delay_mean"] * mine["calls"]).sum() / mine["calls"].sum(),
                   theirs["launch_delay"].mean() * US)]
    print(f"{sum(results)} of {len(results)} within {TOLERANCE:.0%} of HTA's")
    return all(results)


if __name__ == "__main__":
    pd.set_option("display.width", 200)
    sys.exit(0 if compare(sys.argv[1]) else 1)
