"""Runs each pass, enforces timeouts, handles Ctrl-C, and merges what the passes measured.

Each pass is `python -m profile_all.runner.worker SPEC` in a session of its own, its stdout and
stderr copied both to ours and to `artifacts/pass<N>.std{out,err}.log`. Because the worker
is not in our process group, a Ctrl-C reaches only us, and we pass it on: the target sees
KeyboardInterrupt as it would, the pass is finished and written, and no further pass runs.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from time import perf_counter
from typing import Any, Protocol

import orjson
import pandas as pd

from profile_all import backends, environment, validate
from profile_all.backends.base import PassContext
from profile_all.errors import UsageError
from profile_all.report import derived
from profile_all.report.report import FORMAT_VERSION, Report
from profile_all.report.store import save
from profile_all.rows import COLUMNS, Facts
from profile_all.runner import forkserver, process, trust
from profile_all.runner.launch import Launch
from profile_all.runner.passrun import PassRun
from profile_all.runner.plan import Pass, plan_passes
from profile_all.runner.rundir import RunDirectory
from profile_all.targets import ModelTarget, ScriptTarget

TIMEOUT_EXIT_CODE = 124


class Observer(Protocol):
    """Told what happens, for a progress display."""

    def pass_started(self, run_pass: Pass, count: int) -> None: ...
    def pass_ended(self, run_pass: Pass, count: int, summary: dict[str, Any]) -> None: ...


def _context(spec: dict[str, Any], rank: int = 0, world_size: int = 1) -> PassContext:
    return PassContext(pass_index=spec["pass"], artifacts_dir=Path(spec["artifacts_dir"]),
                       scratch_dir=Path(spec["scratch_dir"]), rank=rank, world_size=world_size)


def _wrappers(spec: dict[str, Any]) -> list[Any]:
    """The pass's backends that launch its process themselves (nsys)."""
    options = spec.get("options", {})
    classes = [backends.load(name) for name in spec["backends"]]
    return [cls(options.get(cls.name)) for cls in classes if hasattr(cls, "wrap")]


def _finish_wrappers(spec: dict[str, Any], result: dict[str, Any]) -> None:
    """Rows of wrapper backends, made once their process has ended."""
    ctx = _context(spec)
    for wrapper in _wrappers(spec):
        try:
            collected = wrapper.finish(ctx)
        except Exception as error:
            result["backend_failures"].append({"backend": wrapper.name, "phase": "finish",
                                               "error": f"{type(error).__name__}: {error}"})
            continue
        result["rows"] += [[wrapper.name, spec["pass"], 0, *measured]
                           for measured in collected.rows]
        result["artifacts"] += [artifact.to_dict() for artifact in collected.artifacts]


def _run_worker(spec: dict[str, Any], run_dir: RunDirectory, timeout: float | None,
                launch: Launch, stops: process.StopRequests,
                server: forkserver.ForkServer | None
                ) -> tuple[list[dict[str, Any]], str, list[str]]:
    """Run one pass in a worker (a worker per rank under torchrun); (a result per rank, how
    the pass ended: `exited`, `timeout` or the name of the stop signal profile-all got, the
    processes the target left behind and that were ended). A rank that died without a
    result gets what its backends journaled."""
    number = spec["pass"]
    spec_path = run_dir.scratch / f"pass{number}.spec.json"
    spec_path.write_bytes(orjson.dumps(spec))
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    worker = ["-m", "profile_all.runner.worker", str(spec_path)]
    argv = launch.argv(number, worker) if launch.distributed else [sys.executable, *worker]
    for wrapper in _wrappers(spec):
        argv = wrapper.wrap(argv, _context(spec))
    if server is not None and not launch.distributed and not _wrappers(spec):
        pass_process = server.start(spec_path, env)
    else:
        pass_process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                        start_new_session=True, env=env)
    tees = [process.Tee(pass_process.stdout, "stdout",
                        run_dir.artifacts / f"pass{number}.stdout.log"),
            process.Tee(pass_process.stderr, "stderr",
                        run_dir.artifacts / f"pass{number}.stderr.log")]
    for tee in tees:
        tee.start()
    ended = "exited"
    try:
        with stops.waiting():
            pass_process.wait(timeout)
    except subprocess.TimeoutExpired:
        ended = "timeout"
        process.stop(pass_process, signal.SIGTERM, stops)
    except process.Stopped as stopped:  # the same signal for the target, as it would get
        ended = signal.Signals(stopped.signum).name
        process.stop(pass_process, stopped.signum, stops)
    left = process.end_leftovers(pass_process)  # they may hold the pipes open
    for tee in tees:
        tee.join(timeout=5)
    results = {}
    for path in run_dir.scratch.glob(f"pass{number}.result.rank*.json"):
        result = orjson.loads(path.read_bytes())
        results[result["rank"]] = result
    expected = _expected_ranks(launch, results)
    for rank in sorted(expected - set(results)):
        results[rank] = _recover(spec, pass_process.returncode, rank, len(expected))
    return [results[rank] for rank in sorted(results)], ended, left


def _expected_ranks(launch: Launch, results: dict[int, dict[str, Any]]) -> set[int]:
    """This node's ranks: those that wrote a result, and the rest of the node's block."""
    if not launch.distributed:
        return {0}
    local = launch.local_world_size()
    first = (launch.node_rank or 0) * local
    if results:
        first = min(results) // local * local
    return set(results) | set(range(first, first + local))


def _recover(spec: dict[str, Any], return_code: int, rank: int = 0,
             world_size: int = 1) -> dict[str, Any]:
    """The result of a worker that died without writing one: what its backends journaled."""
    ctx = _context(spec, rank, world_size)
    rows, samples = [], []
    for name in spec["backends"]:
        recovered = backends.load(name).recover(ctx)
        rows += [[name, spec["pass"], rank, *measured] for measured in recovered.rows]
        samples += [[name, spec["pass"], rank, *kept] for kept in recovered.samples]
    if return_code < 0:
        signame = signal.Signals(-return_code).name
        code, error = 128 - return_code, f"killed by {signame}"
    else:
        code, error = return_code, f"the worker exited with {return_code} without a result"
    return {"pass": spec["pass"], "rank": rank, "backends": spec["backends"], "rows": rows,
            "samples": samples, "artifacts": [], "backend_failures": [], "runtime": {},
            "recovered": True,
            "outcome": {"status": "killed", "exit_code": code, "error": error,
                        "target_wall_time": None}}


def _pass_verdict(outcome: dict[str, Any], ended: str, timeout: float | None) -> None:
    """How the pass ended overrides how a rank says it ended (kept as `ended_as`): a
    timeout, or a stop signal profile-all got and passed on."""
    if ended != "exited":
        outcome["ended_as"] = outcome["error"]
    if ended == "timeout":
        outcome.update(status="timeout", exit_code=TIMEOUT_EXIT_CODE,
                       error=f"timed out after {timeout:g} s")
    elif ended.startswith("SIG") or outcome["status"] == "interrupted":
        signum = signal.Signals[ended] if ended.startswith("SIG") else signal.SIGINT
        error = "interrupted (Ctrl-C)" if signum == signal.SIGINT else \
            f"interrupted: profile-all got {signum.name}"
        outcome.update(status="interrupted", exit_code=128 + signum, error=error)


#: outcomes that did not cause a pass to fail, least telling last: a rank stopped by
#: torchrun after another failed, then a rank that ended well
_CAUSES_LAST = ("terminated", "ok")


def _pass_summary(run_pass: Pass, results: list[dict[str, Any]], wall: float,
                  distributed: bool) -> dict[str, Any]:
    """The pass's outcome is its first failing rank's: the one that ended first (the cause,
    not the ranks that failed or were stopped after it); its target time is its slowest
    rank's."""
    cause = min(results, key=lambda r: (_CAUSES_LAST.index(r["outcome"]["status"])
                                        if r["outcome"]["status"] in _CAUSES_LAST else -1,
                                        r["outcome"].get("ended_at") or float("inf"),
                                        r["rank"]))
    outcome = cause["outcome"]
    times = [r["outcome"]["target_wall_time"] for r in results
             if r["outcome"]["target_wall_time"] is not None]
    prefix = f"rank {cause['rank']}: " if distributed and outcome["error"] else ""
    failures = [{**failure, "error": (f"rank {r['rank']}: " if distributed else "")
                 + failure["error"]} for r in results for failure in r["backend_failures"]]
    status = outcome["status"]
    if status == "ok" and any(f["phase"] != "note" for f in failures):
        status = "partial"  # the target ended well, but a backend lost what it measured
    steps = [r["steps"] for r in results if r.get("steps") is not None]
    summary = {
        "pass": run_pass.index, "backends": run_pass.backends, "timing": run_pass.timing,
        "repeat": run_pass.repeat,
        "status": status, "exit_code": outcome["exit_code"],
        "error": prefix + outcome["error"], "target_wall_time": max(times, default=None),
        "process_wall_time": wall, "recovered": any(r.get("recovered") for r in results),
        "steps": max(steps) if steps else None,
        "step_source": next((r["step_source"] for r in results if r.get("step_source")), ""),
        # the slowest rank's per-step times: read by trust.add_overheads, not saved
        "step_times": max((r.get("step_times") or [] for r in results), key=len, default=[]),
        "backend_failures": failures,
        "logs": [f"artifacts/pass{run_pass.index}.stdout.log",
                 f"artifacts/pass{run_pass.index}.stderr.log"]}
    if distributed:
        summary["failed_rank"] = cause["rank"] if outcome["status"] != "ok" else None
        summary["ranks"] = [{"rank": r["rank"], **r["outcome"],
                             "recovered": r.get("recovered", False)} for r in results]
    return summary


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
        return _run(target, backend_names, out, timeout, isolate, options, observer, command,
                    peak_flops, launch, repeat, fresh_processes, stops)


def _run_passes(passes: list[Pass], base: dict[str, Any], target: Any, run_dir: RunDirectory,
                timeout: float | None, isolate: bool, launch: Launch,
                stops: process.StopRequests, server: forkserver.ForkServer | None,
                observer: Observer | None) -> tuple[list[dict], list[dict], str]:
    """Each pass in turn (in a worker, or in this process); (every rank's result, a
    summary per pass run, the run's status so far)."""
    results, summaries, status = [], [], "complete"
    for run_pass in passes:
        if observer:
            observer.pass_started(run_pass, len(passes))
        spec = {**base, "pass": run_pass.index, "backends": run_pass.backends,
                "mode": "bench" if run_pass.timing else "once",
                "result_path": str(
                    (run_dir.scratch / f"pass{run_pass.index}.result.rank{{rank}}.json"
                     ).resolve())}
        started = perf_counter()
        ended, left = "exited", []
        if isolate:
            pass_results, ended, left = _run_worker(spec, run_dir, timeout, launch, stops,
                                                    server)
            _finish_wrappers(spec, pass_results[0])
        else:
            pass_results = [PassRun(spec, own_process=False, target=target).run()]
        for result in pass_results:
            _pass_verdict(result["outcome"], ended, timeout)
        summary = _pass_summary(run_pass, pass_results, perf_counter() - started,
                                launch.distributed)
        if left:
            summary["left_running"] = left
        results += pass_results
        summaries.append(summary)
        if observer:
            observer.pass_ended(run_pass, len(passes), summary)
        if summary["status"] == "interrupted" or stops.signum is not None:
            status = "interrupted"
            break
    return results, summaries, status


def _run(target: ScriptTarget | ModelTarget, backend_names: Sequence[str] | None,
         out: Path | None, timeout: float | None, isolate: bool,
         options: dict[str, dict[str, Any]] | None, observer: Observer | None,
         command: list[str] | None, peak_flops: float | None, launch: Launch | None,
         repeat: int, fresh_processes: bool, stops: process.StopRequests) -> Report:
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
    preimport = backends.preimports(selection.runnable)
    if launch.distributed:
        # torch 2.13: torch._dynamo imported before a gloo process group is made deadlocks
        # DDP's teardown about one run in two, under bare torchrun too
        # (scripts/examples/ddp_train.py); no pass takes that risk for the others' sake
        preimport = [module for module in preimport if module != "torch._dynamo"]
    target.validate()
    forked = isolate and not fresh_processes and not launch.distributed \
        and forkserver.fork_available()
    # started before the folder is made: it imports torch meanwhile
    server = forkserver.ForkServer(
        [*preimport, "profile_all.runner.worker", *{cls.__module__ for cls in selection.runnable}],
        dict(os.environ, PYTHONUNBUFFERED="1")) if forked else None
    try:
        passes = plan_passes(selection.runnable, timing_pass=is_model, repeat=repeat)
        run_dir = RunDirectory.create(out, target.label)
        base = {"target": target.to_spec(), "options": options or {}, "preimport": preimport,
                "distributed": launch.distributed, "parent_pid": os.getpid(),
                "artifacts_dir": str(run_dir.artifacts.resolve()),
                "scratch_dir": str(run_dir.scratch.resolve())}
        results, summaries, status = _run_passes(
            passes, base, target, run_dir, timeout, isolate, launch, stops, server, observer)
    finally:
        if server is not None:
            server.close()

    trust.add_overheads(summaries, comparable=not is_model)
    doubts = trust.doubts(summaries, results, [cls.name for cls in selection.runnable
                                               if not cls.sees_children], not is_model)
    for summary in summaries:
        del summary["step_times"]
    failed = [s for s in summaries if s["exit_code"] != 0]
    exit_code = failed[0]["exit_code"] if failed else 0
    if failed and status == "complete":
        status = "failed"
    elif status == "complete" and any(s["status"] == "partial" for s in summaries):
        status = "partial"
    if stops.signum is not None:  # asked to stop: a pass was cut short, or none started
        status = "interrupted"
        if not any(s["status"] == "interrupted" for s in summaries):
            exit_code = 128 + stops.signum
    runtime = next((r["runtime"] for r in results if r["runtime"]), {})
    meta = {
        "format": FORMAT_VERSION,
        "status": status,
        "exit_code": exit_code,
        "stopped_by": signal.Signals(stops.signum).name if stops.signum else None,
        "target": {**target.to_spec(), "command": shlex.join(target.command)},
        "command": command or [],
        "cwd": os.getcwd(),
        "environment": {**environment.collect(), **runtime},
        "passes": summaries,
        "passes_not_run": [p.index for p in passes[len(summaries):]],
        "skipped_backends": selection.skipped,
        "backend_facts": backends.facts_of(cls.name for cls in selection.runnable),
        "doubts": doubts,
        "preimported": preimport,
        # how the passes' processes began: forked from a server that had imported the
        # preimported modules (one hash seed for all), or a fresh interpreter each
        "process_start": "in this process" if not isolate else
        "fork" if server is not None else "fresh interpreter",
        "ranks": sorted({result["rank"] for result in results}),
        "artifacts": [a for r in results for a in r["artifacts"]],
    }
    if launch.distributed:
        meta["distributed"] = {**launch.to_meta(), "world_size": max(
            (r.get("world_size", 1) for r in results), default=1)}
    if is_model:
        timed = [r for r in results if r.get("target_facts")]
        meta["model"] = {**target.to_spec(), **(timed[0]["target_facts"] if timed else {}),
                         "timing_passes": [{"pass": r["pass"], **r["target_facts"]}
                                           for r in timed]}
    rows = [row for result in results for row in result["rows"]]
    measured = pd.DataFrame(rows, columns=COLUMNS)
    facts = {name: Facts.from_dict(said) for name, said in meta["backend_facts"].items()}
    extra = derived.region_achieved_flops_rows(measured, facts)
    if is_model:
        achieved, counter = derived.achieved_flops_rows(measured, facts, peak_flops)
        extra += achieved
        meta["model"].update(flops_counted_by=counter, peak_flops=peak_flops)
    samples = [kept for result in results for kept in result.get("samples", [])]
    report = Report.from_rows(rows + extra, meta, samples)
    report.run_dir = run_dir.final
    save(report, run_dir.work)
    report.run_dir = run_dir.commit()
    return report
