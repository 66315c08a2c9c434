"""cProfile's call tree (rows of scope `call`) as a Plotly icicle, drawn in the browser as
the other charts are (charts.py): a box a call path, its width its cumulative time there.
Plotly draws nothing when a box holds less than its children (`branchvalues="total"`),
so they are held to that here too, for rows saved before readers/call_tree.py was."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from profile_all.rows import call_path

if TYPE_CHECKING:
    from profile_all.report.report import Report


def call_icicle(report: Report) -> dict[str, Any] | None:
    """cProfile's call tree as an icicle (click a box to zoom into it), from the first
    pass and rank that has one; a box's width is its cumulative time in its callers."""
    frame = report.frame
    calls = frame[(frame["scope"] == "call") & (frame["metric"] == "cumulative_time")]
    if calls.empty:
        return None
    first = calls.iloc[0]
    calls = calls[(calls["pass"] == first["pass"]) & (calls["rank"] == first["rank"])
                  & (calls["backend"] == first["backend"])]
    ids = [call_path(parent, name)
           for parent, name in zip(calls["parent"], calls["name"], strict=True)]
    values = dict(zip(ids, calls["value"] * 1e3, strict=True))
    children: dict[str, list[str]] = {}
    for node, parent in zip(ids, calls["parent"], strict=True):
        children.setdefault(parent, []).append(node)
    # a box holds at least its children (rows saved before readers.call_tree kept to
    # that): from the roots down, children claiming more are scaled down to their parent
    pending = [(node, values[node]) for node in children.get("", [])]
    while pending:
        node, value = pending.pop()
        claimed = math.fsum(values[child] for child in children.get(node, []))
        factor = value / claimed * (1 - 1e-12) if claimed > value else 1.0
        for child in children.get(node, []):
            values[child] *= factor
            pending.append((child, values[child]))
    return {"data": [{"type": "icicle", "ids": ids, "parents": calls["parent"].tolist(),
                      "labels": calls["name"].tolist(), "values": [values[i] for i in ids],
                      "branchvalues": "total", "maxdepth": 6,
                      "hovertemplate": "%{label}<br>%{value:.3f} ms<extra></extra>"}],
            "layout": {"title": {"text": f"Call tree ({first['backend']}): click a box to zoom",
                                 "x": 0, "xanchor": "left"},
                       "height": 520, "margin": {"l": 10, "r": 10, "t": 40, "b": 10}}}
