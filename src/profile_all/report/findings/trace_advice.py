"""What TensorBoard's profiler plugin recommended from a trace, where the other rules do not
already say it: the DataLoader's share of the steps (the plugin's 5%, under the input
rule's 20%, which reads the same breakdown), and Tensor Core eligible work run without
mixed precision. Its other advice is the other rules': low GPU utilization is the device
rule's idle time, communication over 10% the communication rule's."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pandas as pd

from profile_all import units as fmt
from profile_all.report.findings.finding import Finding
from profile_all.report.findings.timing import INPUT_BOUND
from profile_all.rows import UNATTRIBUTED

if TYPE_CHECKING:
    from profile_all.report.run_data import RunData

#: the DataLoader's share of the steps' time the plugin named
DATA_LOADING = 0.05
#: the first compute capability with Tensor Cores (Volta)
TENSOR_CORES_FROM = 7.0


def data_loading(report: RunData) -> list[Finding]:
    steps = report.step_time()
    if steps.empty:
        return []
    out = []
    for rank, mine in steps.groupby("rank"):
        total = mine["step_time"].sum()
        share = mine["data_loader"].sum() / total if total > 0 else 0.0
        if DATA_LOADING <= share < INPUT_BOUND:
            out.append(Finding(
                "input", f"rank {rank}: the DataLoader takes {fmt.share(share)} of the steps' "
                f"time (TensorBoard's step time breakdown)", weight=share, share=share,
                amount=mine["data_loader"].sum(), unit="s",
                evidence="step time breakdown: data loader "
                f"{fmt.seconds(mine['data_loader'].sum())} of {fmt.seconds(total)} over "
                f"{len(mine)} steps",
                suggestion="num_workers > 0 on the DataLoader (loading in worker processes), "
                           "pin_memory=True for host-to-device copies"))
    return out


def mixed_precision(report: RunData) -> list[Finding]:
    """A device with Tensor Cores, none of whose kernels used them, while operators that
    could (TensorBoard's Tensor Core eligible ones) launched part of the kernel time: the
    plugin's share is of the bottom-most eligible operators' own kernel time, here of every
    eligible operator's own (an eligible operator around another launches little itself)."""
    gpus = report.gpu_metrics()
    operators = report.operators()
    if gpus.empty or "tc_eligible" not in operators.columns:
        return []
    capable = gpus[(gpus["compute_capability"] >= TENSOR_CORES_FROM)
                   & (gpus["tensor_core_share"] == 0)]
    operators = operators[operators["name"] != UNATTRIBUTED]  # (launched by no operator)
    device_time = operators["self_gpu_time"].sum()
    if capable.empty or not device_time > 0:
        return []
    eligible = operators[operators["tc_eligible"] > 0]
    share = eligible["self_gpu_time"].sum() / device_time
    if not share > 0:
        return []
    names = ", ".join(pd.Series(eligible.sort_values("self_gpu_time", ascending=False)
                                ["name"]).head(3))
    models = ", ".join(capable["model"].dropna().unique()) or "the device"
    return [Finding(
        "device", f"{fmt.share(share)} of the kernel time is launched by operators that "
        f"could run on Tensor Cores, and no kernel used them ({models})",
        weight=share * 0.6, share=share, amount=eligible["self_gpu_time"].sum(), unit="s",
        evidence=f"operators (Tensor Core eligible: {names}); GPU summary: Tensor Cores 0.0%",
        suggestion="mixed precision: torch.autocast(device_type='cuda', dtype=torch.bfloat16) "
                   "(or float16 with a GradScaler); TF32 for float32 matmuls: "
                   "torch.backends.cuda.matmul.allow_tf32 = True")]
