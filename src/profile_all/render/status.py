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
    if report.meta.target.get("kind") == "process":  # an attach: what it sampled, then
        return _attach_line(report, seen)
    if not seen:
        return ""
    whole = next((p for p in seen if p.window is None), seen[0])
    article = "an" if whole.step_source[0] in "aeiou" else "a"
    return f"{fmt.count(whole.steps)} step{'s' if whole.steps != 1 else ''}, each " \
           f"{article} {whole.step_source}"


def _attach_line(report: Report, seen: list) -> str:
    """`process 123 sampled for 30 s, then a torch.profiler window of 5 steps, each a
    pa.step()`."""
    attached = report.meta.passes[0] if report.meta.passes else None
    said = f"process {report.meta.target.get('pid')} sampled"
    if attached is not None and attached.target_wall_time:
        said += f" for {fmt.seconds(attached.target_wall_time)}"
    if seen:
        window = seen[0]
        article = "an" if window.step_source[0] in "aeiou" else "a"
        said += (f", then a torch.profiler window of {fmt.count(window.steps)} step"
                 f"{'s' if window.steps != 1 else ''}, each {article} {window.step_source}")
    return said


def since(report: Report) -> str:
    """What the timeline's seconds count from: the target's start, or an attach's."""
    return ("seconds since the attach began" if report.meta.target.get("kind") == "process"
            else "seconds since the target started")
