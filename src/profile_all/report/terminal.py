"""The report in a terminal, with Rich."""

from __future__ import annotations

import pandas as pd
from rich.console import Console
from rich.table import Table
from rich.text import Text

from profile_all.report import tables
from profile_all.report.report import Report

TOP = 10
_NAME_COLUMNS = {"function", "operator", "kernel", "copy or fill", "CUDA API call"}


def rich_table(title: str, frame: pd.DataFrame, left_out: int = 0) -> Table:
    caption = f"{left_out:,} more rows not shown (--top N to see more)" if left_out else None
    table = Table(title=title, title_justify="left", caption=caption, caption_justify="left")
    for position, column in enumerate(frame.columns):
        if position == 0 and str(column) in _NAME_COLUMNS:  # kernel names run to pages
            table.add_column(str(column), overflow="ellipsis", no_wrap=True, max_width=90)
        else:
            table.add_column(str(column), overflow="fold")
    for values in frame.itertuples(index=False):
        table.add_row(*(str(v) for v in values))
    return table


def render(report: Report, console: Console, top: int = TOP) -> None:
    """Every table of the report; long ones cut to `top` rows, with a count of the rest."""
    console.print(rich_table("Passes", tables.passes_table(report)))
    for title, table in (("Model latency (warm-up excluded)", tables.latency_table(report)),
                         ("Batch-size search", tables.batches_table(report)),
                         ("FLOP counters side by side", tables.counters_table(report))):
        if not table.empty:
            console.print(rich_table(title, table))
    for title, table in (("Modules (FLOPs per counter)", tables.modules_table(report, None)),
                         ("Run, steps and regions", tables.summary_table(report)),
                         ("Across ranks (total time per rank)", tables.ranks_table(report)),
                         ("Functions by self time", tables.functions_table(report, None)),
                         ("Operators", tables.operators_table(report, None)),
                         ("Kernels by device time", tables.kernels_table(report, None)),
                         ("Device copies and fills", tables.transfers_table(report, None)),
                         ("CUDA API calls by host time", tables.api_table(report, None)),
                         ("Line-by-line memory", tables.lines_table(report))):
        if not table.empty:
            console.print(rich_table(title, *tables.cut(table, top)))
    for line in tables.problems(report):
        console.print(Text(line, style="yellow"))
    if report.run_dir:
        console.print(f"Report: {report.run_dir}", highlight=False)
    for backend, path, command in tables.open_commands(report):
        console.print(f"  {backend}: {path}  (open with: {command})", highlight=False)
