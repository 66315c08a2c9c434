"""The report in a terminal, with Rich: the headline first (status, the top findings,
where the time goes as bars), then compact tables that fit the console's width."""

from __future__ import annotations

import math
import textwrap
from typing import TYPE_CHECKING

import pandas as pd
from rich.console import Console
from rich.table import Table
from rich.text import Text

from profile_all import units as fmt
from profile_all.render import sections, tables
from profile_all.render.fitted_columns import fitted
from profile_all.render.problems import problems
from profile_all.render.status import steps_line
from profile_all.safe_text import visible

if TYPE_CHECKING:
    from profile_all.report.report import Report

TOP = 10
#: findings in the headline
HEADLINE = 3
BAR = 20


def rich_table(title: str, frame: pd.DataFrame, left_out: int = 0,
               width: int | None = None,
               elsewhere: str = "summary.md, report.html or a wider terminal have them"
               ) -> Table:
    """Figures never wrap or shrink: columns that do not fit `width` (the console's) are
    left out and named in the caption; the name column is cut in the middle."""
    # (a header's own line break stays one: `total\nwallclock` is two lines)
    headers = ["\n".join(visible(part) for part in str(column).split("\n"))
               for column in frame.columns]
    rows = [[visible(value) if isinstance(value, str) else str(value) for value in values]
            for values in frame.itertuples(index=False)]
    shown = fitted(headers, rows, width)
    notes = [f"{fmt.counted(left_out, 'more row')} not shown (--top N to see more)"] \
        if left_out else []
    if shown.dropped:
        notes.append(f"left out to fit {width} columns: {', '.join(shown.dropped)} "
                     f"({elsewhere})")
    table = Table(title=title, title_justify="left", caption="\n".join(notes) or None,
                  caption_justify="left")
    for header in shown.headers:
        table.add_column(Text(header), no_wrap=True)
    for values in shown.rows:  # text, never markup: `[red]` is a name
        table.add_row(*(Text(value) for value in values))
    return table


def headline(report: Report, console: Console) -> None:
    """Status and passes, then the top findings with a bar for their share and what to try."""
    meta = report.meta
    passes, sources = meta.passes, meta.sources
    ran = f"{len(passes)} pass{'es' if len(passes) != 1 else ''}" if passes or not sources \
        else f"{len(sources)} file{'s' if len(sources) != 1 else ''} read"  # ingested
    steps = steps_line(report)
    ran += f", {steps}" if steps else ""
    console.print(Text(visible(f"profile-all: {meta.status}, exit code {meta.exit_code}, "
                               f"{ran}"), style="bold"))
    found = report.findings()
    for number, one in enumerate(found.head(HEADLINE).to_dict("records"), start=1):
        share = one["share"]
        bar = "█" * round(share * BAR) + "░" * (BAR - round(share * BAR)) \
            if not math.isnan(share) and 0 <= share <= 1 else ""
        head = f"{number}. {bar} {fmt.share(share)}  " if bar else f"{number}. "
        _indented(console, head + visible(one["finding"]), "bold" if number == 1 else "")
        if one["evidence"]:
            _indented(console, visible(f"   evidence: {one['evidence']}"), "dim")
        if one["try"]:
            _indented(console, visible(f"   try: {one['try']}"))
    more = len(found) - HEADLINE
    if more > 0:
        console.print(Text(f"   {fmt.counted(more, 'more finding')} in summary.md and "
                           "report.html",
                           style="dim"))


def _indented(console: Console, text: str, style: str = "") -> None:
    """`text` wrapped to the console's width between words, its lines after the first
    indented under the finding's text (a word longer than a line is folded)."""
    lines = textwrap.wrap(text, console.width, subsequent_indent=" " * 6,
                          break_long_words=False, break_on_hyphens=False) or [""]
    console.print(Text("\n".join(lines), style=style), overflow="fold")


def render(report: Report, console: Console, top: int = TOP) -> None:
    """The report (`render_body`), then where it is (`render_where`)."""
    render_body(report, console, top)
    render_where(report, console, top)


def render_body(report: Report, console: Console, top: int = TOP) -> None:
    """The headline, every section (long tables cut to `top` rows, with a count of the
    rest), then the problems."""
    headline(report, console)
    for section, table, left_out in sections.shown(report, top, terminal=True):
        console.print(rich_table(section.title, table, left_out, width=console.width))
    for line in problems(report):
        console.print(Text(visible(line), style="yellow"))


def render_where(report: Report, console: Console, top: int | None = TOP) -> None:
    """How to open the run's native files (the first `top` of them: a crafted record of
    100,000 printed every one), then the run directory, last: it is the folder where the
    report was placed (NAME-2 when NAME was taken as it was written)."""
    commands = tables.open_commands(report)
    for backend, path, command in commands[:top]:  # (a line each, unwrapped: to paste)
        console.print(Text(visible(f"  {backend}: {path}  (open with: {command})")),
                      soft_wrap=True)
    if top is not None and len(commands) > top:
        console.print(Text(f"  {len(commands) - top:,} more native files (meta.json lists "
                           "them all)"))
    if report.run_dir:
        console.print(Text(visible(f"Report: {report.run_dir}")))
