"""What the status line of every renderer says beside the status and the exit code."""

from __future__ import annotations

from typing import TYPE_CHECKING

from profile_all import units as fmt

if TYPE_CHECKING:
    from profile_all.report.report import Report


def steps_line(report: Report) -> str:
    """`40 steps, each an optimizer.step()`: the steps of the pass that ran whole (else of
    the first that saw any) and what marked them, for the status line; empty without steps."""
    seen = [p for p in report.meta.passes if p.steps and p.step_source]
    if not seen:
        return ""
    whole = next((p for p in seen if p.window is None), seen[0])
    article = "an" if whole.step_source[0] in "aeiou" else "a"
    return f"{fmt.count(whole.steps)} step{'s' if whole.steps != 1 else ''}, each " \
           f"{article} {whole.step_source}"
