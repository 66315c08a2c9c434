"""Findings from the trace analyses per rank and step (report/trace_analyses.py): the rank
the others wait for, and device work that its launches hold back."""

from __future__ import annotations

from typing import TYPE_CHECKING

from profile_all import units as fmt
from profile_all.report import trace_analyses
from profile_all.report.findings.finding import Finding

if TYPE_CHECKING:
    from profile_all.report.run_data import RunData

#: a rank computing this much more than the median rank in a step is the one others wait for
COMPUTATION_EXCESS = 0.1
#: launch-bound: this share of the launches or more ran shorter on the device than the
#: call that launched them took on the CPU
SHORT_LAUNCHES = 0.5


def computation_straggler(report: RunData) -> list[Finding]:
    """The step where one rank computed the most beyond the median rank: in a collective
    every other rank waits for it, so its excess is the others' communication time."""
    steps = trace_analyses.of(report, "stragglers")
    steps = steps.dropna(subset=["computation_spread"])
    if steps.empty:
        return []
    worst = steps.loc[steps["computation_spread"].idxmax()]
    excess = float(worst["computation_spread"])
    if excess < COMPUTATION_EXCESS:
        return []
    rank = int(worst["most_computation_rank"])
    computed = trace_analyses.of(report, "device_time", True)
    computed = computed[computed["step"] == worst["step"]].set_index("rank")["computation"]
    return [Finding(
        "straggler", f"rank {rank} computes {fmt.share(excess)} more than the median rank in "
        f"{worst['step']}: the other ranks wait for it in their collectives",
        weight=min(excess, 1.0) * 0.6, share=excess,
        amount=float(computed.max() - computed.median()), unit="s",
        evidence="computation kernels' time per rank in " + str(worst["step"]) + ": "
                 + ", ".join(f"rank {r} {fmt.seconds(v)}" for r, v in computed.items()),
        suggestion="balance the work per rank (uneven shards, sequence lengths, embedding "
                   "tables); what only that rank computes")]


def launch_bound(report: RunData) -> list[Finding]:
    """Per rank, device work that ran shorter than its own launch: the GPU finishes it
    before the CPU can hand it the next, so launches, not kernels, set the pace."""
    launches = trace_analyses.of(report, "launches")
    out = []
    for rank, group in launches.groupby("rank"):
        calls, short = group["calls"].sum(), group["short_kernels"].sum()
        share = short / calls if calls else 0.0
        if calls < 100 or share < SHORT_LAUNCHES:
            continue
        out.append(Finding(
            "launch-bound", f"rank {rank}: {fmt.share(share)} of the device work ran shorter "
            "than the call that launched it: launches, not kernels, set the pace",
            weight=share * 0.3, amount=float(short), unit="count",  # (a share of
            # launches, not of time: no bar beside the time shares)
            evidence=f"{fmt.count(short)} of {fmt.count(calls)} launches on rank {rank}; "
                     "mean CPU time of a launch " + fmt.seconds(
                         (group["cpu_mean"] * group["calls"]).sum() / calls),
            suggestion="CUDA graphs (torch.compile(mode='reduce-overhead')), fused "
                       "operators, larger batches"))
    return out
