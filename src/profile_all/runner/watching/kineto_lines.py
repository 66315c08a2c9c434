"""Kineto's lines that profile-all's own torch.profiler sessions make, kept out of the
script's output as it is echoed (the pass's stderr log keeps them): each session's start
and stop prints `USDT:2026-11-28 09:37:35 19745:19745 SyncActivityProfilerHandler.cpp:52]
profiler_start` on the target's stderr, which read as the script's own output, unexplained.

The echo goes on as the output comes: only a line's start that may begin such a line is
held back until its end shows what it is."""

from __future__ import annotations

import re

#: a whole line of Kineto's session log
KINETO_LINE = re.compile(r"USDT:\d{4}-\d\d-\d\d \d\d:\d\d:\d\d \d+:\d+ [\w.]+:\d+\] "
                         r"profiler_\w+\r?\n")
PREFIX = "USDT:"


class KinetoLines:
    """Text echoed without Kineto's session lines."""

    def __init__(self) -> None:
        self._held = ""  # a line's start that may begin a Kineto line
        self._at_line_start = True

    def __call__(self, text: str) -> str:
        text, self._held = self._held + text, ""
        shown = []
        for piece in text.splitlines(keepends=True):
            starts_a_line = self._at_line_start
            self._at_line_start = piece.endswith(("\n", "\r"))
            if not starts_a_line:
                shown.append(piece)
            elif piece.endswith("\n"):
                shown.append("" if KINETO_LINE.fullmatch(piece) else piece)
            elif piece.startswith(PREFIX) or PREFIX.startswith(piece):
                self._held, self._at_line_start = piece, True
            else:
                shown.append(piece)
        return "".join(shown)

    def rest(self) -> str:
        """What was held back when the output ended."""
        held, self._held = self._held, ""
        return held
