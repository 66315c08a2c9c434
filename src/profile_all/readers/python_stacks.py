"""Operators' call stacks in torch 2 traces recorded with `with_stack`.

Traces of 2021 wrote each operator's stack in a `Call stack` argument; torch 2 writes a
python_function event per Python call instead, around the operators the call made. An
operator's stack is then the functions of source files that enclose its start on its
thread, innermost first, joined by `;` as the 2021 argument was (`model.py(20): forward;
train.py(54): <module>`; built-in functions and `nn.Module: X` events are not frames of
it), at most depth_cap.MAX_DEPTH frames (a stack cut there ends in CUT). A stack is made
once per innermost frame, and the distinct stacks hold at most nesting.path_budget(frames)
characters: the operators beyond it get none, and that is said.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from profile_all.depth_cap import MAX_DEPTH
from profile_all.readers import nesting
from profile_all.readers.trace_links import enclosing, parents

#: ends a stack cut at MAX_DEPTH frames (the outer ones left out)
CUT = ";…"


def call_stacks(frames: list[tuple], ops: pd.DataFrame) -> tuple[np.ndarray, int]:
    """(per operator of `ops`, its stack or None; how many operators got none for the
    budget). `frames`: TraceColumns.frames, (name, thread, ts, dur)."""
    stacks = np.full(len(ops), None, dtype=object)
    if not frames or ops.empty:
        return stacks, 0
    table = pd.DataFrame(frames, columns=["name", "thread", "ts", "dur"]).sort_values(
        ["thread", "ts", "dur"], ascending=[True, True, False], kind="stable",
        ignore_index=True)
    budget, used, left_out = nesting.path_budget(len(table)), 0, 0
    made: dict[str, str] = {}  # each distinct stack once: every step's calls repeat them
    op_threads = ops.groupby("thread", sort=False).indices
    op_starts = ops["ts"].to_numpy(float)
    for thread, positions in table.groupby("thread", sort=False).indices.items():
        if thread not in op_threads:
            continue
        mine = table.iloc[positions]
        ts = mine["ts"].to_numpy(float)
        end = ts + mine["dur"].to_numpy(float)
        parent, _depth = parents(ts, end)
        names = mine["name"].to_numpy(object)
        inside = enclosing(ts, end, parent, op_starts[op_threads[thread]])
        texts = np.full(len(mine) + 1, None, dtype=object)  # the last: no frame (-1)
        for frame in np.unique(inside[inside >= 0]):
            chain, at = [], frame
            while at >= 0 and len(chain) < MAX_DEPTH:
                chain.append(names[at])
                at = parent[at]
            text = ";".join(chain) + (CUT if at >= 0 else "")
            if text in made:
                texts[frame] = made[text]
            elif used + len(text) <= budget:
                texts[frame] = made[text] = text
                used += len(text)
        got = texts[inside]
        left_out += int(((inside >= 0) & pd.isna(got)).sum())
        stacks[op_threads[thread]] = got
    return stacks, left_out


def stacks_said(path: Path | str, left_out: int) -> list[str]:
    """The doubt on the operators left without a stack by the budget (none when none)."""
    if not left_out:
        return []
    return [f"{path}: {left_out:,} operators have no call stack: their stacks were past "
            f"{nesting.PATH_CHARS_PER_RANGE} characters a Python call, or "
            f"{nesting.MAX_REGION_PATH_CHARS >> 20} MiB, of distinct stacks in all"]
