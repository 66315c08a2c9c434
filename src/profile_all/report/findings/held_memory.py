"""Findings from memory by what holds it (report/held_memory.py): an optimizer whose state
outweighs the parameters, and activations that make the peak."""

from __future__ import annotations

from typing import TYPE_CHECKING

from profile_all import units as fmt
from profile_all.report.findings.finding import Finding
from profile_all.report.held_memory import held_memory

if TYPE_CHECKING:
    from profile_all.report.run_data import RunData

#: optimizer state this many times the parameters' bytes is worth a smaller optimizer
STATE_RATIO = 1.5
#: activations holding this share of a peak or more, and the largest category there
ACTIVATION_SHARE = 0.4


def optimizer_state(report: RunData) -> list[Finding]:
    """At the end of the last step: the optimizer's state against the parameters (Adam
    keeps two tensors a parameter, SGD with momentum one)."""
    table = held_memory(report.frame)
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
            weight=share * 0.5, share=share, amount=float(last["optimizer_state"]), unit="B",
            evidence=f"torch's memory profile at the end of {last['step']}: parameters "
                     f"{fmt.size(last['parameters'])}, gradients "
                     f"{fmt.size(last['gradients'])}, optimizer state "
                     f"{fmt.size(last['optimizer_state'])} of {fmt.size(last['total'])}",
            suggestion="an 8-bit optimizer (bitsandbytes' Adam8bit keeps a quarter of it), "
                       "SGD with momentum (1x), or ZeRO/FSDP to shard it across ranks; a "
                       "fused optimizer (fused=True) avoids the step's temporaries"))
    return out


def activations_at_peak(report: RunData) -> list[Finding]:
    """At the pass's peak on a device: activations the largest category, and a large share."""
    table = held_memory(report.frame)
    peaks = table[(table["moment"] == "at_peak") & (table["step"] == "")]
    out = []
    for _, peak in peaks.iterrows():
        share = peak["activations"] / peak["total"] if peak["total"] > 0 else 0.0
        if peak["largest"] != "activations" or share < ACTIVATION_SHARE:
            continue
        out.append(Finding(
            "memory", f"activations make the peak on {peak['device']}: "
            f"{fmt.size(peak['activations'])} of {fmt.size(peak['total'])} "
            f"({fmt.share(share)})", weight=share * 0.6, share=share,
            amount=float(peak["activations"]), unit="B",
            evidence=f"torch's memory profile at the pass's peak: activations "
                     f"{fmt.size(peak['activations'])}, parameters "
                     f"{fmt.size(peak['parameters'])}, gradients "
                     f"{fmt.size(peak['gradients'])}, optimizer state "
                     f"{fmt.size(peak['optimizer_state'])}",
            suggestion="activation checkpointing (torch.utils.checkpoint) trades them for "
                       "recomputation; a smaller batch; bfloat16 autocast halves them"))
    return out
