"""A run: its passes planned, each run in turn, and what they measured merged into one
Report in one run folder."""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from time import perf_counter
from typing import Any, Protocol

import pandas as pd

from profile_all import backends, environment, validate
from profile_all.errors import UsageError
from profile_all.report import derived
from profile_all.report.report import FORMAT_VERSION, Report
from profile_all.report.store import save
from profile_all.rows import COLUMNS, Facts
from profile_all.runner import forkserver, outcome, pass_process, process, trust
from profile_all.runner.launch import Launch
from profile_all.runner.passrun import PassRun
from profile_all.runner.plan import Pass, plan_passes
from profile_all.runner.rundir import RunDirectory
from profile_all.runner.spec import PassResult, PassSpec
from profile_all.targets import ModelTarget, ScriptTarget


class Observer(Protocol):
    """Told what happens, for a progress display."""

    def pass_started(self, run_pass: Pass, count: int) -> None: ...
    def pass_ended(self, run_pass: Pass, count: int, summary: dict[str, Any]) -> None: ...


@dataclass
class Setup:
    """A run's checked arguments and what follows from them, before any pass runs."""

    target: ScriptTarget | ModelTarget
    selection: backends.Selection
    options: dict[str, dict[str, Any]]
    timeout: float | None
    isolate: bool
    launch: Launch
    preimport: list[str]
    repeat: int
    forked: bool
    peak_flops: float | None
    observer: Observer | None = None
    command: list[str] = field(default_factory=list)

    @property
    def is_model(self) -> bool:
        return isinstance(self.target, ModelTarget)


def _setup(target: ScriptTarget | ModelTarget, backend_names: Sequence[str] | None,
           timeout: float | None, isolate: bool, options: Any, launch: Launch | None,
           repeat: int, fresh_processes: bool, peak_flops: float | None) -> Setup:
    """Every argument checked (a TypeError or ValueError naming it), before anything runs."""
    launch = launch or Launch()
    launch.validate()
    if launch.distributed and not isolate:
        raise validate.ArgumentValueError(
            "several ranks need isolate=True (torchrun starts their processes)")
    validate.whole("repeat", repeat, 1)
    timeout = validate.seconds("timeout", timeout)
    validate.positive("peak_flops", peak_flops)
    options = backends.check_options(options)
    backend_names = validate.backend_names(backend_names)
    if timeout is not None and not isolate:
        raise validate.ArgumentValueError(
            "a timeout needs isolate=True (each pass in a process of its own)")
    is_model = isinstance(target, ModelTarget)
    if is_model and target.live_model is not None and isolate:
        raise validate.ArgumentValueError("a live model object runs in this process: isolate=False")
    selection = backends.select(None if backend_names is None else list(backend_names),
                                backends.DEFAULT_MODEL if is_model else backends.DEFAULT)
    if not isolate and any(hasattr(cls, "wrap") for cls in selection.runnable):
        raise validate.ArgumentValueError("nsys launches its pass's process: it needs isolate=True")
    if not selection.runnable and not is_model:
        raise UsageError("no requested backend can run here: " + "; ".join(
            f"{name}: {why}" for name, why in selection.skipped.items()))
    target.validate()
    return Setup(target, selection, options or {}, timeout, isolate, launch,
                 _preimports(selection, launch), repeat,
                 isolate and not fresh_processes and not launch.distributed
                 and forkserver.fork_available(), peak_flops)


def _preimports(selection: backends.Selection, launch: Launch) -> list[str]:
    preimport = backends.preimports(selection.runnable)
    if launch.distributed:
        # torch 2.13: torch._dynamo imported before a gloo process group is made deadlocks
        # DDP's teardown about one run in two, under bare torchrun too
        # (scripts/examples/ddp_train.py); no pass takes that risk for the others' sake
        preimport = [module for module in preimport if module != "torch._dynamo"]
    return preimport


def run(target: ScriptTarget | ModelTarget, *, backend_names: Sequence[str] | None = None,
        out: Path | None = None, timeout: float | None = None, isolate: bool = True,
        options: dict[str, dict[str, Any]] | None = None,
        observer: Observer | None = None, command: list[str] | None = None,
        peak_flops: float | None = None, launch: Launch | None = None,
        repeat: int = 1, fresh_processes: bool = False) -> Report:
    """Profile `target` with the named backends (default: backends.DEFAULT); with `launch`
    for several ranks, every pass runs under torchrun; `repeat`: how many times the clean
    timing pass runs, spread over the run (its repeats measure the run-to-run noise).
    With passes in processes of their own, a stop signal to this process (SIGTERM, SIGHUP,
    SIGINT) stops the running pass and writes what was measured. Passes are forked from a
    server that imported what they need once (forkserver), unless `fresh_processes` asks
    for an interpreter each, or they run under torchrun or nsys."""
    stops = process.StopRequests()
    with stops.installed() if isolate else contextlib.nullcontext():
        setup = _setup(target, backend_names, timeout, isolate, options, launch, repeat,
                       fresh_processes, peak_flops)
        setup.observer, setup.command = observer, command or []
        return _run(setup, out, stops)


def _run(setup: Setup, out: Path | None, stops: process.StopRequests) -> Report:
    # started before the folder is made: it imports torch meanwhile
    server = forkserver.ForkServer(
        [*setup.preimport, "profile_all.runner.worker",
         *{cls.__module__ for cls in setup.selection.runnable}],
        dict(os.environ, PYTHONUNBUFFERED="1")) if setup.forked else None
    try:
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
    return report


@dataclass
class Ran:
    """What the passes gave: every rank's result, a summary per pass run, each pass's
    per-step times, and the run's status so far."""

    results: list[PassResult] = field(default_factory=list)
    summaries: list[dict[str, Any]] = field(default_factory=list)
    step_times: dict[int, list[float]] = field(default_factory=dict)
    status: str = "complete"


def _spec(setup: Setup, run_pass: Pass, run_dir: RunDirectory) -> PassSpec:
    return PassSpec(
        number=run_pass.index, backends=run_pass.backends,
        mode="bench" if run_pass.timing else "once", target=setup.target.to_spec(),
        options=setup.options, preimport=setup.preimport,
        distributed=setup.launch.distributed, parent_pid=os.getpid(),
        artifacts_dir=str(run_dir.artifacts.resolve()),
        scratch_dir=str(run_dir.scratch.resolve()),
        result_path=str((run_dir.scratch / f"pass{run_pass.index}.result.rank{{rank}}.json"
                         ).resolve()))


def _run_passes(setup: Setup, passes: list[Pass], run_dir: RunDirectory,
                stops: process.StopRequests, server: forkserver.ForkServer | None) -> Ran:
    """Each pass in turn, in a worker or in this process, until one is interrupted."""
    ran = Ran()
    for run_pass in passes:
        if setup.observer:
            setup.observer.pass_started(run_pass, len(passes))
        pass_spec = _spec(setup, run_pass, run_dir)
        started = perf_counter()
        if setup.isolate:
            ended = pass_process.run(pass_spec, run_dir, setup.timeout, setup.launch, stops,
                                     server)
        else:
            result = PassRun(pass_spec, own_process=False, target=setup.target).run()
            ended = pass_process.Ended("exited", [result], [])
        summary = outcome.pass_summary(run_pass, ended.results, ended.how, setup.timeout,
                                       perf_counter() - started, setup.launch.distributed)
        if ended.left_running:
            summary["left_running"] = ended.left_running
        ran.results += ended.results
        ran.summaries.append(summary)
        ran.step_times[run_pass.index] = outcome.step_times(ended.results)
        if setup.observer:
            setup.observer.pass_ended(run_pass, len(passes), summary)
        if summary["status"] == "interrupted" or stops.signum is not None:
            ran.status = "interrupted"
            break
    return ran


def _meta(setup: Setup, ran: Ran, passes: list[Pass], stops: process.StopRequests,
          forked: bool) -> dict[str, Any]:
    target, results = setup.target, ran.results
    trust.add_overheads(ran.summaries, ran.step_times, comparable=not setup.is_model)
    status, exit_code = outcome.run_ending(ran.summaries, ran.status, stops.signum)
    meta = {
        "format": FORMAT_VERSION,
        "status": status,
        "exit_code": exit_code,
        "stopped_by": signal.Signals(stops.signum).name if stops.signum else None,
        "target": {**target.to_spec(), "command": shlex.join(target.command)},
        "command": setup.command,
        "cwd": os.getcwd(),
        "environment": {**environment.collect(),
                        **next((r.runtime for r in results if r.runtime), {})},
        "passes": ran.summaries,
        "passes_not_run": [p.index for p in passes[len(ran.summaries):]],
        "skipped_backends": setup.selection.skipped,
        "backend_facts": backends.facts_of(cls.name for cls in setup.selection.runnable),
        "doubts": trust.doubts(ran.summaries, results, ran.step_times,
                               [cls.name for cls in setup.selection.runnable
                                if not cls.sees_children], not setup.is_model),
        "preimported": setup.preimport,
        # how the passes' processes began: forked from a server that had imported the
        # preimported modules (one hash seed for all), or a fresh interpreter each
        "process_start": "in this process" if not setup.isolate else
        "fork" if forked else "fresh interpreter",
        "ranks": sorted({result.rank for result in results}),
        "artifacts": [a for r in results for a in r.artifacts],
    }
    if setup.launch.distributed:
        meta["distributed"] = {**setup.launch.to_meta(), "world_size": max(
            (r.world_size for r in results), default=1)}
    if setup.is_model:
        timed = [r for r in results if r.target_facts]
        meta["model"] = {**target.to_spec(), **(timed[0].target_facts if timed else {}),
                         "timing_passes": [{"pass": r.number, **r.target_facts}
                                           for r in timed]}
    return meta


def _report(setup: Setup, ran: Ran, passes: list[Pass], stops: process.StopRequests,
            forked: bool) -> Report:
    """The Report of the run: every rank's rows, and the rates derived from them."""
    meta = _meta(setup, ran, passes, stops, forked)
    rows = [row for result in ran.results for row in result.rows]
    measured = pd.DataFrame(rows, columns=COLUMNS)
    facts = {name: Facts.from_dict(said) for name, said in meta["backend_facts"].items()}
    extra = derived.region_achieved_flops_rows(measured, facts)
    if setup.is_model:
        achieved, counter = derived.achieved_flops_rows(measured, facts, setup.peak_flops)
        extra += achieved
        meta["model"].update(flops_counted_by=counter, peak_flops=setup.peak_flops)
    samples = [kept for result in ran.results for kept in result.samples]
    timeline = [entry for result in ran.results for entry in result.timeline]
    return Report.from_rows(rows + extra, meta, samples, timeline)
