"""A run: its passes planned, each run in turn, and what they measured merged into one
Report in one run folder."""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from time import perf_counter
from typing import Any

import pandas as pd

from profile_all import backends, environment, region_log, validate
from profile_all.pass_record import PassRecord
from profile_all.report import derived
from profile_all.report.report import Report
from profile_all.rows import COLUMNS, Facts
from profile_all.run_record import ArtifactRecord, RunRecord
from profile_all.runner import child_processes, forkserver, outcome, pass_process, run_checks
from profile_all.runner.inside.pass_run import PassRun
from profile_all.runner.launch import Launch
from profile_all.runner.plan import Pass, plan_passes
from profile_all.runner.setup import Observer, Setup, check_steps, setup_run
from profile_all.runner.spec import PassResult, PassSpec
from profile_all.runs.folder import RunDirectory
from profile_all.runs.store import save
from profile_all.targets import ModelTarget, ScriptTarget


def run(target: ScriptTarget | ModelTarget, *, backend_names: Sequence[str] | None = None,
        out: Path | None = None, timeout: float | None = None, isolate: bool = True,
        options: dict[str, dict[str, Any]] | None = None,
        observer: Observer | None = None, command: list[str] | None = None,
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
        setup.observer, setup.command = observer, command or []
        setup.pass_steps, setup.max_steps = check_steps(pass_steps, max_steps)
        setup.show_output = validate.choice("show_output (--show-output)", show_output,
                                            ("first", "all", "none"))
        return _run(setup, out, stops)


def _run(setup: Setup, out: Path | None, stops: child_processes.StopRequests) -> Report:
    # started first: it imports torch while the folder is made
    server = forkserver.ForkServer(
        [*setup.preimport, "profile_all.runner.inside.worker",
         *{cls.__module__ for cls in setup.selection.runnable}],
        dict(os.environ, PYTHONUNBUFFERED="1")) if setup.forked else None
    try:
        _check_target(setup, server)
        passes = plan_passes(setup.selection.runnable, timing_pass=setup.is_model,
                             repeat=setup.repeat)
        run_dir = RunDirectory.create(out, setup.target.label)
        ran = _run_passes(setup, passes, run_dir, stops, server)
    finally:
        if server is not None:
            server.close()
    report = _report(setup, ran, passes, stops, server is not None)
    report.run_dir = run_dir.final
    save(report, run_dir.work)
    report.run_dir = run_dir.commit()
    if stops.signum is not None and not report.meta.stopped_by:
        _stopped_while_writing(report, ran, stops.signum)  # said, and written again
        save(report, report.run_dir)
    return report


def _stopped_while_writing(report: Report, ran: Ran, signum: int) -> None:
    """A stop signal that came while the report was written: every pass had ended, so its
    figures are whole, but the run ends as stopped (128 + N) and says so."""
    status, exit_code = outcome.run_ending(ran.summaries, ran.status, signum)
    name = signal.Signals(signum).name
    meta = report.meta
    meta.status, meta.exit_code, meta.stopped_by = status, exit_code, name
    meta.doubts = [*meta.doubts, f"profile-all got {name} as it wrote the report, after "
                   "every pass had ended: the figures are whole"]


def _check_target(setup: Setup, server: forkserver.ForkServer | None) -> None:
    """Refuse a bad target before any pass runs. A model is built and run once: in a child
    forked from the server where there is one (this process then never imports torch,
    which would cost seconds beside the server's own import on a small machine), else
    here."""
    if server is None or not setup.is_model:
        setup.target.validate()
        return
    with tempfile.TemporaryDirectory(prefix="profile-all-check-") as scratch:
        server.check(setup.target.to_spec(), Path(scratch), dict(os.environ))


@dataclass
class Ran:
    """What the passes gave: every rank's result, a summary per pass run, each pass's
    per-step times, and the run's status so far."""

    results: list[PassResult] = field(default_factory=list)
    summaries: list[PassRecord] = field(default_factory=list)
    step_times: dict[int, list[float]] = field(default_factory=dict)
    status: str = "complete"


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


def _run_passes(setup: Setup, passes: list[Pass], run_dir: RunDirectory,
                stops: child_processes.StopRequests, server: forkserver.ForkServer | None) -> Ran:
    """Each pass in turn, in a worker or in this process, until one is interrupted."""
    ran = Ran()
    for run_pass in passes:
        if setup.observer:
            setup.observer.pass_started(run_pass, len(passes))
        pass_spec = _spec(setup, run_pass, run_dir, ran)
        started = perf_counter()
        if setup.isolate:
            # repeats of the timing pass measure the noise between runs: each in a fresh
            # interpreter, so that they sample memory layouts as separate runs would
            # (passes forked from one server share its layout, and agree too well); a
            # model's timing pass too, always: its latency is the user's process's, and a
            # process forked from the server starts from the server's allocator state
            # (small_cnn, one thread: 2.9 ms forked against 4.1 ms in fresh processes,
            # the difference the page faults of glibc's heap trimming; model/timing_method.py)
            fresh = run_pass.timing and (setup.repeat > 1 or setup.is_model)
            ended = pass_process.run(pass_spec, run_dir, setup.timeout, setup.launch, stops,
                                     None if fresh else server,
                                     echo=setup.show_output == "all"
                                     or (setup.show_output == "first" and not ran.summaries))
        else:
            result = PassRun(pass_spec, own_process=False, target=setup.target).run()
            ended = pass_process.Ended("exited", [result], [])
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
    return ran


def _meta(setup: Setup, ran: Ran, passes: list[Pass], stops: child_processes.StopRequests,
          forked: bool) -> RunRecord:
    target, results = setup.target, ran.results
    run_checks.add_overheads(ran.summaries, ran.step_times, comparable=not setup.is_model)
    status, exit_code = outcome.run_ending(ran.summaries, ran.status, stops.signum)
    return RunRecord(
        status=status,
        exit_code=exit_code,
        stopped_by=signal.Signals(stops.signum).name if stops.signum else None,
        target={**target.to_spec(), "command": shlex.join(target.command)},
        command=setup.command,
        cwd=os.getcwd(),
        environment={**environment.collect(),
                     **next((r.runtime for r in results if r.runtime), {})},
        passes=ran.summaries,
        passes_not_run=[p.index for p in passes[len(ran.summaries):]],
        skipped_backends=setup.selection.skipped,
        backend_facts=backends.facts_of(cls.name for cls in setup.selection.runnable),
        doubts=run_checks.doubts(ran.summaries, results, ran.step_times,
                                 [cls.name for cls in setup.selection.runnable
                                  if not cls.sees_children], not setup.is_model),
        preimported=setup.preimport,
        process_start=_process_start(setup, forked),
        region_marks=region_log.MARKS_IN,  # pa.region's enter and exit: in C or Python
        ranks=sorted({result.rank for result in results}),
        artifacts=[ArtifactRecord(**a) for r in results for a in r.artifacts],
        distributed={**setup.launch.to_meta(), "world_size": max(
            (r.world_size for r in results), default=1)} if setup.launch.distributed else {},
        model=_model_meta(setup, results) if setup.is_model else {})


def _process_start(setup: Setup, forked: bool) -> str:
    """How the passes' processes began: forked from a server that had imported the
    preimported modules (one hash seed for all), or a fresh interpreter each."""
    if not setup.isolate:
        return "in this process"
    if not forked:
        return "fresh interpreter"
    if setup.is_model:
        return "fork, timing passes: fresh interpreter"
    return "fork, timing repeats: fresh interpreter" if setup.repeat > 1 else "fork"


def _model_meta(setup: Setup, results: list[PassResult]) -> dict[str, Any]:
    """The model benchmarked, and what its timing passes found of it (the first's)."""
    timed = [r for r in results if r.target_facts]
    return {**setup.target.to_spec(), **(timed[0].target_facts if timed else {}),
            "timing_passes": [{"pass": r.number, **r.target_facts} for r in timed]}


def _report(setup: Setup, ran: Ran, passes: list[Pass], stops: child_processes.StopRequests,
            forked: bool) -> Report:
    """The Report of the run: every rank's rows, and the rates derived from them."""
    meta = _meta(setup, ran, passes, stops, forked)
    rows = [row for result in ran.results for row in result.rows]
    measured = pd.DataFrame(rows, columns=COLUMNS)
    facts = {name: Facts.from_dict(said) for name, said in meta.backend_facts.items()}
    extra = derived.region_achieved_flops_rows(measured, facts)
    if setup.is_model:
        achieved, counter = derived.achieved_flops_rows(measured, facts, setup.peak_flops)
        extra += achieved
        meta.model.update(flops_counted_by=counter, peak_flops=setup.peak_flops)
    samples = [kept for result in ran.results for kept in result.samples]
    timeline = [entry for result in ran.results for entry in result.timeline]
    return Report.from_rows(rows + extra, meta, samples, timeline)
