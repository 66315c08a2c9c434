"""`profile-all show --format`: the report as terminal tables, markdown, CSV or JSON."""

from __future__ import annotations

from typing import TYPE_CHECKING, TextIO

import orjson
from rich.console import Console

from profile_all.report import markdown, terminal

if TYPE_CHECKING:
    from profile_all.report.report import Report

FORMATS = ("table", "md", "csv", "json")


def render_to(report: Report, format: str, top: int, stream: TextIO) -> None:
    """table and md: the report's tables, long ones cut to `top` rows; csv and json: every
    row of `Report.frame` (json: `{"meta": ..., "rows": [...]}`)."""
    if format == "table":
        terminal.render(report, Console(file=stream), top)
    elif format == "md":
        stream.write(markdown.render(report, top) + "\n")
    elif format == "csv":
        report.frame.to_csv(stream, index=False)
    elif format == "json":
        rows = report.frame.to_dict(orient="records")
        stream.write(orjson.dumps({"meta": report.meta, "rows": rows},
                                  option=orjson.OPT_SERIALIZE_NUMPY,
                                  default=str).decode() + "\n")
    else:
        raise ValueError(f"unknown format {format!r}; known: {', '.join(FORMATS)}")
