"""`profile-all compare --html`: the comparison as one self-contained page, with the two
runs' operator trees side by side (TensorBoard's diff view): each operator a row that opens
onto the operators inside it, its calls, host and device time in A and in B and the
change. Every name is escaped (html.text); no script is needed to open the tree."""

from __future__ import annotations

import pandas as pd

from profile_all import units as fmt
from profile_all.render import compare_table, html

_TREE_CSS = """
.tree summary, .tree .leaf { display: grid; grid-template-columns: var(--columns);
    gap: 0 8px; font-size: 12.5px; padding: 1px 0; border-bottom: 1px solid #eef0f2; }
.tree summary { cursor: pointer; list-style: none; }
.tree summary .name::before { content: "\\25B8  "; }
.tree details[open] > summary .name::before { content: "\\25BE  "; }
.tree .leaf .name::before { content: "\\2003"; }
.tree .head { font-weight: 600; background: #f6f8fa; }
.tree .num { text-align: right; white-space: nowrap; }
.tree .name { overflow-wrap: anywhere; }
.slower { color: #cf222e; } .faster { color: #1a7f37; }
"""


def _change(value: float) -> str:
    css = "slower" if value > 0 else "faster" if value < 0 else ""
    return f'<span class="{css}">{html.text(fmt.change(value))}</span>' \
        if pd.notna(value) else ""


def _cells(node: dict, device: bool) -> str:
    figures = [fmt.count(node["calls_a"]), fmt.count(node["calls_b"]),
               fmt.seconds(node["cpu_time_a"]), fmt.seconds(node["cpu_time_b"])]
    cells = [f'<span class="name" style="padding-left: {node["depth"] * 1.2:g}em">'
             f'{html.text(node["name"])}</span>']
    cells += [f'<span class="num">{html.cell(value)}</span>' for value in figures]
    cells.append(f'<span class="num">{_change(node["cpu_change"])}</span>')
    if device:
        cells += [f'<span class="num">{html.cell(fmt.seconds(node[f"gpu_time_{side}"]))}'
                  "</span>" for side in ("a", "b")]
        cells.append(f'<span class="num">{_change(node["gpu_change"])}</span>')
    return "".join(cells)


def tree_html(tree: pd.DataFrame) -> str:
    """The side-by-side tree (Report.operator_tree_diff, in its order) as nested
    <details>: a node with operators inside opens onto them; the outermost are open."""
    if tree.empty:
        return ""
    device = bool((tree[["gpu_time_a", "gpu_time_b"]].fillna(0) > 0).any(axis=None))
    heads = ["operator", "calls A", "calls B", "host A", "host B", "host change"] + (
        ["device A", "device B", "device change"] if device else [])
    columns = f"minmax(16em, 1fr) repeat({len(heads) - 1}, 6.5em)"
    parts = [f'<div class="tree" style="--columns: {columns}">',
             '<div class="leaf head">' + "".join(
                 f'<span class="{"name" if i == 0 else "num"}">{html.text(h)}</span>'
                 for i, h in enumerate(heads)) + "</div>"]
    nodes = tree.to_dict("records")
    depths = [node["depth"] for node in nodes] + [0]
    for position, node in enumerate(nodes):
        if depths[position + 1] > node["depth"]:  # operators inside it follow
            opened = " open" if node["depth"] == 0 else ""
            parts.append(f"<details{opened}><summary>{_cells(node, device)}</summary>")
        else:
            parts.append(f'<div class="leaf">{_cells(node, device)}</div>')
            parts += ["</details>"] * (node["depth"] - depths[position + 1])
    parts.append("</div>")
    return "\n".join(parts)


def render(table: pd.DataFrame, tree: pd.DataFrame, run_a: str, run_b: str) -> str:
    """The page: the comparison's table (Report.compare) and the operator trees."""
    body = [f"<h1>profile-all compare</h1><p>A: <code>{html.text(run_a)}</code><br>"
            f"B: <code>{html.text(run_b)}</code></p>",
            html.section_html("change", "Change from A to B (b / a - 1)",
                          html.table_html(compare_table.compare_table(table)))]
    if not tree.empty:
        body.append(html.section_html(
            "operator-tree", "Operator tree, side by side",
            "<p>As TensorBoard's diff view: each operator under those around it, over all "
            "its calls, in A and in B; open a row for the operators inside it. An operator "
            "of one run only has the other's figures empty.</p>" + tree_html(tree)))
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>profile-all compare</title><style>{html.CSS}{_TREE_CSS}</style>"
            f"</head>\n<body>\n" + "\n".join(body)
            + f"\n<script>{html.TABLE_JS}</script>\n</body></html>\n")
