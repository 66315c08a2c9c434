"""What tracing did to the numbers it traced: the functions whose share of the run differs
most between a tracer (every call timed, every call slowed) and a sampler (stacks read
from outside), beyond the sampling error, with the overhead of each one's pass."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from profile_all import units as fmt
from profile_all.report import start_up
from profile_all.report.findings.finding import Finding
from profile_all.rows import CALL_SEPARATOR

if TYPE_CHECKING:
    from profile_all.report.run_data import RunData

#: a share this many points apart (beyond the sampling error) is a distortion worth naming
POINTS = 0.05
NAMED = 3
#: a sampler whose own pass ran this much slower (its interval's low end) changed what it
#: sampled too: its shares are not the target's own
SLOWED = 0.10
#: functions whose time is a wait for another process or thread (a compiler's subprocess,
#: a worker, a lock, a sleep), as cProfile and py-spy name them: the tracer's per-call cost
#: does not make them heavier, so a gap there is the two passes' waits differing (Inductor's
#: 15 subprocess.run calls of 6 s were named 'heavier')
_WAITING = re.compile(
    r"subprocess\.py:\d+\((?:run|call|check_call|check_output|communicate|_communicate|wait|"
    r"_wait|_try_wait)\)|threading\.py:\d+\((?:wait|join|_wait_for_tstate_lock)\)|"
    r"queue\.py:\d+\(get\)|_base\.py:\d+\(result\)|"
    r"\b(?:run|call|check_output|communicate|_communicate|wait|_wait|_try_wait|join|result|"
    r"_wait_for_tstate_lock) \((?:subprocess|threading|concurrent/futures/_base)\.py\)|"
    r"time\.sleep|posix\.waitpid|select\.(?:select|poll)|method 'poll' of|"
    r"method 'acquire' of '_thread")


def tracing_distortion(report: RunData) -> list[Finding]:
    side_by_side = report.traced_vs_sampled()
    if side_by_side.empty:
        return []
    # the functions the tracer made heavier than they are, beyond the sampling error
    side_by_side = _without_waits(report, side_by_side)
    apart = side_by_side[(side_by_side["difference"] >= POINTS)
                         & (side_by_side["difference"] > side_by_side["sampled_share_error"])
                         & ~side_by_side["name"].str.contains(_WAITING)]
    # what runs at import time (module bodies): the tracer slows it, but it is no step's
    apart = start_up.without_imports(apart, start_up.script_name(report.meta.target))
    if apart.empty:
        return []
    traced, sampled = apart["traced_by"].iloc[0], apart["sampled_by"].iloc[0]
    if _in_window(report, traced) != _in_window(report, sampled):
        return []  # a window of steps against the whole script, its imports too: unlike
    slowed = _slowed(report, sampled)
    cwd = report.meta.cwd
    named = "; ".join(
        f"{fmt.code_path(one.name, cwd)}: {fmt.share(one.traced_share)} of the run traced, "
        f"{fmt.share(one.sampled_share)} ±{one.sampled_share_error * 100:.1f} sampled"
        for one in apart.head(NAMED).itertuples())
    more = len(apart) - NAMED
    functions = fmt.counted(len(apart), "function")
    pronoun = "it" if len(apart) == 1 else "them"
    return [Finding(
        "distortion",
        f"{traced} makes {functions} heavier than {sampled} sees {pronoun}, beyond the "
        f"sampling error: {named}"
        + (f"; {fmt.counted(more, 'more')} in the side-by-side table" if more > 0 else ""),
        weight=0.3, share=float(apart["difference"].iloc[0]),
        evidence=f"{traced}'s and {sampled}'s cumulative times; their passes' overheads: "
                 f"{_overhead(report, traced)} and {_overhead(report, sampled)}",
        suggestion=(f"{sampled} slowed the target too (its pass above {1 + SLOWED:.2g}x: "
                    "with --native, each sample pauses it longer where its C++ stack is "
                    "deep): neither share is the target's own; compare without --native"
                    if slowed else
                    f"{traced} slows every call it times, so what calls most looks heavier: "
                    f"trust {sampled}'s shares for time, {traced}'s for call counts"))]


def _in_window(report: RunData, backend: str) -> bool:
    """Whether the backend's pass ran in a window of steps (not the whole script)."""
    return any(one.host is not None for one in report.meta.passes if backend in one.backends)


def _without_waits(report: RunData, side_by_side: Any) -> Any:
    """Each function's traced share less the waits it holds (the waiting functions below it
    in the tracer's call tree): a sampler that samples running threads sees no wait, and
    the tracer counts it in every caller's time (Inductor's `cpp_pybinding` waiting 0.85 s
    on its compiler probes was 'heavier traced')."""
    tracer = side_by_side["traced_by"].iloc[0]
    calls = report.scoped("call")
    calls = calls[(calls["backend"] == tracer) & (calls["metric"] == "cumulative_time")]
    waits: dict[str, float] = {}
    for name, parent, value in zip(calls["name"], calls["parent"], calls["value"],
                                   strict=True):
        if _WAITING.search(str(name)) and parent:
            for caller in set(str(parent).split(CALL_SEPARATOR)):
                waits[caller] = waits.get(caller, 0.0) + float(value)
    if not waits:
        return side_by_side
    adjusted = side_by_side.copy()
    total = adjusted["traced_time"] / adjusted["traced_share"]
    held = adjusted["name"].map(waits).fillna(0.0).clip(upper=adjusted["traced_time"])
    adjusted["traced_share"] = (adjusted["traced_time"] - held) / total
    adjusted["difference"] = adjusted["traced_share"] - adjusted["sampled_share"]
    return adjusted.sort_values("difference", ascending=False, ignore_index=True)


def _slowed(report: RunData, backend: str) -> bool:
    """Whether `backend`'s pass ran the target more than SLOWED slower than the clean
    pass (its interval above that)."""
    for summary in report.meta.passes:
        if backend in summary.backends and summary.overhead_low is not None:
            return summary.overhead_low > 1 + SLOWED
    return False


def _overhead(report: RunData, backend: str) -> str:
    for summary in report.meta.passes:
        if backend in summary.backends:
            said = fmt.overhead(summary.overhead, summary.overhead_low, summary.overhead_high,
                                summary.overhead_verdict)
            return f"{backend} {said or 'not measured'}"
    return f"{backend} not measured"
