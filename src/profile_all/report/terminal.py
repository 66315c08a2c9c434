"""The report in a terminal, with Rich."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pandas as pd
from rich.console import Console
from rich.table import Table
from rich.text import Text

from profile_all.report import sections, tables
from profile_all.report.problems import problems

if TYPE_CHECKING:
    from profile_all.report.report import Report

TOP = 10
_NAME_COLUMNS = {"function", "operator", "kernel", "copy or fill", "CUDA API call"}


def rich_table(title: str, frame: pd.DataFrame, left_out: int = 0,
               width: int | None = None) -> Table:
    """Figures never wrap or shrink; the long text columns (names, errors) share what is
    left of `width` (the console's), names cut short with an ellipsis."""
    caption = f"{left_out:,} more rows not shown (--top N to see more)" if left_out else None
    table = Table(title=title, title_justify="left", caption=caption, caption_justify="left")
    short = {column: _short_values(frame[column]) for column in frame.columns}
    widths = {column: max([len(str(v)) for v in frame[column]]
                          + [len(word) for word in str(column).split()])
              for column in frame.columns if short[column]}
    long = [column for column in frame.columns if not short[column]]
    room = None
    if width and long:  # borders and padding: 3 a column, and 1
        room = max(12, (width - sum(widths.values()) - 3 * len(frame.columns) - 1) // len(long))
    for position, column in enumerate(frame.columns):
        if short[column]:
            table.add_column(str(column), no_wrap=True, min_width=widths[column])
        elif position == 0 and str(column) in _NAME_COLUMNS:  # kernel names run to pages
            table.add_column(str(column), overflow="ellipsis", no_wrap=True,
                             max_width=min(90, room or 90))
        else:
            table.add_column(str(column), overflow="fold", max_width=room)
    for values in frame.itertuples(index=False):
        table.add_row(*(str(v) for v in values))
    return table


def _short_values(values: pd.Series) -> bool:
    """A column of figures (`1.2 ms`, `1,024`, `+3.1%`): kept on one line."""
    return bool(values.map(lambda v: len(str(v)) <= 16).all())


def render(report: Report, console: Console, top: int = TOP) -> None:
    """Every section of the report; long tables cut to `top` rows, with a count of the rest;
    then the problems, the run directory and how to open its native files."""
    for section, table, left_out in sections.shown(report, top, terminal=True):
        console.print(rich_table(section.title, table, left_out, width=console.width))
    for line in problems(report):
        console.print(Text(line, style="yellow"))
    if report.run_dir:
        console.print(f"Report: {report.run_dir}", highlight=False)
    for backend, path, command in tables.open_commands(report):
        console.print(f"  {backend}: {path}  (open with: {command})", highlight=False)
