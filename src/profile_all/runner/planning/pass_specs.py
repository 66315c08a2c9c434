"""What each pass is told (`PassSpec`): its backends, how it runs its target, what it
imports first, where its window of steps ends, which passes it hosts in windows."""

from __future__ import annotations

import os

from profile_all import backends
from profile_all.runner.judging.outcome import Ran
from profile_all.runner.planning.plan import Pass, hosted_windows
from profile_all.runner.planning.setup import WINDOWS_AFTER, Setup
from profile_all.runner.spec import PassSpec, result_path
from profile_all.runs.folder import RunDirectory


def _window(setup: Setup, run_pass: Pass, timed_steps: int | None) -> int | None:
    """The step a pass ends its target at: the timing pass runs whole (to --max-steps), the
    others a window (--pass-steps), unless the timing pass saw no more steps than that
    (`timed_steps`: ended at its last step, a pass would miss the script's end); a
    model's passes have no steps to end at."""
    if setup.is_model:
        return None
    window = None if run_pass.timing or (
        timed_steps is not None and setup.pass_steps is not None
        and timed_steps <= setup.pass_steps) else setup.pass_steps
    # a backend whose analysis grows with every step's events holds its pass to fewer
    most = [backends.load(name).most_steps for name in run_pass.backends]
    limits = (setup.max_steps, window, *(None if run_pass.timing else m for m in most))
    return min((limit for limit in limits if limit is not None), default=None)


def _mode(setup: Setup, run_pass: Pass) -> str:
    """How the pass runs its target: `bench` (the timing pass of a model), `meta` (a model's
    pass whose backends all count from shapes, under --count-on meta), else `once`."""
    if run_pass.timing:
        return "bench"
    if getattr(setup.target, "count_on", "device") == "meta" and run_pass.backends and all(
            backends.load(name).counts_on_meta for name in run_pass.backends):
        return "meta"
    return "once"


def preimport(setup: Setup, run_pass: Pass) -> list[str]:
    """What the pass imports before its target. Passes import the same, so that none's
    target time holds an import another's does not; a model's timing pass, a fresh
    interpreter as the user's process is, imports torch alone (its clock is the
    benchmark's, not the process's; torch._dynamo would add a second to it)."""
    if setup.is_model and run_pass.timing:
        return [module for module in setup.preimport if module != "torch._dynamo"]
    return setup.preimport


def spec(setup: Setup, run_pass: Pass, run_dir: RunDirectory, ran: Ran,
          passes: list[Pass]) -> PassSpec:
    timed = [s for s in ran.summaries if s.timing and s.step_source]
    windows = hosted_windows(passes, run_pass, setup.window_steps, setup.window_fewest,
                             run_dir.scratch)
    for window in windows:  # at most the steps a backend's analysis takes (torch-memory)
        window["steps"] = min([window["steps"], *(
            most for name in window["backends"]
            if (most := backends.load(name).most_steps) is not None)])
        window["fewest"] = min(window["fewest"], window["steps"])
    return PassSpec(
        number=run_pass.index, backends=run_pass.backends,
        mode=_mode(setup, run_pass), target=setup.target.to_spec(),
        options=setup.options, preimport=preimport(setup, run_pass),
        distributed=setup.launch.distributed, parent_pid=os.getpid(),
        artifacts_dir=str(run_dir.artifacts.resolve()),
        scratch_dir=str(run_dir.scratch.resolve()),
        result_path=result_path(run_dir.scratch, run_pass.index),
        max_steps=_window(setup, run_pass, timed[0].steps if timed else None),
        step_source=timed[0].step_source if timed else "",
        windows=windows, windows_after=WINDOWS_AFTER if windows else 0)
