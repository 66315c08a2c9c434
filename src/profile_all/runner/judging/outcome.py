"""How a pass ended, decided once from what its ranks said and how its process ended, and
how the run ended from its passes."""

from __future__ import annotations

import signal
from dataclasses import dataclass, field
from typing import Any

from profile_all.pass_record import PassRecord
from profile_all.runner.planning.plan import Pass
from profile_all.runner.spec import PassResult

TIMEOUT_EXIT_CODE = 124

#: outcomes that did not cause a pass to fail, least telling last: a rank stopped by
#: torchrun after another failed, then a rank that ended well
_CAUSES_LAST = ("terminated", "ok")


def rank_outcome(result: PassResult, ended: str, timeout: float | None) -> dict[str, Any]:
    """A rank's outcome as the pass's verdict has it: a timeout or a stop signal that
    profile-all got (`ended`: `exited`, `timeout` or the signal's name) overrides what
    the rank said, which is kept as `ended_as`; a rank stopped by Ctrl-C is interrupted."""
    outcome = dict(result.outcome)
    if ended != "exited":
        if outcome["status"] == "ok" and not result.recovered:
            return outcome  # it ended well on its own before the stop (a rank that finished)
        outcome["ended_as"] = outcome["error"]
    if ended == "timeout":
        outcome.update(status="timeout", exit_code=TIMEOUT_EXIT_CODE,
                       error=f"timed out after {timeout:g} s")
    elif ended.startswith("SIG") or outcome["status"] == "interrupted":
        signum = signal.Signals[ended] if ended.startswith("SIG") else signal.SIGINT
        error = "interrupted (Ctrl-C)" if signum == signal.SIGINT else \
            f"interrupted: profile-all got {signum.name}"
        if not outcome.get("started", True):
            error += " before the pass's process started: nothing measured"
        outcome.update(status="interrupted", exit_code=128 + signum, error=error)
    return outcome


def _cause(outcomes: list[tuple[PassResult, dict[str, Any]]]
           ) -> tuple[PassResult, dict[str, Any]]:
    """The rank whose outcome is the pass's: the first failing rank, the one that ended
    first (the cause, not the ranks that failed or were stopped after it)."""
    return min(outcomes, key=lambda pair: (
        _CAUSES_LAST.index(pair[1]["status"]) if pair[1]["status"] in _CAUSES_LAST else -1,
        pair[1].get("ended_at") or float("inf"), pair[0].rank))


def pass_summary(run_pass: Pass, results: list[PassResult], ended: str,
                 timeout: float | None, wall: float, distributed: bool) -> PassRecord:
    """The pass as the run's record has it: its verdict (the cause's outcome), its target
    time (its slowest rank's), its steps and losses, and per rank how it ended."""
    outcomes = [(result, rank_outcome(result, ended, timeout)) for result in results]
    cause, outcome = _cause(outcomes)
    times = [o["target_wall_time"] for _r, o in outcomes if o["target_wall_time"] is not None]
    if len(times) < len(outcomes):  # a rank killed took its clock along: the pass's is it
        times.append(wall)
    prefix = f"rank {cause.rank}: " if distributed and outcome["error"] else ""
    failures = _backend_failures(results, distributed)
    status = outcome["status"]
    if status == "ok" and any(f["phase"] != "note" for f in failures):
        status = "partial"  # the target ended well, but a backend lost what it measured
    return PassRecord(
        number=run_pass.index, backends=run_pass.backends, timing=run_pass.timing,
        repeat=run_pass.repeat, status=status, exit_code=outcome["exit_code"],
        error=prefix + outcome["error"], target_wall_time=max(times, default=None),
        process_wall_time=wall, recovered=any(r.recovered for r in results),
        **_what_ranks_said(results),
        backend_failures=failures,
        logs=_logs(run_pass, outcome),
        failed_rank=cause.rank if distributed and outcome["status"] != "ok" else None,
        ranks=[{"rank": r.rank, **o, "recovered": r.recovered} for r, o in outcomes]
        if distributed else [])


def _logs(run_pass: Pass, outcome: dict[str, Any]) -> list[str]:
    """The pass's stdout and stderr logs; none when its process never started."""
    if not outcome.get("started", True):
        return []
    return [f"artifacts/pass{run_pass.index}.stdout.log",
            f"artifacts/pass{run_pass.index}.stderr.log"]


def _backend_failures(results: list[PassResult], distributed: bool) -> list[dict[str, Any]]:
    """Every rank's backend failures and notes, each named by its rank where there are
    several."""
    return [{**failure, "error": (f"rank {r.rank}: " if distributed else "") + failure["error"]}
            for r in results for failure in r.backend_failures]


def _what_ranks_said(results: list[PassResult]) -> dict[str, Any]:
    """What the pass's ranks measured of the target's shape, one value for the pass: the
    most steps, the widest window, the first step source and device that any rank named,
    the longest list of compile steps, and every profiler the target called, once."""
    steps = [r.steps for r in results if r.steps is not None]
    return {
        "steps": max(steps) if steps else None,
        "window": max((r.window for r in results if r.window), default=None),
        "step_source": next((r.step_source for r in results if r.step_source), ""),
        "ran_on": next((r.ran_on for r in results if r.ran_on), ""),
        "compile_steps": max((r.compile_steps for r in results), key=len, default=[]),
        **_windows_said(results),
        "compilation": next((r.compilation for r in results if r.compilation), {}),
        "target_profilers": list({(use["tool"], use["where"]): use for r in results
                                  for use in r.target_profilers}.values())}


def failed_before_its_steps(run_pass: Pass, summary: PassRecord, planned: int,
                            defaults: bool) -> bool:
    """The clean timing pass of a script ended with an error before its first step, with
    passes after it, on the default backends (`defaults`): each would run the script's
    set-up again to the same failure (named backends are run: a profile of the failure may
    be what is asked)."""
    return (defaults and run_pass.timing and summary.exit_code != 0 and not summary.steps
            and summary.status != "timeout" and run_pass.index < planned)


def _windows_said(results: list[PassResult]) -> dict[str, Any]:
    """Where a pass ran in a window of its host's steps: the host and its first step; of a
    host, the steps it left out for the windows (the rank that left out most)."""
    return {"host": next((r.host for r in results if r.host is not None), None),
            "window_from": next((r.window_from for r in results if r.window_from), None),
            "window_steps": max((r.window_steps for r in results), key=len, default=[])}


def step_times(results: list[PassResult]) -> list[float]:
    """The slowest rank's per-step times (the most steps), for the pass's overhead."""
    return max((r.step_times for r in results), key=len, default=[])


def run_ending(summaries: list[PassRecord], status: str,
               stop_signal: int | None) -> tuple[str, int]:
    """(the run's status, its exit code): the first failing pass's exit code; `partial`
    when a pass lost data, a profiler's pass killed after the script ended well in the
    clean timing pass among them (its memory: no failure of the script's);
    `interrupted` when profile-all was asked to stop."""
    failed = [s for s in summaries if s.exit_code != 0
              and not s.killed_after_the_script(summaries)]
    exit_code = failed[0].exit_code if failed else 0
    if failed and status == "complete":
        status = "failed"
    elif status == "complete" and any(s.status == "partial" or s.exit_code != 0
                                      for s in summaries):
        status = "partial"
    if stop_signal is not None:  # asked to stop: a pass was cut short, or none started
        status = "interrupted"
        if not any(s.status == "interrupted" for s in summaries):
            exit_code = 128 + stop_signal
    return status, exit_code


@dataclass
class Ran:
    """What the passes gave: every rank's result, a summary per pass run, each pass's
    per-step times, and the run's status so far."""

    results: list[PassResult] = field(default_factory=list)
    summaries: list[PassRecord] = field(default_factory=list)
    step_times: dict[int, list[float]] = field(default_factory=dict)
    status: str = "complete"
    #: what happened to the run itself, said in its doubts (its fork server was killed)
    notes: list[str] = field(default_factory=list)
    #: the first pass that ran in a fresh interpreter because the fork server was gone
    fresh_from: int | None = None
    #: the results of passes that ran in windows of steps inside another's process, by
    #: pass number, until their turn in the run comes
    hosted: dict[int, list[PassResult]] = field(default_factory=dict)
    #: passes planned in windows of the timing pass's steps that ran the script again
    again: list[int] = field(default_factory=list)
    #: the pass that timed out, after which no pass runs the script again (on_timeout)
    hung_in: int | None = None
