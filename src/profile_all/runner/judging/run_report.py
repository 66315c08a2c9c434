"""The run's Report from what its passes gave: the run's record (meta.json), every rank's
rows and the rates derived from them, written into the run folder."""

from __future__ import annotations

import shlex
import signal
from typing import Any

import pandas as pd

from profile_all import backends, environment, region_log
from profile_all.report import derived
from profile_all.report.report import Report
from profile_all.rows import COLUMNS, Facts
from profile_all.run_record import ArtifactRecord, RunRecord
from profile_all.runner.judging import outcome, run_checks
from profile_all.runner.judging.outcome import Ran
from profile_all.runner.planning.plan import Pass
from profile_all.runner.planning.setup import Setup
from profile_all.runner.spec import PassResult
from profile_all.runner.watching import child_processes
from profile_all.runs.folder import RunDirectory
from profile_all.runs.store import save


def written(setup: Setup, ran: Ran, passes: list[Pass], stops: child_processes.StopRequests,
            forked: str, run_dir: RunDirectory) -> Report:
    """The run's Report, saved in its run folder; a stop signal that came as it was
    written is said in it, and it is written again."""
    report = run_dir.save(_report(setup, ran, passes, stops, forked), setup.meanwhile)
    if stops.signum is not None and not report.meta.stopped_by:
        _stopped_while_writing(report, ran, stops.signum)
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




def _record(setup: Setup, ran: Ran, passes: list[Pass], stops: child_processes.StopRequests,
          forked: str) -> RunRecord:
    target, results = setup.target, ran.results
    run_checks.add_overheads(ran.summaries, ran.step_times, comparable=not setup.is_model)
    status, exit_code = outcome.run_ending(ran.summaries, ran.status, stops.signum)
    return RunRecord(
        status=status,
        exit_code=exit_code,
        stopped_by=signal.Signals(stops.signum).name if stops.signum else None,
        target={**target.to_spec(), "command": shlex.join(target.command)},
        command=setup.command,
        cwd=setup.cwd,
        environment={**environment.collect(),
                     **next((r.runtime for r in results if r.runtime), {})},
        passes=ran.summaries,
        passes_not_run=_not_run(passes, ran),
        skipped_backends=setup.selection.skipped,
        backend_facts=backends.facts_of(cls.name for cls in setup.selection.runnable),
        doubts=ran.notes + run_checks.doubts(ran.summaries, results, ran.step_times,
                                 [cls.name for cls in setup.selection.runnable
                                  if not cls.sees_children], not setup.is_model),
        preimported=setup.preimport,
        process_start=_process_start(setup, forked, ran.fresh_from),
        region_marks=region_log.MARKS_IN,  # pa.region's enter and exit: in C or Python
        ranks=sorted({result.rank for result in results}),
        artifacts=[ArtifactRecord(**a) for r in results for a in r.artifacts],
        distributed={**setup.launch.to_meta(), "world_size": max(
            (r.world_size for r in results), default=1)} if setup.launch.distributed else {},
        model=_model(setup, results) if setup.is_model else {})


def _process_start(setup: Setup, forked: str, fresh_from: int | None) -> str:
    """How the passes' processes began: forked from a server that had imported the
    preimported modules (one hash seed for all; `forked` says whether the server was kept
    from an earlier run), or a fresh interpreter each (`forked` ""; from pass `fresh_from`
    on, where the server was killed)."""
    if not setup.isolate:
        return "in this process"
    if not forked:
        return "fresh interpreter"
    if fresh_from is not None:
        return f"{forked}, from pass {fresh_from}: fresh interpreter (the fork server was gone)"
    if setup.is_model:
        return f"{forked}, timing passes: fresh interpreter"
    return f"{forked}, timing repeats: fresh interpreter" if setup.repeat > 1 else forked


def _model(setup: Setup, results: list[PassResult]) -> dict[str, Any]:
    """The model benchmarked, and what its timing passes found of it (the first's)."""
    timed = [r for r in results if r.target_facts]
    return {**setup.target.to_spec(), **(timed[0].target_facts if timed else {}),
            "timing_passes": [{"pass": r.number, **r.target_facts} for r in timed]}


def _report(setup: Setup, ran: Ran, passes: list[Pass], stops: child_processes.StopRequests,
            forked: str) -> Report:
    """The Report of the run: every rank's rows, and the rates derived from them."""
    meta = _record(setup, ran, passes, stops, forked)
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


def _not_run(passes: list[Pass], ran: Ran) -> list[int]:
    """The planned passes that did not run: after a stop, a timeout, an early failure."""
    done = {summary.number for summary in ran.summaries}
    return [run_pass.index for run_pass in passes if run_pass.index not in done]
