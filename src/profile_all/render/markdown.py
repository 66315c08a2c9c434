"""summary.md: the report as a markdown page."""

from __future__ import annotations

import html
from typing import TYPE_CHECKING

import pandas as pd

from profile_all import units as fmt
from profile_all.render import sections
from profile_all.render.problems import problems
from profile_all.render.status import steps_line
from profile_all.safe_text import visible

if TYPE_CHECKING:
    from profile_all.report.report import Report

TOP = 25


def _text(value: object) -> str:
    """Text from the run (names, errors, commands) made inert: Markdown previews render
    raw HTML, so `<`, `>` and `&` are escaped; control characters are shown
    (safe_text.visible: a newline as `\\n`), so it is one line."""
    return html.escape(visible(str(value)), quote=False)


def _code(value: object) -> str:
    """A code span, or the escaped text where a code span could not hold it."""
    text = visible(str(value))
    return f"`{text}`" if not set(text) & set("`<>&") else _text(text)


def _cell(value: object) -> str:
    if value is None or (isinstance(value, float) and value != value):
        return ""
    return _text(value).replace("|", "\\|")


def pipe_table(frame: pd.DataFrame, left_out: int = 0) -> str:
    """A pipe table, its columns padded to one width so that it reads as plain text too."""
    # (a header broken in two lines for the terminal reads as one line here)
    rows = [[_cell(str(column).replace("\n", " ")) for column in frame.columns]]
    rows += [[_cell(value) for value in row] for row in frame.itertuples(index=False, name=None)]
    widths = [max(3, *(len(row[index]) for row in rows)) for index in range(len(rows[0]))]
    lines = ["| " + " | ".join(cell.ljust(width) for cell, width in zip(row, widths,
                                                                      strict=True)) + " |"
             for row in rows]
    lines.insert(1, "|" + "|".join("-" * (width + 2) for width in widths) + "|")
    note = f"\n\n{fmt.counted(left_out, 'more row')} not shown." if left_out else ""
    return "\n".join(lines) + note


def render(report: Report, top: int = TOP,
           shown: list[sections.Shown] | None = None) -> str:
    """The report as markdown; long tables cut to `top` rows, with a count of the rest
    (`shown`: the sections' tables, when the caller made them already)."""
    meta = report.meta
    steps = steps_line(report)
    out = [f"# profile-all: {_code(meta.target.get('command', ''))}", "",
           f"Status: **{_text(meta.status)}**, exit code {meta.exit_code}"
           f"{_text('; ' + steps) if steps else ''}.", ""]
    found = problems(report)
    if found:
        out += ["## Problems", "", *[f"- {_text(line)}" for line in found], ""]
    for section, table, left_out in shown if shown is not None else sections.shown(report,
                                                                                   top):
        note = [_text(section.note), ""] if section.note else []
        out += [f"## {_text(section.title)}", "", *note, pipe_table(table, left_out), ""]
    return "\n".join(out)
