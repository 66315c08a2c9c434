"""Views of a run's frame made once: the findings, the sections and every renderer ask
for the same tables, and each of them costs a pass over the frame."""

from __future__ import annotations

from typing import Any

import pandas as pd


class FrameViews:
    frame: pd.DataFrame

    def __init__(self) -> None:
        self._views: dict[str, tuple[tuple, pd.DataFrame]] = {}

    def _stamp(self) -> tuple:
        """What the views are made again for when it changes: another frame, or rows added
        to this one."""
        return (id(self.frame), len(self.frame))

    def _once(self, view: str, compute: Any) -> pd.DataFrame:
        """A costly view (the counters' comparison) computed once for this frame: every
        renderer and check asks for it; a copy each time, so callers cannot spoil it."""
        stamp = self._stamp()
        kept = self._views.get(view)
        if kept is None or kept[0] != stamp:
            kept = self._views[view] = (stamp, compute())
        return kept[1].copy()

    def scoped(self, *scopes: str) -> pd.DataFrame:
        """The frame's rows of `scopes`, as a filter of the frame gives them, made once per
        frame and scopes: a filter of the whole frame takes every column's rows (an 8-rank
        trace's frame holds 48k rows, two thirds of them operator shapes, which no view
        reads), and a report's views and sections asked for one scope or two forty times."""
        wanted = list(dict.fromkeys(scopes))
        return self._once("scoped:" + ",".join(wanted),
                          lambda: self.frame[self.frame["scope"].isin(wanted)])

    def once(self, view: str, compute: Any) -> pd.DataFrame:
        """`compute()`, made once per frame under the name `view`: the renderers keep their
        display tables here, which the files and the terminal both show."""
        return self._once(view, compute)
