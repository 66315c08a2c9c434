"""The Report: a run's data and its views (run_data.RunData), and the analyses over them:
the findings (the answer first) and the comparison with another run."""

from __future__ import annotations

from typing import Any

import pandas as pd

from profile_all.report import (
    held_memory,
    kernel_view,
    operator_tree,
    operator_view,
    trace_analyses,
)
from profile_all.report.compare import compare
from profile_all.report.findings import findings
from profile_all.report.run_data import RunData, timeline_frame
from profile_all.rows import COLUMNS, SAMPLE_COLUMNS
from profile_all.run_record import RunRecord


class Report(RunData):
    @classmethod
    def from_rows(cls, rows: list[list[Any]], meta: RunRecord,
                  samples: list[list[Any]] | None = None,
                  timeline: list[list[Any]] | None = None) -> Report:
        """`samples`: [backend, pass, rank, scope, name, parent, metric, [values]] each;
        `timeline`: TIMELINE_COLUMNS each."""
        return cls.from_frame(pd.DataFrame(rows, columns=COLUMNS), meta, samples, timeline)

    @classmethod
    def from_frame(cls, frame: pd.DataFrame, meta: RunRecord,
                   samples: list[list[Any]] | None = None,
                   timeline: list[list[Any]] | None = None) -> Report:
        """`frame`: the rows' COLUMNS; `samples` and `timeline` as `from_rows` takes them."""
        frame = frame.astype({"pass": "int64", "rank": "int64", "value": "float64"})
        per_call = pd.DataFrame(samples or [], columns=SAMPLE_COLUMNS).explode("value")
        per_call = per_call.dropna(subset=["value"]).astype(
            {"pass": "int64", "rank": "int64", "value": "float64"}).reset_index(drop=True)
        return cls(frame, meta, samples=per_call, timeline=timeline_frame(timeline))

    def compare(self, other: RunData, **options: Any) -> pd.DataFrame:
        """What changed from this run to `other`: see report.compare.compare."""
        return compare(self, other, **options)

    def operator_tree_diff(self, other: RunData) -> pd.DataFrame:
        """This run's operator tree and `other`'s side by side, as TensorBoard's diff view:
        per operator under the path of those around it, calls, host and device time of
        each run (`_a` this one, `_b` the other) and the change of the times."""
        return operator_tree.side_by_side(self, other)

    # HTA's and TensorBoard's analyses, per rank: report/trace_analyses.py says each
    def device_time(self, per_step: bool = False) -> pd.DataFrame:
        """Per rank (and step), the device's time by type and idle, as HTA's temporal
        breakdown."""
        return trace_analyses.of(self, "device_time", per_step)

    def operators(self, top: int | None = None, by: str = "operator") -> pd.DataFrame:
        """A row per operator (torch.profiler), most self time first (device time where
        there is): host and device times, FLOPs, TensorBoard's Tensor Core columns;
        `by="shape"`: per operator and its input shapes; `by="stack"`: per operator and
        its call stack."""
        if by != "operator":
            return operator_view.grouped(self, by, top)
        return operator_view.with_shares(
            self._table("operator", operator_view.METRICS, "self_time", None), top)

    def kernels(self, top: int | None = None, by: str = "kernel") -> pd.DataFrame:
        """A row per GPU kernel, most device time first (`by="operator"`: per kernel and
        the operator that launched it): calls, device time (total, mean, min, max), Tensor
        Cores, blocks per SM and estimated achieved occupancy, as TensorBoard's kernel
        view."""
        return kernel_view.table(self, by, top)

    def operator_memory(self) -> pd.DataFrame:
        """Per rank, device and operator, TensorBoard's memory view of a trace recorded with
        memory: self_increase, self_allocated, self_allocations, increase, allocated,
        allocations (bytes and counts, with the operators inside), calls."""
        return trace_analyses.of(self, "operator_memory")

    def operator_tree(self) -> pd.DataFrame:
        """The operators of a trace in their tree, over all their calls: each under the
        `path` of those around it, its calls, host time and device time (with what the
        operators inside it launched), depth first, the longest first."""
        return operator_tree.tree(self)

    def module_view(self) -> pd.DataFrame:
        """Per rank, the modules of a trace recorded with modules (`with_stack`), in their
        tree: calls, operators directly inside, host and device time, own and total."""
        return trace_analyses.of(self, "module_view")

    def gpu_metrics(self) -> pd.DataFrame:
        """Per rank and device, TensorBoard's GPU summary: utilization, estimated SM
        efficiency and occupancy, Tensor Core share, the device's properties."""
        return trace_analyses.of(self, "gpu_metrics")

    def step_time(self) -> pd.DataFrame:
        """Per rank and step, TensorBoard's step time breakdown."""
        return trace_analyses.of(self, "step_time")

    def kernel_types(self) -> pd.DataFrame:
        """Per rank, device time by the kernel types busy together."""
        return trace_analyses.of(self, "kernel_types")

    def overlap(self, per_step: bool = False) -> pd.DataFrame:
        """Per rank (and step), communication kernels' time and the share computation
        overlapped."""
        return trace_analyses.of(self, "overlap", per_step)

    def top_kernels(self, top: int = 5) -> pd.DataFrame:
        """Per rank, its `top` kernels with their type and share."""
        return trace_analyses.of(self, "top_kernels", top)

    def launches(self) -> pd.DataFrame:
        """Per rank and runtime call, HTA's kernel launch statistics."""
        return trace_analyses.of(self, "launches")

    def idle_streams(self) -> pd.DataFrame:
        """Per rank and stream, idle time by cause (host wait, kernel wait, other)."""
        return trace_analyses.of(self, "idle_streams")

    def stragglers(self) -> pd.DataFrame:
        """Per step, the slowest rank and the one that computed the most."""
        return trace_analyses.of(self, "stragglers")

    def held_memory(self) -> pd.DataFrame:
        """Memory by what holds it (parameters, gradients, optimizer state, activations,
        temporaries...) per device: the whole pass at its peak, each step at its end and
        its peak (report/held_memory.py)."""
        return held_memory.of(self)

    def findings(self) -> pd.DataFrame:
        """The answer first: a row per finding, most important first (report.findings)."""
        return self.once("findings", lambda: findings(self))

