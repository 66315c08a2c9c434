"""Findings from memory by what holds it (report/held_memory.py): an optimizer whose state
outweighs the parameters, and activations that make the peak."""

from __future__ import annotations

from typing import TYPE_CHECKING

from profile_all import units as fmt
from profile_all.report import held_memory
from profile_all.report.findings.finding import Finding

if TYPE_CHECKING:
    from profile_all.report.run_data import RunData

#: optimizer state this many times the parameters' bytes is worth a smaller optimizer
STATE_RATIO = 1.5
#: what grows with the batch holding this share of a step's peak or more, and more than
#: any other category there
ACTIVATION_SHARE = 0.4
#: a peak at this share of the memory there or more weighs fully: below it, what holds
#: the peak costs the user less (a 4 MiB peak of a small model led every time finding)
PRESSING = 0.5


def _pressure(report: RunData, device: str, total: float) -> float:
    """How much a peak of `total` bytes on `device` matters: its share of the memory
    there over PRESSING, at most 1; 1 where the capacity is not known."""
    key = "memory_total" if device == "cpu" else "gpu_memory_total"
    capacity = report.meta.environment.get(key)
    return min(1.0, total / capacity / PRESSING) if capacity else 1.0


def optimizer_state(report: RunData) -> list[Finding]:
    """At the end of the last step: the optimizer's state against the parameters (Adam
    keeps two tensors a parameter, SGD with momentum one)."""
    table = held_memory.of(report)
    ends = table[(table["moment"] == "at_end") & (table["step"] != "")]
    out = []
    for (device, rank), group in ends.groupby(["device", "rank"]):
        last = group.iloc[-1]
        if not last["parameters"] > 0:
            continue
        ratio = last["optimizer_state"] / last["parameters"]
        if ratio < STATE_RATIO:
            continue
        share = last["optimizer_state"] / last["total"]
        out.append(Finding(
            "memory", f"optimizer state is {ratio:.1f}x the parameters on {device}"
            + (f" rank {rank}" if ends["rank"].nunique() > 1 else "") + f": "
            f"{fmt.size(last['optimizer_state'])} against {fmt.size(last['parameters'])}",
            weight=share * 0.5 * _pressure(report, device, float(last["total"])), share=share,
            amount=float(last["optimizer_state"]), unit="B",
            evidence=f"torch's memory profile at the end of {last['step']}: parameters "
                     f"{fmt.size(last['parameters'])}, gradients "
                     f"{fmt.size(last['gradients'])}, optimizer state "
                     f"{fmt.size(last['optimizer_state'])} of {fmt.size(last['total'])}",
            suggestion="an 8-bit optimizer (bitsandbytes' Adam8bit keeps a quarter of it), "
                       "SGD with momentum (1x), or ZeRO/FSDP to shard it across ranks; a "
                       "fused optimizer (fused=True) avoids the step's temporaries"))
    return out


def activations_at_peak(report: RunData) -> list[Finding]:
    """At the highest peak of a step on a device (of the whole pass where there are no
    steps: a peak after the last step, an evaluation, is no step's), what grows with the
    batch (activations, and autograd's gradients of them during the backward) larger than
    any other category and a large share of the peak."""
    table = held_memory.of(report)
    peaks = table[table["moment"] == "at_peak"]
    out = []
    for (device, rank), group in peaks.groupby(["device", "rank"]):
        steps = group[group["step"] != ""]
        candidates = steps if not steps.empty else group
        peak = candidates.loc[candidates["total"].idxmax()]  # the first step that reaches it
        batch = peak["activations"] + peak["autograd"]
        share = batch / peak["total"] if peak["total"] > 0 else 0.0
        others = peak[["parameters", "gradients", "optimizer_state", "temporaries"]].max()
        if share < ACTIVATION_SHARE or batch <= others:
            continue
        where = (f" rank {rank}" if peaks["rank"].nunique() > 1 else "") + (
            f" in {peak['step']}" if peak["step"] else "")
        what = "activations" + (" and their gradients" if peak["autograd"] > 0 else "")
        out.append(Finding(
            "memory", f"{what} make the peak on {device}{where}: {fmt.size(batch)} of "
            f"{fmt.size(peak['total'])} ({fmt.share(share)})",
            weight=share * 0.6 * _pressure(report, device, float(peak["total"])),
            share=share, amount=float(batch), unit="B",
            evidence=f"torch's memory profile at the peak{where}: activations "
                     f"{fmt.size(peak['activations'])}, autograd's "
                     f"{fmt.size(peak['autograd'])}, parameters "
                     f"{fmt.size(peak['parameters'])}, gradients "
                     f"{fmt.size(peak['gradients'])}, optimizer state "
                     f"{fmt.size(peak['optimizer_state'])}",
            suggestion="activation checkpointing (torch.utils.checkpoint) trades them for "
                       "recomputation; a smaller batch; bfloat16 autocast halves them"))
    return out
