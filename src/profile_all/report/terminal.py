"""The report in a terminal, with Rich."""

from __future__ import annotations

import pandas as pd
from rich.console import Console
from rich.table import Table
from rich.text import Text

from profile_all.report import tables
from profile_all.report.report import Report

TOP_FUNCTIONS = 10
_NAME_COLUMNS = {"function", "operator", "kernel"}


def _rich_table(title: str, frame: pd.DataFrame) -> Table:
    table = Table(title=title, title_justify="left")
    for position, column in enumerate(frame.columns):
        if position == 0 and str(column) in _NAME_COLUMNS:  # kernel names run to pages
            table.add_column(str(column), overflow="ellipsis", no_wrap=True, max_width=90)
        else:
            table.add_column(str(column), overflow="fold")
    for values in frame.itertuples(index=False):
        table.add_row(*(str(v) for v in values))
    return table


def render(report: Report, console: Console) -> None:
    console.print(_rich_table("Passes", tables.passes_table(report)))
    for title, table in (("Model latency (warm-up excluded)", tables.latency_table(report)),
                         ("Batch-size search", tables.batches_table(report)),
                         ("FLOP counters side by side", tables.counters_table(report)),
                         ("Modules (FLOPs per counter)", tables.modules_table(report, 15))):
        if not table.empty:
            console.print(_rich_table(title, table))
    summary = tables.summary_table(report)
    if not summary.empty:
        console.print(_rich_table("Run, steps and regions", summary))
    functions = tables.functions_table(report, TOP_FUNCTIONS)
    if not functions.empty:
        console.print(_rich_table(f"Top {TOP_FUNCTIONS} functions by self time", functions))
    operators = tables.operators_table(report, TOP_FUNCTIONS)
    if not operators.empty:
        console.print(_rich_table(f"Top {TOP_FUNCTIONS} operators", operators))
    kernels = tables.kernels_table(report, TOP_FUNCTIONS)
    if not kernels.empty:
        console.print(_rich_table(f"Top {TOP_FUNCTIONS} kernels by device time", kernels))
    for line in tables.problems(report):
        console.print(Text(line, style="yellow"))
    if report.run_dir:
        console.print(f"Report: {report.run_dir}", highlight=False)
    for backend, path, command in tables.open_commands(report):
        console.print(f"  {backend}: {path}  (open with: {command})", highlight=False)
