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

from profile_all import validate
from profile_all.runner import spec
from profile_all.runner.inside.pass_run import PassRun
from profile_all.runner.judging import layout_doubts, outcome
from profile_all.runner.judging.outcome import Ran
from profile_all.runner.planning import pass_specs
from profile_all.runner.planning.plan import Pass, plan_passes
from profile_all.runner.planning.setup import (
    Observer,
    Setup,
    check_steps,
    setup_run,
    use_windows,
)
from profile_all.runner.spec import PassSpec
from profile_all.runner.starting import early_server, kept_servers, server_handle
from profile_all.runner.starting.launch import Launch
from profile_all.runner.starting.prestarted import PrestartedWorker
from profile_all.runner.watching import child_processes, heartbeat, pass_process
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
        show_output: str = "first", separate_passes: bool = False,
        on_timeout: str = "stop") -> Report:
    """Profile `target` with the named backends (default: backends.DEFAULT); with `launch`
    for several ranks, every pass runs under torchrun; `repeat`: how many times the clean
    timing pass runs, spread over the run (its repeats measure the run-to-run noise).
    With passes in processes of their own, a stop signal to this process (SIGTERM, SIGHUP,
    SIGINT) stops the running pass and writes what was measured. Passes are forked from a
    server that imported what they need once (forkserver), unless `fresh_processes` asks
    for an interpreter each, or they run under torchrun or nsys. `pass_steps`: the passes
    other than the timing pass end the target after that many steps (default
    DEFAULT_PASS_STEPS; "all": run whole); `max_steps`: every pass does, the timing pass
    too. A target without steps runs whole in every pass. Unless `separate_passes` (or
    `fresh_processes`), the passes whose backends can share a process run in windows of
    steps inside the timing pass's (runner/inside/windows.py)."""
    stops = child_processes.StopRequests()
    with stops.installed() if isolate else contextlib.nullcontext():
        setup = setup_run(target, backend_names, timeout, isolate, options, launch, repeat,
                       fresh_processes, peak_flops)
        setup.observer, setup.command, setup.meanwhile = observer, command or [], meanwhile
        setup.pass_steps, setup.max_steps = check_steps(pass_steps, max_steps)
        use_windows(setup, pass_steps, fresh_processes or separate_passes)
        setup.show_output = validate.choice("show_output (--show-output)", show_output,
                                            ("first", "all", "none"))
        setup.on_timeout = validate.choice("on_timeout (--on-timeout)", on_timeout,
                                           ("stop", "continue"))
        return _run(setup, out, stops)


def _run(setup: Setup, out: Path | None, stops: child_processes.StopRequests) -> Report:
    setup.target.refuse_early()  # before the server's seconds of import
    passes = plan_passes(setup.selection.runnable, timing_pass=setup.is_model,
                         repeat=setup.repeat, windows=setup.windows, options=setup.options,
                         ranks=setup.launch.distributed)
    # started first: they import torch while the target is checked and the folder made
    server = _server(setup, passes)
    early = _prestarted(setup, passes)
    # pandas and the report's modules (0.4 s), imported while the server imports
    from profile_all.runner.judging import run_report

    try:
        _check_target(setup, server)
        run_dir = RunDirectory.create(out, setup.target.label)
        ran = _run_passes(setup, passes, run_dir, stops, server, early)
    finally:
        if server is not None:
            kept_servers.end(server)  # ended, or kept for the next run (pa.keep_servers)
        if early is not None:
            early.close()
    forked = server.forked if server is not None else ""  # "": each a fresh interpreter
    return run_report.written(setup, ran, passes, stops, forked, run_dir)


def _server(setup: Setup, passes: list[Pass]) -> server_handle.Server | None:
    """The run's fork server: one kept from an earlier run of this process where it fits
    (kept_servers), or the one the command started as it began (early_server), else one
    started now, or when a pass first asks for it where no pass planned forks from it;
    None for a run that forks no pass."""
    modules = setup.server_modules
    env = server_handle.worker_env()
    kept = kept_servers.take(modules, env) if setup.forked else None
    if kept is not None or not setup.forked:
        early_server.discard()
        return kept
    early = early_server.take(modules, env)
    if early is not None:
        return early
    if setup.is_model or any(run_pass.host is None and not _fresh(setup, run_pass)
                             for run_pass in passes):
        return server_handle.ForkServer(modules, env)
    return server_handle.ServerWhenNeeded(modules, env)


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
    return PrestartedWorker(pass_specs.preimport(setup, first), server_handle.worker_env())


def _check_target(setup: Setup, server: server_handle.Server | None) -> None:
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


def _lost_server(said: str, fresh_from: int) -> str:
    """What a run does once its fork server is gone, said in the run's doubts."""
    return (f"{said}: the kernel's out-of-memory killer picks the biggest process (dmesg "
            f"says); from pass {fresh_from} on, the passes ran in fresh interpreters, each "
            "importing torch")


def _teller(setup: Setup, run_pass: Pass, count: int) -> Callable[[float, str], None] | None:
    """What tells the observer, while a pass takes long, what it is doing (an observer
    without `pass_running` is told nothing)."""
    running = getattr(setup.observer, "pass_running", None)
    if running is None:
        return None
    return lambda seconds, doing: running(run_pass, count, seconds, doing)


def _in_process_of_its_own(setup: Setup, pass_spec: PassSpec, run_dir: RunDirectory,
                           stops: child_processes.StopRequests,
                           starter: server_handle.Server | PrestartedWorker | None,
                           ran: Ran, tell: Callable[[float, str], None] | None = None
                           ) -> pass_process.Ended:
    """The pass in a process of its own, forked from `starter` or a fresh interpreter;
    a pass that cannot start (the run folder's disk is full) has measured nothing."""
    try:
        return pass_process.run(pass_spec, run_dir, setup.timeout, setup.launch, stops,
                                starter, echo=setup.show_output == "all"
                                or (setup.show_output == "first" and not ran.summaries),
                                tell=tell)
    except server_handle.ServerLost:
        raise
    except OSError as error:
        return pass_process.Ended("exited", [spec.not_started_for(pass_spec, error)], [])


def _run_passes(setup: Setup, passes: list[Pass], run_dir: RunDirectory,
                stops: child_processes.StopRequests, server: server_handle.Server | None,
                early: PrestartedWorker | None) -> Ran:
    """Each pass in turn, in a worker or in this process, until one is interrupted: forked
    from `server`, or in a fresh interpreter (the first of them `early`, started already);
    a pass that ran in a window of steps of its host's process is taken from there."""
    ran = Ran()
    for run_pass in passes:
        if ran.hung_in is not None and run_pass.index not in ran.hosted:
            continue  # it would run the script into the same hang (--on-timeout continue)
        if setup.observer:
            setup.observer.pass_started(run_pass, len(passes))
        pass_spec = pass_specs.spec(setup, run_pass, run_dir, ran, passes)
        tell = _teller(setup, run_pass, len(passes))
        started = perf_counter()
        if run_pass.index in ran.hosted:
            ended = pass_process.Ended("exited", ran.hosted.pop(run_pass.index), [])
        elif setup.isolate:
            if run_pass.host is not None:
                ran.again.append(run_pass.index)
            starter = server
            if _fresh(setup, run_pass):
                starter, early = early, None  # started early for the first fresh pass only
            try:
                ended = _in_process_of_its_own(setup, pass_spec, run_dir, stops, starter, ran,
                                               tell)
            except server_handle.ServerLost as lost:
                server, ran.fresh_from = None, run_pass.index
                ran.notes.append(_lost_server(str(lost), run_pass.index))
                ended = _in_process_of_its_own(setup, pass_spec, run_dir, stops, None, ran,
                                               tell)
            ran.hosted.update(pass_process.window_results(
                pass_spec, {result.rank for result in ended.results}))
        else:
            ended = _in_this_process(setup, pass_spec, ran)
        if server is not None and server.gone():  # as the pass ran: it went on without it
            ran.notes.append(_lost_server(f"the fork server was {server.gone()} as pass "
                                          f"{run_pass.index} ran", run_pass.index + 1))
            server, ran.fresh_from = None, run_pass.index + 1
        with heartbeat.beating(tell, doing="reading what its backends wrote (a trace)"):
            summary = _recorded(setup, run_pass, pass_spec, ended, perf_counter() - started,
                                ran)
        if setup.observer:
            setup.observer.pass_ended(run_pass, len(passes), summary)
        if _run_ends(setup, run_pass, summary, len(passes), stops, ran):
            break
    ran.notes += layout_doubts.again(ran.again, ran.summaries)
    return ran


def _in_this_process(setup: Setup, pass_spec: PassSpec, ran: Ran) -> pass_process.Ended:
    """The pass in this process (isolate=False); the passes it hosted kept for their turn."""
    pass_run = PassRun(pass_spec, own_process=False, target=setup.target)
    ended = pass_process.Ended("exited", [pass_run.run()], [])
    for result in pass_run.window_results:
        ran.hosted.setdefault(result.number, []).append(result)
    return ended


def _recorded(setup: Setup, run_pass: Pass, pass_spec: PassSpec, ended: pass_process.Ended,
              wall: float, ran: Ran) -> PassRecord:
    """The pass's record, its results and step times kept in `ran`; a hosted pass's time
    is its window's, its output its host's."""
    ended.results = pass_process.collected_after(pass_spec, ended.results)
    summary = outcome.pass_summary(run_pass, ended.results, ended.how, setup.timeout, wall,
                                   setup.launch.distributed)
    if ended.hung_at:
        summary.error += f", in {ended.hung_at}"
    if summary.host is not None:
        summary.process_wall_time = summary.target_wall_time
        summary.logs = [log.replace(f"pass{run_pass.index}.", f"pass{summary.host}.")
                        for log in summary.logs]
    summary.left_running = ended.left_running + [one for r in ended.results
                                                 for one in r.left_running]
    ran.results += ended.results
    ran.summaries.append(summary)
    ran.step_times[run_pass.index] = outcome.step_times(ended.results)
    return summary


def _run_ends(setup: Setup, run_pass: Pass, summary: PassRecord, planned: int,
              stops: child_processes.StopRequests, ran: Ran) -> bool:
    """No pass after this one: the run was stopped, or the script failed before its first
    step (said in the run's notes)."""
    if summary.status == "interrupted" or stops.signum is not None:
        ran.status = "interrupted"
        return True
    if summary.status == "timeout" and setup.on_timeout == "stop" and run_pass.index < planned:
        ran.hung_in = run_pass.index
        ran.notes.append(
            f"pass {run_pass.index} {summary.error}: the passes after it that would run the "
            "script again were not run, each would likely hang there too (--on-timeout "
            "continue runs them)")
        return False
    if outcome.failed_before_its_steps(run_pass, summary, planned,
                                       defaults=not setup.is_model and not setup.named):
        ran.notes.append(
            f"the script failed before its first step in pass {run_pass.index} (exit "
            f"code {summary.exit_code}): the {planned - run_pass.index} other passes were "
            "not run, each would have run it to the same failure; name the backends (-b "
            "cprofile) to profile the failure itself")
        return True
    return False
