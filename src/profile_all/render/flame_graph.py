"""Call trees (rows of scope `call`: cProfile's, py-spy's) as flame graphs, drawn in the
browser as the other charts are (charts.py): a bar a call path, as wide as its cumulative
time there, on its caller's bar (a sampler's, flame-graph fashion, roots at the bottom) or
under it (a tracer's, roots at the top), coloured by the package or module of its code.

Drawn as bars with a base, not as Plotly's icicle, which is not in the partial bundle of
plotly.js the page inlines (vendor/README.md). A label is cut to what its bar holds; a
click on a bar widens the chart to it, a double click goes back. A bar holds at least its
children: they are scaled down to it for rows saved before readers/call_tree.py kept to
that."""

from __future__ import annotations

import math
import re
from typing import TYPE_CHECKING, Any

from profile_all.rows import call_path
from profile_all.units import code_path

if TYPE_CHECKING:
    from profile_all.report.report import Report

#: the colours of the packages holding the most time, the rest in OTHER's
PALETTE = ("#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1",
           "#ff9da7", "#9c755f")
OTHER = ("other", "#bab0ac")
#: a level's height in pixels, and the chart's bounds (a sampler's tree of imports: 100
#: levels)
LEVEL_PX, LEAST_PX, MOST_PX = 18, 240, 1800
#: the chart's width in pixels on the page (its column is 1,100), and a label's character's
#: at the bars' font: a label is cut to what its bar holds (Plotly's own fitting hid every
#: label of a deep tree)
CHART_PX, CHAR_PX = 1000, 6.2
#: bars narrower than this share of the whole are left out (under a pixel of a page's
#: width; their callers hold their time): a Lightning run's 250 KB of import stacks
NARROWEST = 1 / 1000


def call_flames(report: Report) -> list[tuple[str, dict[str, Any]]]:
    """(title, figure) of each backend's call tree: a sampler's (py-spy) as a flame graph,
    its roots at the bottom, a tracer's (cProfile) as a call tree, its roots at the top."""
    calls = report.scoped("call")
    calls = calls[calls["metric"] == "cumulative_time"]
    sampled = {name for name, said in report.facts.items() if said.sampled}
    return [("Flame graph" if backend in sampled else "Call tree",
             _figure(calls[calls["backend"] == backend], backend, backend in sampled,
                     report.meta.cwd))
            for backend in dict.fromkeys(calls["backend"])]


#: an installed package's path, its name the first part after it; the standard library's
_SITE = re.compile(r"/(?:site|dist)-packages/([^/:(]+)")
_STDLIB = re.compile(r"/lib/python3\.\d+/[^:(]*:")


def package_of(name: str) -> str:
    """What a call's colour says: an installed package (`torch`), `python` for the
    standard library, the module of a file of the user's own (`train`), `built-in` for C
    functions, `thread` for a sampler's threads."""
    if name.startswith("thread "):
        return "thread"
    if name.startswith(("~", "{")) or "<built-in" in name or "<method" in name:
        return "built-in"
    installed = _SITE.search(name)
    if installed:
        return installed.group(1).removesuffix(".py")
    if _STDLIB.search(name):
        return "python"
    file = name.split(":", 1)[0]
    return file.rsplit("/", 1)[-1].removesuffix(".py") or file


def _tree(calls: Any) -> tuple[list[str], list[str], list[str], dict[str, float]]:
    """(ids, parents, names, values in ms) of the first pass and rank's tree, each value
    at most its parent's less its earlier siblings'."""
    first = calls.iloc[0]
    calls = calls[(calls["pass"] == first["pass"]) & (calls["rank"] == first["rank"])]
    ids = [call_path(parent, name)
           for parent, name in zip(calls["parent"], calls["name"], strict=True)]
    values = dict(zip(ids, calls["value"] * 1e3, strict=True))
    children: dict[str, list[str]] = {}
    for node, parent in zip(ids, calls["parent"], strict=True):
        children.setdefault(parent, []).append(node)
    pending = [(node, values[node]) for node in children.get("", [])]
    while pending:
        node, value = pending.pop()
        claimed = math.fsum(values[child] for child in children.get(node, []))
        factor = value / claimed * (1 - 1e-12) if claimed > value else 1.0
        for child in children.get(node, []):
            values[child] *= factor
            pending.append((child, values[child]))
    return ids, calls["parent"].tolist(), calls["name"].tolist(), values


def _layout(ids: list[str], parents: list[str], values: dict[str, float]) -> dict[str, float]:
    """Each bar's start: the roots side by side from 0, each node's children from its
    start, the widest first."""
    children: dict[str, list[str]] = {}
    for node, parent in zip(ids, parents, strict=True):
        children.setdefault(parent, []).append(node)
    starts: dict[str, float] = {}
    pending = [("", 0.0)]
    while pending:
        parent, at = pending.pop()
        for child in sorted(children.get(parent, []), key=lambda node: -values[node]):
            starts[child] = at
            pending.append((child, at))
            at += values[child]
    return starts


def _depths(ids: list[str], parents: list[str]) -> dict[str, int]:
    """Each node's level: 0 for a root (its parent empty, or not in the tree)."""
    parent_of = dict(zip(ids, parents, strict=True))
    depths: dict[str, int] = {}
    for node in ids:
        above = []  # the node and its callers not yet placed, innermost first
        while node not in depths:
            above.append(node)
            if parent_of[node] not in parent_of:
                depths[above.pop()] = 0
                break
            node = parent_of[node]
        for below in reversed(above):
            depths[below] = depths[parent_of[below]] + 1
    return depths


def _colours(packages: list[str], ids: list[str], values: dict[str, float],
             depths: dict[str, int]) -> dict[str, str]:
    """A colour each of the packages holding the most time (a node's time shared with the
    callers above it, so that a package is not weighed once a level)."""
    weight: dict[str, float] = {}
    for node, package in zip(ids, packages, strict=True):
        weight[package] = weight.get(package, 0.0) + values[node] / (depths[node] + 1)
    ranked = sorted(weight, key=lambda package: -weight[package])
    return dict(zip(ranked, PALETTE, strict=False))


def fitted(label: str, share: float) -> str:
    """`label` as a bar of `share` of the chart's width holds it: whole, cut (`torch/nn/mo…`),
    or nothing under 6 characters."""
    room = int(share * CHART_PX / CHAR_PX) - 1
    if room >= len(label):
        return label
    return label[:room - 1] + "…" if room >= 6 else ""


def _trace(package: str, colour: str, members: list[int], ids: list[str], labels: list[str],
           values: dict[str, float], starts: dict[str, float], depths: dict[str, int],
           total: float) -> dict[str, Any]:
    """The bars of one package's calls (`members`: their indices), figures to 6 digits."""
    nodes = [ids[i] for i in members]
    return {"type": "bar", "orientation": "h", "name": package,
            "y": [depths[node] for node in nodes],
            "x": [float(f"{values[node]:.6g}") for node in nodes],
            "base": [float(f"{starts[node]:.6g}") for node in nodes],
            "text": [fitted(labels[i], values[node] / total)
                     for i, node in zip(members, nodes, strict=True)],
            "customdata": [[float(f"{starts[node]:.6g}"),
                            float(f"{starts[node] + values[node]:.6g}"),
                            round(100 * values[node] / total, 1), labels[i]]
                           for i, node in zip(members, nodes, strict=True)],
            "textposition": "inside", "insidetextanchor": "start", "width": 0.94,
            "textfont": {"size": 10}, "constraintext": "none", "cliponaxis": True,
            "marker": {"color": colour, "line": {"color": "#ffffff", "width": 0.5}},
            "hovertemplate": "%{customdata[3]}<br>%{x:.3f} ms, %{customdata[2]}%"
                             "<extra>%{fullData.name}</extra>"}


def _figure(calls: Any, backend: str, flame: bool, cwd: str) -> dict[str, Any]:
    ids, parents, names, values = _tree(calls)
    labels = [code_path(name, cwd) for name in names]
    starts, depths = _layout(ids, parents, values), _depths(ids, parents)
    total = math.fsum(values[node] for node in ids if depths[node] == 0) or 1.0
    packages = [package_of(name) for name in names]
    colours = _colours(packages, ids, values, depths)
    groups: dict[str, list[int]] = {}
    for index, package in enumerate(packages):
        if values[ids[index]] >= NARROWEST * total:
            groups.setdefault(package if package in colours else OTHER[0], []).append(index)
    data = [_trace(package, colours.get(package, OTHER[1]), groups.get(package, []), ids,
                   labels, values, starts, depths, total)
            for package in [*colours, OTHER[0]]]
    levels = max(depths.values(), default=0) + 1
    kind = "Flame graph, sampled" if flame else "Call tree"
    return {"data": [trace for trace in data if trace["x"]],
            "layout": {"title": {"text": f"{kind} ({backend}): click a bar to widen it, "
                                         "double-click to go back", "x": 0, "xanchor": "left"},
                       "barmode": "overlay", "bargap": 0,
                       "xaxis": {"ticksuffix": " ms", "zeroline": False},
                       "yaxis": {"visible": False, "autorange": True if flame else "reversed"},
                       "legend": {"orientation": "h", "y": -0.08, "yanchor": "top"},
                       "height": min(MOST_PX, max(LEAST_PX, 90 + LEVEL_PX * levels)),
                       "margin": {"l": 10, "r": 10, "t": 40, "b": 10},
                       "meta": {"widen": True}}}
