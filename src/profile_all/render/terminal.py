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
from profile_all.render.problems import problems
from profile_all.render.status import steps_line
from profile_all.safe_text import visible

if TYPE_CHECKING:
    from profile_all.report.report import Report

TOP = 10
#: findings in the headline
HEADLINE = 3
BAR = 20
#: a name column is never cut below this
NAME_MIN = 16


def elide(text: str, width: int) -> str:
    """`text` cut in the middle to `width` characters (both ends of a name say most)."""
    if len(text) <= width:
        return text
    keep = width - 1
    return text[:(keep + 1) // 2] + "…" + text[len(text) - keep // 2:]


def _elided_apart(names: pd.Series, width: int) -> pd.Series:
    """Each name cut in the middle to `width`; names that different texts cut to the same
    one (kernels that differ in their middle) are cut elsewhere, keeping more of the start
    or of the end, until they differ, else numbered."""
    cut = names.map(lambda name: elide(name, width))
    keep = width - 1
    for _shown, group in cut.groupby(cut, sort=False):
        originals = names[group.index]
        if originals.nunique() < 2:
            continue
        for head in sorted(range(1, keep), key=lambda h: abs(h - (keep + 1) // 2)):
            tried = originals.map(lambda name, head=head: name if len(name) <= width else
                                  name[:head] + "…" + name[len(name) - (keep - head):])
            if tried.nunique() == originals.nunique():
                cut[group.index] = tried
                break
        else:
            cut[group.index] = _where_they_differ(originals, width)
    return cut


def _where_they_differ(names: pd.Series, width: int) -> list[str]:
    """Names that differ in their middle, as their start and the part where they begin to
    differ (`void at::…AddFunctor<float>…`); numbered where even that is the same."""
    unique = list(names.unique())
    differ_at = next((at for at, chars in enumerate(zip(*unique, strict=False))
                      if len(set(chars)) > 1),
                     min(map(len, unique)))
    head = width // 3
    window = width - head - 2
    start = max(head, differ_at - window // 3)
    shown = [name[:head] + "…" + name[start:start + window] + "…" for name in names]
    if len(set(shown)) == names.nunique():
        return shown
    number = {name: n for n, name in enumerate(names.unique(), start=1)}
    return [elide(name, width - 4) + f" [{number[name]}]" for name in names]


def _figures(values: pd.Series) -> bool:
    """Mostly figures (`1.2 ms`, `2.44x (1.66-3.00)`, `34,406,400 (measured)`): never cut."""
    shown = values[values.str.strip() != ""]
    return bool(len(shown)) and shown.str.contains(r"\d").mean() >= 0.5


def _fitted(frame: pd.DataFrame, width: int | None) -> tuple[pd.DataFrame, list[str]]:
    """Empty columns dropped, then the rightmost ones until the rest fit `width`, text
    columns (names, errors) counted at NAME_MIN; what is left is shared by the text
    columns, cut in the middle. Returns the frame and the names of the dropped columns."""
    frame = frame.astype(str)
    first = frame.columns[0]
    frame = frame[[c for c in frame.columns if c == first or frame[c].str.strip().ne("").any()]]
    if not width:
        return frame, []
    needed, text = _needs(frame)

    def total(columns: list) -> int:  # borders and padding: 3 a column, and 1
        return sum(NAME_MIN if c in text else needed[c] for c in columns) + 3 * len(columns) + 1

    columns, dropped = list(frame.columns), []
    while len(columns) > 2 and total(columns) > width:
        dropped.append(" ".join(str(columns.pop()).split()))
    frame = _without_blank_rows(frame[columns].copy(), dropped)
    long = [c for c in columns if c in text]
    if long:
        _cut(frame, long, NAME_MIN + (width - total(columns)) // len(long))
    frame.columns = [_header(c, needed[c]) for c in columns]
    return frame, dropped


def _needs(frame: pd.DataFrame) -> tuple[dict, list]:
    """Each column's width (its longest value, or its header's longest word), and the text
    columns among them: the first (the names) and any not mostly figures, when wider than
    NAME_MIN."""
    needed = {c: max([len(v) for v in frame[c]] + [len(w) for w in str(c).split()] + [1])
              for c in frame.columns}
    first = frame.columns[0]
    return needed, [c for c in frame.columns
                    if needed[c] > NAME_MIN and (c == first or not _figures(frame[c]))]


def _cut(frame: pd.DataFrame, long: list, room: int) -> None:
    """The text columns `long` cut to `room`: the first (a name) in the middle, so that
    both its ends show; the others at their end."""
    for position, column in enumerate(long):
        frame[column] = _elided_apart(frame[column], room) if position == 0 else \
            frame[column].map(lambda v: v if len(v) <= room else v[:room - 1] + "…")


def _header(column: object, width: int) -> str:
    """A header wrapped between words to its column's width."""
    return "\n".join(textwrap.wrap(str(column), max(width, 1), break_long_words=False,
                                   break_on_hyphens=False)) or str(column)


def _without_blank_rows(frame: pd.DataFrame, dropped: list[str]) -> pd.DataFrame:
    """Where columns were `dropped`, the rows whose figures were all in them (named in
    `dropped` too): a row of a name and nothing else says nothing."""
    figures = [c for c in frame.columns[1:] if _figures(frame[c])]  # not names and scopes
    if not dropped or not figures:
        return frame
    blank = frame[figures].apply(lambda column: column.str.strip().eq("")).all(axis=1)
    if blank.any() and not blank.all():
        dropped.append(f"{fmt.counted(int(blank.sum()), 'row')} with figures only there")
        return frame[~blank]
    return frame


def rich_table(title: str, frame: pd.DataFrame, left_out: int = 0,
               width: int | None = None,
               elsewhere: str = "summary.md, report.html or a wider terminal have them"
               ) -> Table:
    """Figures never wrap or shrink: columns that do not fit `width` (the console's) are
    left out and named in the caption; the name column is cut in the middle."""
    # (a header's own line break stays one: `total\nwallclock` is two lines)
    frame, dropped = _fitted(frame.rename(columns=lambda c: "\n".join(
        visible(part) for part in str(c).split("\n"))).map(
        lambda value: visible(value) if isinstance(value, str) else value), width)
    notes = [f"{fmt.counted(left_out, 'more row')} not shown (--top N to see more)"] \
        if left_out else []
    if dropped:
        notes.append(f"left out to fit {width} columns: {', '.join(dropped)} ({elsewhere})")
    table = Table(title=title, title_justify="left", caption="\n".join(notes) or None,
                  caption_justify="left")
    for column in frame.columns:
        table.add_column(Text(str(column)), no_wrap=True)
    for values in frame.itertuples(index=False):  # text, never markup: `[red]` is a name
        table.add_row(*(Text(str(value)) for value in values))
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
    """The headline, every section (long tables cut to `top` rows, with a count of the
    rest), then the problems, the run directory and how to open its native files."""
    headline(report, console)
    for section, table, left_out in sections.shown(report, top, terminal=True):
        console.print(rich_table(section.title, table, left_out, width=console.width))
    for line in problems(report):
        console.print(Text(visible(line), style="yellow"))
    if report.run_dir:
        console.print(Text(visible(f"Report: {report.run_dir}")))
    for backend, path, command in tables.open_commands(report):
        console.print(Text(visible(f"  {backend}: {path}  (open with: {command})")))
