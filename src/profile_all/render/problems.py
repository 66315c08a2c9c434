"""What the reader must know before trusting the tables: skipped backends, failed or
partial passes, losses, doubts, device time that reached no operator; a sentence each."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pandas as pd

from profile_all import units as fmt
from profile_all.pass_record import PassRecord
from profile_all.report.counters import Counting
from profile_all.rows import UNATTRIBUTED

if TYPE_CHECKING:
    from profile_all.report.report import Report

#: below this share of device time reaching an operator, the operators' device times are
#: doubtful enough to say so
ATTRIBUTED_ENOUGH = 0.95


#: the most problems said; the rest are counted (meta.json has every one)
MOST_PROBLEMS = 50


def problems(report: Report) -> list[str]:
    """Skipped backends, failed passes and failing backends, one sentence each, each said
    once, at most MOST_PROBLEMS (a record of 5,000 passes said one backend's note 5,000
    times), each cut to LONGEST_PROBLEM characters."""
    said = [_cut(line) for line in dict.fromkeys(_every_problem(report))]
    if len(said) <= MOST_PROBLEMS:
        return said
    return [*said[:MOST_PROBLEMS], f"{fmt.counted(len(said) - MOST_PROBLEMS, 'more problem')} "
            "not said here (meta.json holds every pass's)"]


#: the characters of one problem said (a crafted meta.json held a doubt of 5 MB)
LONGEST_PROBLEM = 1000


def _cut(line: str) -> str:
    if len(line) <= LONGEST_PROBLEM:
        return line
    return (f"{line[:LONGEST_PROBLEM]}... ({len(line) - LONGEST_PROBLEM:,} more characters "
            "in meta.json)")


def _every_problem(report: Report) -> list[str]:
    lines = [f"backend {name} skipped: {why}"
             for name, why in report.meta.skipped_backends.items()]
    for summary in report.meta.passes:
        lines += _pass_problems(summary)
    model = report.meta.model
    if model.get("unstable"):
        lines.append(f"unstable measurement: the latency's coefficient of variation is "
                     f"{model['cv']:.0%} (over 10%): a busy machine, frequency scaling, or too "
                     f"few iterations")
    if model:
        lines += zero_counts(report.modules(), report.counting)
    lines += attribution_warnings(report)
    lines += report.meta.doubts
    if report.meta.passes_not_run:
        lines.append("passes not run: " + ", ".join(map(str, report.meta.passes_not_run)))
    return lines


def _pass_problems(summary: PassRecord) -> list[str]:
    """A pass that did not end well (and how each rank ended), what its target left
    running, and what its backends lost or noted."""
    lines = []
    if summary.status == "partial":
        lines.append(f"pass {summary.number} ({'+'.join(summary.backends)}) partial: "
                     "the target ran as it would, but a backend lost part of what it "
                     "measured (below)")
    elif summary.status != "ok":
        kept = "rows recovered from its journal" if summary.recovered else \
            "rows measured until then are kept"
        said = summary.error if summary.error.startswith(summary.status) \
            else f"{summary.status}: {summary.error}"
        lines.append(f"pass {summary.number} ({'+'.join(summary.backends)}) "
                     f"{said} ({kept})")
        if summary.ranks:
            lines.append(f"pass {summary.number} ranks: " + ", ".join(
                f"rank {r['rank']} {r['status']} (exit {r['exit_code']})"
                for r in summary.ranks))
    if summary.left_running:
        left = fmt.counted(len(summary.left_running), "process", "processes")
        lines.append(f"pass {summary.number}: the target left {left} running, ended at "
                     f"the end of the pass: {'; '.join(summary.left_running)}")
    return lines + [f"backend {f['backend']}: {f['error']}" if f["phase"] == "note" else
                    f"backend {f['backend']} lost data: {f['error']}" if f["phase"] == "lost"
                    else f"backend {f['backend']} failed in {f['phase']}: {f['error']}"
                    for f in summary.backend_failures]


def attribution_warnings(report: Report) -> list[str]:
    """Traces whose device time mostly did not reach an operator (kernels launched outside
    any operator, or launches missing from the trace): their operator times are partial."""
    frame = report.scoped("run")
    shares = frame[frame["metric"] == "attributed_share"]
    return [f"pass {entry['pass']} rank {entry['rank']}: only {entry['value']:.1%} of the "
            f"device time reached an operator (the rest is the {UNATTRIBUTED} row): per-"
            "operator device times are partial" for _, entry in shares.iterrows()
            if entry["value"] < ATTRIBUTED_ENOUGH]


def zero_counts(table: pd.DataFrame, counting: Counting) -> list[str]:
    """Modules with parameters that a counter says compute nothing, where the exact counter
    counted FLOPs (or did not run): worth a warning. The exact counter's own zeros (a
    BatchNorm under FlopCounterMode) are right: it counts matmul, convolution and
    attention only. `table`: Report.modules()."""
    warnings = []
    reference = counting.reference
    for _, module in table.iterrows():
        if not module["params"] or pd.isna(module["params"]):
            continue
        missed = reference not in table.columns or module[reference] > 0
        for counter in [c for c in counting.counters if c in counting.forward_only]:
            if missed and counter in table.columns and module[counter] == 0:
                warnings.append(f"{counter} counted 0 FLOPs for {module['module']}, which has "
                                f"{int(module['params']):,} parameters")
    return warnings
