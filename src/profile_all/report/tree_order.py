"""The order of the summary's rows: a tree read top down."""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from profile_all.rows import region_paths


def tree_order(table: pd.DataFrame, scopes: Sequence[str]) -> list[int]:
    """The rows' positions as a tree read top down: the run, its steps, then each region
    after its parent, siblings the longest first (by the first wall-time total measured):
    a Lightning run's 100 regions began with its callbacks' hooks, alphabetically."""
    timed = next((column for column in table.columns
                  if isinstance(column, tuple) and column[1:] == ("wall_time", "total")), None)
    times = table[timed].fillna(0.0).tolist() if timed is not None else [0.0] * len(table)
    paths = region_paths(table["parent"], table["name"])
    time_of = dict(zip(paths, times, strict=True))

    def key(at: int) -> tuple:
        parts = paths[at].split("/")
        steps = tuple((-time_of.get("/".join(parts[:depth + 1]), 0.0), parts[depth])
                      for depth in range(len(parts)))
        return (scopes.index(table["scope"].iloc[at]), steps)
    return sorted(range(len(table)), key=key)
