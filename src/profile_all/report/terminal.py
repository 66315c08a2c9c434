"""The report in a terminal, with Rich."""

from __future__ import annotations

import pandas as pd
from rich.console import Console
from rich.table import Table
from rich.text import Text

from profile_all.report import tables
from profile_all.report.report import Report

TOP_FUNCTIONS = 10


def _rich_table(title: str, frame: pd.DataFrame) -> Table:
    table = Table(title=title, title_justify="left")
    for column in frame.columns:
        table.add_column(str(column), overflow="fold")
    for values in frame.itertuples(index=False):
        table.add_row(*(str(v) for v in values))
    return table


def render(report: Report, console: Console) -> None:
    console.print(_rich_table("Passes", tables.passes_table(report)))
    summary = tables.summary_table(report)
    if not summary.empty:
        console.print(_rich_table("Run, steps and regions", summary))
    functions = tables.functions_table(report, TOP_FUNCTIONS)
    if not functions.empty:
        console.print(_rich_table(f"Top {TOP_FUNCTIONS} functions by self time", functions))
    for line in tables.problems(report):
        console.print(Text(line, style="yellow"))
    if report.run_dir:
        console.print(f"Report: {report.run_dir}", highlight=False)
    for backend, path, command in tables.open_commands(report):
        console.print(f"  {backend}: {path}  (open with: {command})", highlight=False)
