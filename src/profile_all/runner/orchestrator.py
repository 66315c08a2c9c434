"""A run: its passes planned, each run in turn, and what they measured merged into one
Report in one run folder (run_report).

This module imports neither pandas nor the report: the fork server (and the fresh
interpreter of a pass that needs one) start before they are imported, so that their
`import torch` and this process's imports run side by side."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from time import perf_counter
from typing import TYPE_CHECKING, Any

from profile_all import backends, validate
from profile_all.runner import (
    child_processes,
    early_server,
    outcome,
    pass_process,
    server_handle,
    spec,
)
from profile_all.runner.inside.pass_run import PassRun
from profile_all.runner.launch import Launch
from profile_all.runner.outcome import Ran
from profile_all.runner.plan import Pass, plan_passes
from profile_all.runner.prestarted import PrestartedWorker
from profile_all.runner.setup import Observer, Setup, check_steps, setup_run
from profile_all.runner.spec import PassSpec
from profile_all.runs.folder import RunDirectory
from profile_all.targets import ModelTarget, ScriptTarget

if TYPE_CHECKING:
    from profile_all.pass_record import PassRecord
    from profile_all.report.report import Report


def run(target: ScriptTarget | ModelTarget, *, backend_names: Sequence[str] | None = None,
        out: Path | None = None, timeout: float | None = None, isolate: bool = True,
        options: dict[str, dict[str, Any]] | None = None,
        observer: Observer | None = None, command: list[str] | None = None,
        meanwhile: Callable[[Report], object] | None = None,
        peak_flops: float | None = None, launch: Launch | None = None,
        repeat: int = 1, fresh_processes: bool = False,
        pass_steps: int | str | None = None, max_steps: int | None = None,
        show_output: str = "first") -> Report:
    """Profile `target` with the named backends (default: backends.DEFAULT); with `launch`
    for several ranks, every pass runs under torchrun; `repeat`: how many times the clean
    timing pass runs, spread over the run (its repeats measure the run-to-run noise).
    With passes in processes of their own, a stop signal to this process (SIGTERM, SIGHUP,
    SIGINT) stops the running pass and writes what was measured. Passes are forked from a
    server that imported what they need once (forkserver), unless `fresh_processes` asks
    for an interpreter each, or they run under torchrun or nsys. `pass_steps`: the passes
    other than the timing pass end the target after that many steps (default
    DEFAULT_PASS_STEPS; "all": run whole); `max_steps`: every pass does, the timing pass
    too. A target without steps runs whole in every pass."""
    stops = child_processes.StopRequests()
    with stops.installed() if isolate else contextlib.nullcontext():
        setup = setup_run(target, backend_names, timeout, isolate, options, launch, repeat,
                       fresh_processes, peak_flops)
        setup.observer, setup.command, setup.meanwhile = observer, command or [], meanwhile
        setup.pass_steps, setup.max_steps = check_steps(pass_steps, max_steps)
        setup.show_output = validate.choice("show_output (--show-output)", show_output,
                                            ("first", "all", "none"))
        return _run(setup, out, stops)


def _run(setup: Setup, out: Path | None, stops: child_processes.StopRequests) -> Report:
    setup.target.refuse_early()  # before the server's seconds of import
    passes = plan_passes(setup.selection.runnable, timing_pass=setup.is_model,
                         repeat=setup.repeat)
    # started first: they import torch while the target is checked and the folder made
    server = _server(setup)
    early = _prestarted(setup, passes)
    # pandas and the report's modules (0.4 s), imported while the server imports
    from profile_all.runner import run_report

    try:
        _check_target(setup, server)
        run_dir = RunDirectory.create(out, setup.target.label)
        ran = _run_passes(setup, passes, run_dir, stops, server, early)
    finally:
        for started in (server, early):
            if started is not None:
                started.close()
    return run_report.written(setup, ran, passes, stops, server is not None, run_dir)


def _server(setup: Setup) -> server_handle.ForkServer | None:
    """The run's fork server: the one the command started as it began where it fits the
    run (early_server), else one started now; None for a run that forks no pass."""
    if not setup.forked:
        early_server.discard()
        return None
    modules = [*setup.preimport, "profile_all.runner.inside.worker",
               *{cls.__module__ for cls in setup.selection.runnable}]
    env = server_handle.worker_env()
    return early_server.take(modules, env) or server_handle.ForkServer(modules, env)


def _fresh(setup: Setup, run_pass: Pass) -> bool:
    """Whether the pass runs in a fresh interpreter rather than forked from the server.
    Repeats of the timing pass measure the noise between runs: each in a fresh
    interpreter, so that they sample memory layouts as separate runs would (passes forked
    from one server share its layout, and agree too well); a model's timing pass too,
    always: its latency is the user's process's, and a process forked from the server
    starts from the server's allocator state (small_cnn, one thread: 2.9 ms forked against
    4.1 ms in fresh processes, the difference the page faults of glibc's heap trimming;
    model/timing_method.py)."""
    return setup.forked and run_pass.timing and (setup.repeat > 1 or setup.is_model)


def _prestarted(setup: Setup, passes: list[Pass]) -> PrestartedWorker | None:
    """The fresh interpreter of the first pass that needs one, started now: it imports what
    that pass imports before its target, as it would started when due, and no more."""
    first = next((run_pass for run_pass in passes if _fresh(setup, run_pass)), None)
    if first is None:
        return None
    return PrestartedWorker(_preimport(setup, first), server_handle.worker_env())


def _check_target(setup: Setup, server: server_handle.ForkServer | None) -> None:
    """Refuse a bad model before any pass runs (a script was checked whole by
    `refuse_early`). It is built and run once: in a child forked from the server where
    there is one (this process then never imports torch, which would cost seconds beside
    the server's own import on a small machine), else here."""
    if not setup.is_model:
        return
    if server is None:
        setup.target.validate()
        return
    with tempfile.TemporaryDirectory(prefix="profile-all-check-") as scratch:
        try:
            server.check(setup.target.to_spec(), Path(scratch), dict(os.environ))
        except server_handle.ServerLost:  # the passes say so; the check is made here
            setup.target.validate()


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
    return min((limit for limit in (setup.max_steps, window) if limit is not None),
               default=None)


def _mode(setup: Setup, run_pass: Pass) -> str:
    """How the pass runs its target: `bench` (the timing pass of a model), `meta` (a model's
    pass whose backends all count from shapes, under --count-on meta), else `once`."""
    if run_pass.timing:
        return "bench"
    if getattr(setup.target, "count_on", "device") == "meta" and run_pass.backends and all(
            backends.load(name).counts_on_meta for name in run_pass.backends):
        return "meta"
    return "once"


def _preimport(setup: Setup, run_pass: Pass) -> list[str]:
    """What the pass imports before its target. Passes import the same, so that none's
    target time holds an import another's does not; a model's timing pass, a fresh
    interpreter as the user's process is, imports torch alone (its clock is the
    benchmark's, not the process's; torch._dynamo would add a second to it)."""
    if setup.is_model and run_pass.timing:
        return [module for module in setup.preimport if module != "torch._dynamo"]
    return setup.preimport


def _spec(setup: Setup, run_pass: Pass, run_dir: RunDirectory, ran: Ran) -> PassSpec:
    timed = [s for s in ran.summaries if s.timing and s.step_source]
    return PassSpec(
        number=run_pass.index, backends=run_pass.backends,
        mode=_mode(setup, run_pass), target=setup.target.to_spec(),
        options=setup.options, preimport=_preimport(setup, run_pass),
        distributed=setup.launch.distributed, parent_pid=os.getpid(),
        artifacts_dir=str(run_dir.artifacts.resolve()),
        scratch_dir=str(run_dir.scratch.resolve()),
        result_path=str((run_dir.scratch / f"pass{run_pass.index}.result.rank{{rank}}.json"
                         ).resolve()),
        max_steps=_window(setup, run_pass, timed[0].steps if timed else None),
        step_source=timed[0].step_source if timed else "")


def _lost_server(said: str, fresh_from: int) -> str:
    """What a run does once its fork server is gone, said in the run's doubts."""
    return (f"{said}: the kernel's out-of-memory killer picks the biggest process (dmesg "
            f"says); from pass {fresh_from} on, the passes ran in fresh interpreters, each "
            "importing torch")


def _in_process_of_its_own(setup: Setup, pass_spec: PassSpec, run_dir: RunDirectory,
                           stops: child_processes.StopRequests,
                           starter: server_handle.ForkServer | PrestartedWorker | None,
                           ran: Ran) -> pass_process.Ended:
    """The pass in a process of its own, forked from `starter` or a fresh interpreter;
    a pass that cannot start (the run folder's disk is full) has measured nothing."""
    try:
        return pass_process.run(pass_spec, run_dir, setup.timeout, setup.launch, stops,
                                starter, echo=setup.show_output == "all"
                                or (setup.show_output == "first" and not ran.summaries))
    except server_handle.ServerLost:
        raise
    except OSError as error:
        return pass_process.Ended("exited", [spec.not_started_for(pass_spec, error)], [])


def _run_passes(setup: Setup, passes: list[Pass], run_dir: RunDirectory,
                stops: child_processes.StopRequests, server: server_handle.ForkServer | None,
                early: PrestartedWorker | None) -> Ran:
    """Each pass in turn, in a worker or in this process, until one is interrupted: forked
    from `server`, or in a fresh interpreter (the first of them `early`, started already)."""
    ran = Ran()
    for run_pass in passes:
        if setup.observer:
            setup.observer.pass_started(run_pass, len(passes))
        pass_spec = _spec(setup, run_pass, run_dir, ran)
        started = perf_counter()
        if setup.isolate:
            starter = server
            if _fresh(setup, run_pass):
                starter, early = early, None  # started early for the first fresh pass only
            try:
                ended = _in_process_of_its_own(setup, pass_spec, run_dir, stops, starter, ran)
            except server_handle.ServerLost as lost:
                server, ran.fresh_from = None, run_pass.index
                ran.notes.append(_lost_server(str(lost), run_pass.index))
                ended = _in_process_of_its_own(setup, pass_spec, run_dir, stops, None, ran)
        else:
            result = PassRun(pass_spec, own_process=False, target=setup.target).run()
            ended = pass_process.Ended("exited", [result], [])
        if server is not None and server.gone():  # as the pass ran: it went on without it
            ran.notes.append(_lost_server(f"the fork server was {server.gone()} as pass "
                                          f"{run_pass.index} ran", run_pass.index + 1))
            server, ran.fresh_from = None, run_pass.index + 1
        ended.results = pass_process.collected_after(pass_spec, ended.results)
        summary = outcome.pass_summary(run_pass, ended.results, ended.how, setup.timeout,
                                       perf_counter() - started, setup.launch.distributed)
        summary.left_running = ended.left_running + [one for r in ended.results
                                                     for one in r.left_running]
        ran.results += ended.results
        ran.summaries.append(summary)
        ran.step_times[run_pass.index] = outcome.step_times(ended.results)
        if setup.observer:
            setup.observer.pass_ended(run_pass, len(passes), summary)
        if summary.status == "interrupted" or stops.signum is not None:
            ran.status = "interrupted"
            break
        if _failed_before_its_steps(setup, run_pass, summary, len(passes)):
            ran.notes.append(
                f"the script failed before its first step in pass {run_pass.index} (exit "
                f"code {summary.exit_code}): the {len(passes) - run_pass.index} other "
                "passes were not run, each would have run it to the same failure; name the "
                "backends (-b cprofile) to profile the failure itself")
            break
    return ran


def _failed_before_its_steps(setup: Setup, run_pass: Pass, summary: PassRecord,
                             planned: int) -> bool:
    """The clean timing pass of a script ended with an error before its first step, on the
    default backends, with passes after it: each would run the script's set-up again to the
    same failure (named backends are run: a profile of the failure may be what is asked)."""
    return (run_pass.timing and not setup.is_model and not setup.named
            and summary.exit_code != 0 and not summary.steps and summary.status != "timeout"
            and run_pass.index < planned)
