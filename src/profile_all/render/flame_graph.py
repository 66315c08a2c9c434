"""Call trees (rows of scope `call`: cProfile's, py-spy's) as Plotly icicles, drawn in the
browser as the other charts are (charts.py): a box a call path, its width its cumulative
time there.
Plotly draws nothing when a box holds less than its children (`branchvalues="total"`),
so they are held to that here too, for rows saved before readers/call_tree.py was."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from profile_all.rows import call_path
from profile_all.units import code_path

if TYPE_CHECKING:
    from profile_all.report.report import Report


def call_icicles(report: Report) -> list[tuple[str, dict[str, Any]]]:
    """(title, figure) of each backend's call tree: a tracer's (cProfile) as an icicle, a
    sampler's (py-spy) as a flame graph, its roots at the bottom."""
    calls = report.scoped("call")
    calls = calls[calls["metric"] == "cumulative_time"]
    sampled = {name for name, said in report.facts.items() if said.sampled}
    return [("Flame graph" if backend in sampled else "Call tree",
             _icicle(calls[calls["backend"] == backend], backend, backend in sampled,
                     report.meta.cwd))
            for backend in dict.fromkeys(calls["backend"])]


def _icicle(calls: Any, backend: str, flame: bool, cwd: str) -> dict[str, Any]:
    """One backend's call tree as an icicle (click a box to zoom into it), from its first
    pass and rank that has one; a box's width is its cumulative time in its callers."""
    first = calls.iloc[0]
    calls = calls[(calls["pass"] == first["pass"]) & (calls["rank"] == first["rank"])]
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
    kind = "Flame graph, sampled" if flame else "Call tree"
    return {"data": [{"type": "icicle", "ids": ids, "parents": calls["parent"].tolist(),
                      "labels": [code_path(name, cwd) for name in calls["name"]],
                      "values": [values[i] for i in ids],
                      "branchvalues": "total", "maxdepth": 6,
                      **({"tiling": {"orientation": "v", "flip": "y"}} if flame else {}),
                      "hovertemplate": "%{label}<br>%{value:.3f} ms<extra></extra>"}],
            "layout": {"title": {"text": f"{kind} ({backend}): click a box to zoom",
                                 "x": 0, "xanchor": "left"},
                       "height": 520, "margin": {"l": 10, "r": 10, "t": 40, "b": 10}}}
