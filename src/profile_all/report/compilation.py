"""What torch.compile did, as the clean timing pass saw it: a row per compiled frame,
recompile and graph break, from the pass's record in meta.json (`compilation`, taken from
torch's own records while the pass ran), and the steps that held a compilation.

The timing pass is the reference: it runs the script as it is. Later passes compile too
(from a warmer cache, or not at all under a counter's dispatch mode), so theirs are not
shown here; their rows (scope `compile`) stay in the frame.
"""

from __future__ import annotations

import math

import pandas as pd

from profile_all.pass_record import PassRecord
from profile_all.readers import compile_ranges
from profile_all.run_record import RunRecord

COLUMNS = ["pass", "event", "where", "reason", "seconds", "count"]


def without_machinery(rows: pd.DataFrame) -> pd.DataFrame:
    """`rows` without torch.compile's own ranges (compiling, shown as compile time in
    `events`, not as operators or regions of the user's)."""
    machinery = compile_ranges.compiling(rows["name"])
    return rows[~machinery] if machinery.any() else rows


def compiled_pass(meta: RunRecord) -> PassRecord | None:
    """The pass whose compilations the report shows (of a run's `meta`): the first timing
    pass that compiled, else the first pass that did."""
    compiled = [p for p in meta.passes if p.compilation]
    return next((p for p in compiled if p.timing), compiled[0] if compiled else None)


def events(meta: RunRecord) -> pd.DataFrame:
    """COLUMNS: `compile` and `recompile` (a compiled frame: where it starts, the guard
    that failed, its Dynamo and backend seconds with its backward's), `graph break` (the
    user's line, the reason, how many graphs it broke)."""
    chosen = compiled_pass(meta)
    if chosen is None:
        return pd.DataFrame(columns=COLUMNS)
    record = chosen.compilation
    rows = [[chosen.number, "recompile" if frame["recompile_reason"] else "compile",
             frame["frame"], frame["recompile_reason"] or frame.get("failed", ""),
             frame["seconds"] + frame["backward_seconds"], 1]
            for frame in record.get("frames", [])]
    rows += [[chosen.number, "graph break", brk["where"], brk["reason"], math.nan,
              brk["count"]] for brk in record.get("graph_breaks", [])]
    return pd.DataFrame(rows, columns=COLUMNS)


def compile_steps(meta: RunRecord) -> list[int]:
    chosen = compiled_pass(meta)
    return list(chosen.compile_steps) if chosen else []


def total_seconds(meta: RunRecord) -> float:
    """The reference pass's compile time (every compilation, its backward's included)."""
    chosen = compiled_pass(meta)
    if chosen is None:
        return 0.0
    return float(sum(end - start for start, end in chosen.compilation["intervals"]))
