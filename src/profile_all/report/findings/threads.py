"""CPU threads that wait for each other: the samples in OpenMP's runtime (threads at a
barrier, spinning), which a small CPU training under `--native` spent 79% of its samples
in without a word."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from profile_all import units as fmt
from profile_all.report import sampling
from profile_all.report.findings.finding import Finding, few_samples

if TYPE_CHECKING:
    from profile_all.report.run_data import RunData

#: OpenMP runtimes' frames as py-spy --native names them (GNU's, Intel's, LLVM's)
_OPENMP = re.compile(r"\((?:libgomp|libiomp\d*|libomp)[^)]*\)|\bgomp_\w+|__kmp_\w+")
#: this share of the samples in the OpenMP runtime or more is worth a word
SPINNING = 0.2


def openmp_waits(report: RunData) -> list[Finding]:
    """The share of the target process's samples whose innermost frame is OpenMP's
    runtime (self samples: waiting or spinning there, not computing)."""
    table = report.sampled_functions()
    own = table[table["process"] == ""] if not table.empty else table
    if own.empty:
        return []
    frame = report.scoped("run")
    taken = frame[frame["backend"].isin(sampling.sampled_backends(report.facts))
                  & (frame["metric"] == "samples")]["value"].sum()
    spinning = float(own[own["name"].str.contains(_OPENMP)]["self_samples"].sum())
    if not taken or spinning / taken < SPINNING:
        return []
    share = spinning / float(taken)
    cores = report.meta.environment.get("cpu_count")
    backend = sampling.sampled_backends(report.facts)[0]
    rough, trust = few_samples(report, backend)
    return [Finding(
        "threads", f"{fmt.share(share)} of the samples were in the OpenMP runtime: threads "
        f"waiting for each other at a barrier, or spinning, not computing{rough}",
        weight=share * 0.5 * trust, share=share,
        evidence=f"the sampled functions' innermost frames: {spinning:,.0f} of "
                 f"{float(taken):,.0f} samples in libgomp/libiomp/libomp",
        suggestion=f"fewer threads than the {cores} cores (torch.set_num_threads(N), "
                   "OMP_NUM_THREADS), more so beside other processes; or more work a call "
                   "(a larger batch): work too small to split costs more to share out"
                   if cores else "fewer threads (torch.set_num_threads(N)), or more work "
                                 "a call (a larger batch)")]
