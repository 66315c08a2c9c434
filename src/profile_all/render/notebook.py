"""A Report in Jupyter shows itself as the HTML report's body (the charts and long tables'
rest left out: no 5 MB of script in a cell). IPython is told so from here, by the class's
name, so that the data side never imports a renderer."""

from __future__ import annotations

import sys
from typing import Any


def show_reports_as_html() -> None:
    """Where this runs in an IPython shell (a notebook's kernel), its HTML formatter draws
    every Report with `html.body`; elsewhere nothing happens (and nothing is imported)."""
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    if shell is None:
        return
    shell.display_formatter.formatters["text/html"].for_type_by_name(
        "profile_all.report.report", "Report", _html)


def _html(report: Any) -> str:
    from profile_all.render import html

    return html.body(report, top=html.TOP)
