"""`Report.findings()`: the answer first, with its evidence.

What no single profiler can say and the report can, since it holds every backend's rows
side by side: whether the script failed (first: every figure stops there), where the
time goes, whether the input is the bottleneck, warm-up, memory
that grows and what holds it, an idle, waiting or launch-bound device, communication, the
rank the others wait for, FLOP/s against the device's peak, and whether the numbers can be
trusted. Each rule is a function of the report that returns
findings; none names a backend (what a backend measures is read from its rows and facts).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pandas as pd

from profile_all.report.findings import (
    compiling,
    device,
    distortion,
    held_memory,
    memory,
    per_rank,
    steps,
    threads,
    timing,
    trace_advice,
    trust,
)
from profile_all.report.findings.finding import COLUMNS, Finding

if TYPE_CHECKING:
    from profile_all.report.run_data import RunData

RULES = (trust.ended_badly, compiling.compile_time, compiling.recompiles_and_breaks,
         timing.input_bound, timing.where_time_goes, steps.warm_up, steps.unusual_steps,
         steps.start_up, memory.growth, memory.near_capacity, memory.allocator,
         held_memory.optimizer_state, held_memory.activations_at_peak, device.idle, device.syncs,
         device.communication, device.efficiency, distortion.tracing_distortion,
         per_rank.launch_bound, threads.openmp_waits, trust.doubts, trust.straggler,
         per_rank.computation_straggler, trace_advice.data_loading,
         trace_advice.mixed_precision)


def findings(report: RunData) -> pd.DataFrame:
    """A row per finding (COLUMNS), most important first."""
    found: list[Finding] = [one for rule in RULES for one in rule(report)]
    found.sort(key=lambda one: -one.weight)
    return pd.DataFrame([one.as_row() for one in found], columns=COLUMNS)
