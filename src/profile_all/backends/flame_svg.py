"""A call tree (rows of scope `call`) as a flame graph in one SVG file, laid out as Brendan
Gregg's flamegraph.pl lays them out: the roots at the bottom, each box as wide as its
share of the samples, its callees above it in name order, the name and time in a tooltip.
It opens in any browser, offline, and needs no script."""

from __future__ import annotations

import zlib
from collections.abc import Iterable
from functools import partial
from html import escape as html_escape
from typing import Any

from profile_all.rows import call_path
from profile_all.units import code_path

WIDTH = 1200
ROW = 16
FONT = 12
#: a box narrower than this (pixels) is not drawn; its time stays in its caller's box
MIN_WIDTH = 0.3
#: &, < and > escaped, as xml.sax.saxutils does (whose import pulls urllib, http and ssl:
#: 12 ms of every command, which loads every backend for its options)
escape = partial(html_escape, quote=False)
_CHARACTER = 0.6 * FONT  # the width of a character of the font, about


def flame_svg(calls: Iterable[list[Any]], title: str, unit: str = "s", cwd: str = "") -> str:
    """`calls`: rows of scope `call` (scope, name, parent, metric, stat, value, unit); each
    box named as the report's tables name code (installed packages from the package)."""
    children: dict[str, list[tuple[str, str, float]]] = {}
    for _scope, name, parent, _metric, _stat, value, _unit in calls:
        children.setdefault(parent, []).append((call_path(parent, name),
                                                 code_path(name, cwd), value))
    roots = sorted(children.get("", []), key=lambda node: node[1])
    total = sum(value for _node, _name, value in roots)
    depth = _depth(children)
    height = (depth + 3) * ROW
    boxes: list[str] = []
    pending = [(node, name, value, x, 0) for node, name, value, x in
               _offsets(roots, 0.0, total)] if total > 0 else []
    while pending:
        node, name, value, x, level = pending.pop()
        width = value / total * (WIDTH - 20)
        if width < MIN_WIDTH:
            continue
        boxes.append(_box(name, value, value / total, unit, 10 + x, height - (level + 2) * ROW,
                          width))
        inner = sorted(children.get(node, []), key=lambda child: child[1])
        pending += [(child, child_name, child_value, at, level + 1) for
                    child, child_name, child_value, at in _offsets(inner, x, total)]
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
            f'font-family="monospace" font-size="{FONT}">'
            f'<rect width="100%" height="100%" fill="#f8f8f8"/>'
            f'<text x="{WIDTH / 2}" y="{ROW}" text-anchor="middle">{escape(title)}</text>'
            + "".join(boxes) + "</svg>\n")


def _offsets(nodes: list[tuple[str, str, float]], x: float, total: float
             ) -> list[tuple[str, str, float, float]]:
    """Each node with the x (in pixels) it starts at, side by side from `x`."""
    placed, at = [], x
    for node, name, value in nodes:
        placed.append((node, name, value, at))
        at += value / total * (WIDTH - 20)
    return placed


def _depth(children: dict[str, list[tuple[str, str, float]]]) -> int:
    deepest, pending = 0, [(node, 1) for node, _name, _value in children.get("", [])]
    while pending:
        node, level = pending.pop()
        deepest = max(deepest, level)
        pending += [(child, level + 1) for child, _name, _value in children.get(node, [])]
    return deepest


def _box(name: str, value: float, share: float, unit: str, x: float, y: float,
         width: float) -> str:
    hashed = zlib.crc32(name.encode("utf-8", "replace"))
    fill = f"rgb({205 + hashed % 50},{80 + hashed // 50 % 130},{hashed // 7000 % 55})"
    shown = value * 1e3 if unit == "s" else value
    said = f"{name} ({shown:,.1f} {'ms' if unit == 's' else unit}, {share:.1%})"
    fits = int((width - 4) / _CHARACTER)
    label = name if len(name) <= fits else (name[:fits - 2] + ".." if fits > 3 else "")
    return (f'<g><title>{escape(said)}</title><rect x="{x:.1f}" y="{y}" width="{width:.1f}" '
            f'height="{ROW - 1}" fill="{fill}" rx="2"/>'
            f'<text x="{x + 2:.1f}" y="{y + FONT}">{escape(label)}</text></g>')
