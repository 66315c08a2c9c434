"""The call tree of a pstats profile, for an icicle chart: who called whom, for how long.

pstats keeps one edge per (caller, callee) pair, with the callee's cumulative time in the
calls from that caller; not one per call path. The tree is unfolded from the root (of the
functions no profiled function called, the one with the most cumulative time) depth
first, as SnakeViz unfolds it: a function reached by one path gets its callees' edge times
scaled by the share of its own cumulative time that path holds; a function already on the
path is not unfolded again (recursion); a node under MIN_SHARE of the root, or beyond
MAX_NODES, is left out (its time stays in its caller's).

Rows: scope `call`, the function as pstats names it, `parent` the path of its callers from
the root joined by rows.CALL_SEPARATOR (function names hold `/`, the regions' separator).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from profile_all.rows import call_path, row

MIN_SHARE = 0.002
MAX_NODES = 2000


def call_rows(entries: dict[Any, tuple], name_of: Any) -> list[list[Any]]:
    """`entries`: pstats.Stats.stats ({function: (cc, nc, tt, ct, callers)});
    `name_of`: a function's display name."""
    callees: dict[Any, dict[Any, float]] = defaultdict(dict)
    for function, (*_, callers) in entries.items():
        for caller, edge in callers.items():
            callees[caller][function] = edge[3]
    roots = [function for function, values in entries.items() if not values[4]]
    if not roots:
        return []
    root = max(roots, key=lambda function: entries[function][3])
    total = entries[root][3]
    if not total > 0:
        return []
    rows: list[list[Any]] = []
    pending = [(root, "", total, frozenset([root]))]
    while pending and len(rows) < MAX_NODES:
        function, parent, value, on_path = pending.pop()
        name = name_of(function)
        rows.append(row("call", name, "cumulative_time", value, parent=parent))
        own = entries[function][3]
        scale = value / own if own > 0 else 0.0
        path = call_path(parent, name)
        # smallest first onto the stack: the largest child is unfolded next
        for callee, seconds in sorted(callees.get(function, {}).items(), key=lambda c: c[1]):
            if callee not in on_path and seconds * scale >= MIN_SHARE * total:
                pending.append((callee, path, seconds * scale, on_path | {callee}))
    return rows
