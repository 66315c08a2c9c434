"""Views of a run's frame made once: the findings, the sections and every renderer ask
for the same tables, and each of them costs a pass over the frame."""

from __future__ import annotations

from typing import Any

import pandas as pd


class FrameViews:
    frame: pd.DataFrame

    def __init__(self) -> None:
        self._views: dict[str, tuple[tuple, pd.DataFrame]] = {}
        self._parts: tuple[tuple, dict[str, pd.DataFrame]] | None = None

    def _stamp(self) -> tuple:
        """What the views are made again for when it changes: another frame, or rows added
        to this one."""
        return (id(self.frame), len(self.frame))

    def once(self, view: str, compute: Any) -> pd.DataFrame:
        """`compute()`, made once per frame under the name `view` (a costly view, the
        renderers' display tables, which the files and the terminal both show): a copy each
        time, so callers cannot spoil it."""
        stamp = self._stamp()
        kept = self._views.get(view)
        if kept is None or kept[0] != stamp:
            kept = self._views[view] = (stamp, compute())
        return kept[1].copy()

    def made(self) -> dict[str, pd.DataFrame]:
        """Every view made of this frame so far, by name."""
        stamp = self._stamp()
        return {view: table for view, (made_of, table) in self._views.items()
                if made_of == stamp}

    def adopt(self, views: dict[str, pd.DataFrame]) -> None:
        """`views` (`made()` by a process forked from this one, of the same frame) kept as
        if made here, where not made here already (runs/store.py)."""
        stamp, here = self._stamp(), self.made()
        for view, table in views.items():
            if view not in here:
                self._views[view] = (stamp, table)

    def scoped(self, *scopes: str) -> pd.DataFrame:
        """The frame's rows of `scopes`, in the frame's order. The frame is split by scope
        once: a report's views and sections asked for one scope or two forty times, and a
        filter of the whole frame (an 8-rank trace's frame holds 48k rows, two thirds of
        them operator shapes) takes from every column's chunks: filtered each time, an
        8-rank ingest took 0.1 s and 40 MB more."""
        parts = self._split()
        found = [parts[scope] for scope in dict.fromkeys(scopes) if scope in parts]
        if not found:
            return self.frame.iloc[:0].copy()
        if len(found) == 1:
            return found[0].copy()
        if not self.frame.index.is_monotonic_increasing:  # (the frame's order is not its index's)
            return self.frame[self.frame["scope"].isin(scopes)]
        return pd.concat(found).sort_index(kind="stable")

    def _split(self) -> dict[str, pd.DataFrame]:
        stamp = self._stamp()
        if self._parts is None or self._parts[0] != stamp:
            self._parts = (stamp, dict(tuple(self.frame.groupby("scope", sort=False))))
        return self._parts[1]
