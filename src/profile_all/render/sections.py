"""The one list of the report's sections, in the order every renderer shows them.

Adding a view to every output (terminal, summary.md, report.html) is its table function
in `tables` and one line here.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pandas as pd

from profile_all.render import model_tables, tables, trace_tables

if TYPE_CHECKING:
    from profile_all.report.report import Report

OVERHEAD_NOTE = ("Overhead is each pass's time over the clean timing pass's: the median step "
                 "time where the target marks steps, else the whole run's, with a 95% interval "
                 "from per-step times or the timing pass's repeats (--repeat); an interval "
                 "that holds 1 is noise, and one below 1 is noise too, never a speed-up.")


SAMPLED_NOTE = ("Estimated from stacks sampled at a rate, outside the process: ± is the 95% "
                "error of the self time (1.96 x the root of its samples); share is of the "
                "process's samples, cumulative. The target runs its own code while it is "
                "sampled, so no function looks heavier for being called often.")
SIDE_BY_SIDE_NOTE = ("Each function's cumulative time as a share of the run, measured call "
                     "by call (the tracer, which slows every call it sees) and sampled; the "
                     "largest differences first: where the tracer's share is the higher, its "
                     "own cost inflated the function. The passes' overheads are in Passes.")
DEVICE_TIME_NOTE = (
    "From the first device activity the steps launched to the last one's end (the span), "
    "each moment counted once, for the first of computation, communication (nccl*Kernel), "
    "memory (copies, fills), other that ran then; idle is when none ran. HTA's temporal "
    "breakdown: its non-computation time is communication + memory + other.")
STEP_TIME_NOTE = (
    "TensorBoard's step time breakdown: steps tile the timeline (a step begins at its "
    "range's start or the step before's end, and ends at its range's end or its device "
    "work's, whichever is later); each moment counted once, for the first of kernel, "
    "memcpy, memset, communication, runtime (a CUDA call), data loader, CPU execution (an "
    "operator) busy then; other is none of them (Python between operators, waiting). As "
    "in the plugin, the last steps whose device work the trace may not hold all of (none, "
    "or under 80% of the step before's activities) are left out.")
LAUNCH_NOTE = (
    "Per CUDA call that launches device work: its CPU time, the device time of what it "
    "launched, and the launch delay from the call's end to the work's start (queued behind "
    "other work); work shorter than its own launch is launch-bound (HTA's launch statistics).")
IDLE_NOTE = (
    "Gaps between one activity's end and the next one's start on a stream (HTA's idle time "
    "breakdown): host wait, the launch came after the stream ran dry (the CPU did not keep "
    "up); kernel wait, a gap under 30 µs (launching back to back); other (waiting on "
    "another stream, an event).")
HELD_NOTE = (
    "torch's memory profile: each tensor by what it is to the model (a parameter, its "
    "gradient, the optimizer's state, what the forward keeps for the backward, what lives "
    "in one operator), at the end of each step and at its peak, and the whole pass's peak; "
    "other holds the inputs and autograd's own. The largest category at a peak is what to "
    "shrink first.")


@dataclass(frozen=True)
class Section:
    anchor: str
    title: str
    #: the display table (all its rows; renderers cut long ones to their `top`)
    table: Callable[[Report], pd.DataFrame]
    #: a sentence on how to read it
    note: str = ""
    #: cut to the renderer's `top` rows, with a count of the rest
    long: bool = False
    #: shown in the terminal too (the environment and native files are there as lines)
    in_terminal: bool = True
    #: the scopes of the rows it shows: its title names the backends those rows came from
    #: (`Functions by self time (cprofile)`), whichever made them, a plug-in's too
    scopes: tuple[str, ...] = ()
    #: only the rows of sampling backends (True), or of the others (False), name it
    sampled: bool | None = None
    #: made from views the findings read (measured: 2-20 ms after the findings, 3-10x
    #: that alone): made where the findings are made (runs/store.py)
    with_findings: bool = False

    def titled(self, report: Report) -> Section:
        """This section, its title naming the backends of its rows."""
        if not self.scopes:
            return self
        rows = report.scoped(*self.scopes)
        if self.sampled is not None:
            samplers = [name for name, said in report.facts.items() if said.sampled]
            rows = rows[rows["backend"].isin(samplers) == self.sampled]
        sources = ", ".join(dict.fromkeys(rows["backend"]))
        return dataclasses.replace(self, title=f"{self.title} ({sources})") if sources else self


SECTIONS = (
    Section("findings", "Findings", tables.findings_table,
            note="Most important first, from every backend's rows side by side; the "
                 "evidence names them.",
            in_terminal=False, with_findings=True),  # the terminal's headline
    Section("passes", "Passes", tables.passes_table, long=True, note=OVERHEAD_NOTE,
            with_findings=True),
    Section("latency", "Model latency (warm-up excluded)", model_tables.latency_table,
            with_findings=True),
    Section("batches", "Batch-size search", model_tables.batches_table, with_findings=True),
    Section("counters", "FLOP counters side by side", model_tables.counters_table),
    Section("modules", "Modules (FLOPs per counter)", model_tables.modules_table, long=True,
            note="Forward FLOPs per call of each module, with the calls each counter saw: "
                 "thop and flops-profiler count a model's first call; the exact counter "
                 "every call, or where a model's calls differ in shape or grad mode those "
                 "the counters table stands for (Report.call_groups())."),
    Section("summary", "Run, steps and regions", tables.summary_table, long=True,
            note="Calls and total count every call; mean, median, p90 and std leave out "
                 "step 1 (it holds the set-up), the steps that held a compilation and the "
                 "steps and region calls inside other passes' windows (`excluded_calls` "
                 "in the rows). GPU: the device time launched inside; device span: a "
                 "range's own time on the device (a trace's gpu_user_annotation), first "
                 "activity to last, as HTA's user-annotation breakdown."),
    Section("compilation", "torch.compile: compilations, recompiles, graph breaks",
            tables.compilation_table,
            note="From torch's own records in the clean timing pass; the steps that held a "
                 "compilation are left out of per-step figures."),
    Section("ranks", "Across ranks (total time per rank)", tables.ranks_table, long=True,
            note="The straggler: each rank's total time, its spread ((max - min) / median) "
                 "and the slowest rank."),
    Section("device-time", "Device time by type, per rank", trace_tables.device_time_table,
            note=DEVICE_TIME_NOTE, with_findings=True),
    Section("stragglers", "Stragglers, per step", trace_tables.stragglers_table,
            note="Per step that several ranks ran: the slowest rank and how far it lags the "
                 "median; the rank that computed the most, which the others wait for in "
                 "their collectives, and its excess over the median rank's computation.",
            with_findings=True),
    Section("gpu", "GPU summary, per rank and device", trace_tables.gpu_metrics_table,
            note="TensorBoard's GPU summary, over the steps' span: utilization (a kernel "
                 "running), estimated SM efficiency (blocks per SM of the kernels running, "
                 "capped at 1), estimated achieved occupancy (weighted by kernel time), the "
                 "kernel time in kernels that use Tensor Cores (told by name, as the plugin "
                 "tells them)."),
    Section("step-time", "Step time breakdown, per rank and step",
            trace_tables.step_time_table, long=True, note=STEP_TIME_NOTE),
    Section("overlap", "Communication overlap, per rank",
            trace_tables.overlap_table,
            note="Communication kernels' time (their union) and how much of it computation "
                 "kernels ran beside: HTA's communication-computation overlap.",
            with_findings=True),
    Section("kernel-types", "Kernel types busy together, per rank",
            trace_tables.kernel_types_table, long=True,
            note="Device time by the types of kernel running at once, HTA's kernel "
                 "breakdown: communication is nccl*Kernel, memory a copy or a fill."),
    Section("top-kernels", "Top kernels, per rank", trace_tables.top_kernels_table, long=True),
    Section("launches", "Kernel launches, per rank", trace_tables.launches_table, long=True,
            note=LAUNCH_NOTE, with_findings=True),
    Section("idle-streams", "Idle time per stream, by cause", trace_tables.idle_streams_table,
            long=True, note=IDLE_NOTE),
    Section("operator-memory", "Memory per operator (a trace recorded with memory)",
            trace_tables.operator_memory_table, long=True,
            note="TensorBoard's memory view: each allocation and free counts for the "
                 "innermost operator of its thread open then; increase is allocated less "
                 "freed; the columns without `self` add the operators inside it."),
    Section("held-memory", "Memory by what holds it", trace_tables.held_memory_table,
            long=True, note=HELD_NOTE, with_findings=True),
    Section("functions", "Functions by self time", tables.functions_table, long=True,
            scopes=("function",), sampled=False, with_findings=True),
    Section("sampled", "Functions sampled, by self time", tables.sampled_functions_table,
            long=True, scopes=("function",), sampled=True, note=SAMPLED_NOTE),
    Section("traced-vs-sampled", "Traced and sampled, side by side",
            tables.traced_vs_sampled_table, long=True, note=SIDE_BY_SIDE_NOTE, with_findings=True),
    Section("threads", "Threads sampled", tables.threads_table, scopes=("thread",),
            note="A thread's time on the CPU is its samples'; its idle time (the target's "
                 "thread) is its wall time less that."),
    Section("operators", "Operators", tables.operators_table, long=True, scopes=("operator",),
            with_findings=True,
            note="TC: Tensor Cores, as TensorBoard's operator view: eligible where autocast "
                 "runs the operator in lower precision (or it, or one inside it, launched a "
                 "Tensor Core kernel); the share of its device time, its own and with the "
                 "operators inside it, in kernels that use them."),
    Section("module-view", "Modules (a trace recorded with modules)",
            trace_tables.module_view_table, long=True, scopes=("trace_module",),
            note="TensorBoard's module view: each module under the one around it; operators "
                 "and self times count what lies directly inside it; mean is a call's device "
                 "time, else its host time."),
    Section("operator-shapes", "Operators by input shape", trace_tables.operator_shapes_table,
            long=True, scopes=("operator_shape",)),
    Section("operator-stacks", "Operators by call stack", trace_tables.operator_stacks_table,
            long=True, scopes=("operator_stack",),
            note="As TensorBoard's operator view grouped by call stack, of a trace recorded "
                 "with_stack: the Python functions around each operator, innermost first "
                 "(torch of 2021 wrote them as a Call stack; torch 2 as the trace's "
                 "python_function events)."),
    Section("kernels", "Kernels by device time", trace_tables.kernels_table, long=True,
            scopes=("kernel",), with_findings=True,
            note="As TensorBoard's kernel view: Tensor Cores told by the kernel's name, blocks "
                 "per SM and estimated achieved occupancy weighted by device time."),
    Section("kernel-operators", "Kernels by the operator that launched them",
            trace_tables.kernel_operators_table, long=True, scopes=("kernel_operator",)),
    Section("transfers", "Device copies and fills", tables.transfers_table, long=True,
            scopes=("memcpy", "memset")),
    Section("api", "CUDA API calls by host time", tables.api_table, long=True,
            scopes=("api",), with_findings=True),
    Section("lines", "Line by line", tables.lines_table, long=True, scopes=("line",)),
    Section("native", "Native files", tables.native_files_table, long=True, in_terminal=False),
    Section("skipped", "Skipped backends", tables.skipped_table, in_terminal=False),
    Section("environment", "Environment", tables.environment_table, in_terminal=False),
)


#: a section, its table cut to a renderer's `top`, and how many rows were left out
Shown = tuple[Section, pd.DataFrame, int]


def _view(report: Report) -> Callable[[Section], str]:
    """The name a section's table is kept under: made once for the files and the terminal,
    unless the record or the folder changed."""
    state = hash((repr(report.meta), str(report.run_dir)))
    return lambda section: f"section:{section.anchor}:{state}"


def make(report: Report, with_findings: bool) -> None:
    """The whole tables of the sections made with the findings (or of the others), kept in
    the report's views."""
    view = _view(report)
    for section in SECTIONS:
        if section.with_findings == with_findings:
            report.once(view(section), lambda section=section: section.table(report))


def shown(report: Report, top: int | None, terminal: bool = False) -> list[Shown]:
    """(section, its table cut to `top` rows where long, how many rows were left out) for
    every section the report has rows for."""
    out = []
    view = _view(report)
    for section in SECTIONS:
        if terminal and not section.in_terminal:
            continue
        table = report.once(view(section), lambda section=section: section.table(report))
        if table.empty:
            continue
        out.append((section.titled(report), *tables.cut(table, top if section.long else None)))
    return out


def cut(whole: list[Shown], top: int | None) -> list[Shown]:
    """`whole` (every row: `shown(report, None)`) with its long tables cut to `top` rows."""
    return [(section, *tables.cut(table, top if section.long else None))
            for section, table, _left_out in whole]
