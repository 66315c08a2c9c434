"""`profile-all show --format`: the report as terminal tables, markdown, CSV or JSON."""

from __future__ import annotations

from typing import TYPE_CHECKING, TextIO

import orjson
import pandas as pd
from rich.console import Console
from rich.text import Text

from profile_all.render import compare_table, markdown, tables, terminal
from profile_all.safe_text import visible, visible_all

if TYPE_CHECKING:
    from profile_all.report.report import Report

FORMATS = ("table", "md", "csv", "json")


def findings_json(report: Report) -> str:
    """`run --json`: the run directory, its meta and its findings (NaN as null)."""
    findings = report.findings().astype(object).where(report.findings().notna(), None)
    return orjson.dumps(visible_all({
        "run_dir": str(report.run_dir) if report.run_dir else None,
        "status": report.meta.status, "exit_code": report.exit_code,
        "findings": findings.to_dict(orient="records"), "meta": report.meta.to_json()}),
        option=orjson.OPT_SERIALIZE_NUMPY, default=str).decode()


def render_to(report: Report, format: str, top: int, stream: TextIO) -> None:
    """table and md: the report's tables, long ones cut to `top` rows; csv and json: every
    row of `Report.frame` (json: `{"meta": ..., "rows": [...]}`)."""
    if format == "table":
        terminal.render(report, Console(file=stream), top)
    elif format == "md":
        stream.write(markdown.render(report, top) + "\n")
    elif format == "csv":
        visible_text(report.frame).to_csv(stream, index=False)
    elif format == "json":
        rows = visible_text(report.frame).to_dict(orient="records")
        stream.write(orjson.dumps({"meta": visible_all(report.meta.to_json()), "rows": rows},
                                  option=orjson.OPT_SERIALIZE_NUMPY,
                                  default=str).decode() + "\n")
    else:
        raise ValueError(f"unknown format {format!r}; known: {', '.join(FORMATS)}")


def render_compare(table: pd.DataFrame, format: str, stream: TextIO,
                   caption: list[str] = (), top: int | None = None) -> None:
    """`Report.compare`'s table as a terminal table that fits the console (with the lines
    of `caption` under it) or markdown, each its first `top` rows (50,000 regions in
    common printed 2.6 MB), CSV or JSON (every row and column)."""
    shown, left_out = tables.cut(compare_table.compare_table(table), top)
    if format == "table":
        console = Console(file=stream)
        console.print(terminal.rich_table("Change from A to B (b / a - 1)", shown, left_out,
                                          width=console.width,
                                          elsewhere="-f md or a wider terminal has them"))
        for line in caption:
            console.print(Text(visible(line)))
    elif format == "md":
        print(markdown.pipe_table(shown), file=stream)
        if left_out:
            print(f"\n{left_out:,} more rows (-f csv or -f json hold every one)", file=stream)
    elif format == "csv":
        visible_text(table).to_csv(stream, index=False)
    else:
        print(visible_text(table).to_json(orient="records"), file=stream)


def visible_text(frame: pd.DataFrame) -> pd.DataFrame:
    """`frame` with its text columns' control characters shown (safe_text.visible): CSV
    and JSON go to a terminal as often as to a file, and a raw carriage return splits a
    CSV row (report.parquet keeps the bytes). Each distinct text is looked at once."""
    text = [c for c in frame.columns if frame[c].dtype == object or pd.api.types.is_string_dtype(
        frame[c])]
    changed = {}
    for column in text:
        values = frame[column]
        shown = {value: visible(value) for value in pd.unique(values.dropna())
                 if isinstance(value, str) and visible(value) != value}
        if shown:
            changed[column] = values.map(lambda v, shown=shown: shown.get(v, v)
                                         if isinstance(v, str) else v)
    return frame.assign(**changed) if changed else frame
