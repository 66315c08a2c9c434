"""One pass in a process of its own: started (forked from the server, or a fresh
interpreter, or under torchrun or nsys), its output teed to the pass logs, stopped on a
timeout or a stop signal, and its ranks' results read back (or recovered from journals).

Each pass is `python -m profile_all.runner.inside.worker SPEC` in a session of its own. Because
the worker is not in our process group, a Ctrl-C reaches only us, and we pass it on: the
target sees KeyboardInterrupt as it would, the pass is finished and written, and no
further pass runs.
"""

from __future__ import annotations

import dataclasses
import signal
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from profile_all import backends
from profile_all.runner import spec
from profile_all.runner.inside.collecting import said_by
from profile_all.runner.spec import PassResult, PassSpec
from profile_all.runner.starting import server_handle
from profile_all.runner.starting.launch import Launch
from profile_all.runner.starting.prestarted import PrestartedWorker
from profile_all.runner.watching import child_processes, hang_site, heartbeat
from profile_all.runs.folder import RunDirectory


@dataclass
class Ended:
    """How a pass's process ended: `exited`, `timeout` or the name of the stop signal
    profile-all got; each rank's result; the processes the target left and that were
    ended."""

    how: str
    results: list[PassResult]
    left_running: list[str]
    #: where a pass stopped at its timeout hung (hang_site.py); "" where not known
    hung_at: str = ""


def wrappers(pass_spec: PassSpec) -> list[Any]:
    """The pass's backends that launch its process themselves (nsys)."""
    classes = [backends.load(name) for name in pass_spec.backends]
    return [cls(pass_spec.options.get(cls.name)) for cls in classes if hasattr(cls, "wrap")]


def _start(pass_spec: PassSpec, spec_path: Any, launch: Launch,
           server: server_handle.Server | PrestartedWorker | None,
           stops: child_processes.StopRequests) -> Any:
    """The pass's process: forked from the fork server, told to go where it was started
    early, else started now; `child_processes.Stopped` when a stop signal comes while the
    fork server is still importing (seconds on a loaded machine), which it then does not
    wait for."""
    env = server_handle.worker_env()
    worker = ["-m", "profile_all.runner.inside.worker", str(spec_path)]
    argv = launch.argv(pass_spec.number, worker) if launch.distributed \
        else [sys.executable, *worker]
    wrapping = wrappers(pass_spec)
    for wrapper in wrapping:
        argv = wrapper.wrap(argv, pass_spec.context())
    if isinstance(server, PrestartedWorker):
        with stops.waiting():  # a stop that came before the pass: it never starts
            pass
        return server.start(spec_path)
    if server is not None and not launch.distributed and not wrapping:
        with stops.waiting():
            server.wait_ready()
        return server.start(spec_path, env)
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True, env=env)


def run(pass_spec: PassSpec, run_dir: RunDirectory, timeout: float | None, launch: Launch,
        stops: child_processes.StopRequests,
        server: server_handle.Server | PrestartedWorker | None, echo: bool = True,
        tell: Callable[[float, str], None] | None = None) -> Ended:
    """Run one pass in a worker (a worker per rank under torchrun), forked from the fork
    `server`, or a fresh interpreter (`server` None, or one started early); its output to
    the pass logs, and to ours with `echo`; `tell`ing what it does while it takes long. A
    rank that died without a result gets what its backends journaled."""
    number = pass_spec.number
    spec_path = run_dir.scratch / f"pass{number}.spec.json"
    spec_path.write_bytes(pass_spec.to_json())
    try:
        pass_process = _start(pass_spec, spec_path, launch, server, stops)
    except child_processes.Stopped as stopped:
        return Ended(signal.Signals(stopped.signum).name,
                     [spec.not_started(pass_spec, stopped.signum)], [])
    tees = [child_processes.Tee(pass_process.stdout, "stdout",
                        run_dir.artifacts / f"pass{number}.stdout.log", echo),
            child_processes.Tee(pass_process.stderr, "stderr",
                        run_dir.artifacts / f"pass{number}.stderr.log", echo)]
    for tee in tees:
        tee.start()
    how, hung_at = "exited", ""
    try:
        with stops.waiting(), heartbeat.beating(tell, heartbeat.doing_file(run_dir.scratch,
                                                                           number)):
            pass_process.wait(timeout)
    except subprocess.TimeoutExpired:
        how = "timeout"
        if not launch.distributed and not wrappers(pass_spec):  # the target's own process
            hung_at = hang_site.where(pass_process.pid, pass_spec.target.get("path", ""))
        child_processes.stop(pass_process, signal.SIGTERM, stops)
    except child_processes.Stopped as stopped:  # the same signal for the target, as it would get
        how = signal.Signals(stopped.signum).name
        child_processes.stop(pass_process, stopped.signum, stops)
    left = child_processes.end_leftovers(pass_process)  # they may hold the pipes open
    for tee in tees:
        tee.join(timeout=5)
    results = _results(pass_spec, run_dir, launch, pass_process)
    for tee in tees:
        if tee.lost:  # a full disk: the log stops short, what the pass measured does not
            results[0].backend_failures.append(
                {"backend": "profile-all", "phase": "note", "error": tee.lost})
    return Ended(how, _with_wrappers(pass_spec, results), left, hung_at)


def _results(pass_spec: PassSpec, run_dir: RunDirectory, launch: Launch,
             pass_process: Any) -> list[PassResult]:
    """Each rank's result; a rank that wrote none gets what its backends journaled, and
    how its process ended."""
    found = {}
    for path in run_dir.scratch.glob(f"pass{pass_spec.number}.result.rank*.json"):
        result = PassResult.from_json(path.read_bytes())
        found[result.rank] = result
    expected = _expected_ranks(launch, found)
    forked = isinstance(pass_process, server_handle.ForkedPass)
    code, how = pass_process.returncode, ""
    if forked and pass_process.server_lost:  # its status was the server's to say
        code, how = 1, ("its fork server was killed as it ran; it went on, and ended "
                        "without a result")
    for rank in sorted(expected - set(found)):
        found[rank] = spec.recovered(pass_spec.for_rank(rank, len(expected)), code,
                                     pass_process.max_rss if forked else None, how)
    return [found[rank] for rank in sorted(found)]


def window_results(pass_spec: PassSpec, ranks: set[int]) -> dict[int, list[PassResult]]:
    """The results of the passes `pass_spec`'s process hosted in windows of steps, by pass
    number: those whose window came on each of `ranks`, the host's (a window the script
    did not reach wrote none). A window that some rank did not get runs again on every
    rank, in a launch of its own: what the other ranks wrote of it is removed, where that
    launch's ranks write theirs, so that none is taken for theirs."""
    found: dict[int, list[PassResult]] = {}
    for window in pass_spec.windows:
        pattern = Path(window["result_path"])
        paths = sorted(pattern.parent.glob(pattern.name.replace("{rank}", "*")))
        results = [PassResult.from_json(path.read_bytes()) for path in paths]
        if results and {result.rank for result in results} >= ranks:
            found[window["number"]] = results
            continue
        for path in paths:
            path.unlink(missing_ok=True)
    return found


def _expected_ranks(launch: Launch, results: dict[int, PassResult]) -> set[int]:
    """This node's ranks: those that wrote a result, and the rest of the node's block."""
    if not launch.distributed:
        return {0}
    local = launch.local_world_size()
    first = (launch.node_rank or 0) * local
    if results:
        first = min(results) // local * local
    return set(results) | set(range(first, first + local))


def _with_wrappers(pass_spec: PassSpec, results: list[PassResult]) -> list[PassResult]:
    """The first rank's result with the rows of wrapper backends, made once their process
    has ended."""
    rows, artifacts, failures = [], [], []
    for wrapper in wrappers(pass_spec):
        try:
            collected = wrapper.finish(pass_spec.context())
        except Exception as error:
            failures.append({"backend": wrapper.name, "phase": "finish",
                             "error": f"{type(error).__name__}: {error}"})
            continue
        rows += [[wrapper.name, pass_spec.number, 0, *measured] for measured in collected.rows]
        artifacts += [artifact.to_dict() for artifact in collected.artifacts]
    if not (rows or artifacts or failures):
        return results
    return [results[0].with_more(rows, artifacts, failures), *results[1:]]


def collected_after(pass_spec: PassSpec, results: list[PassResult]) -> list[PassResult]:
    """Each rank's result with what its backends left for `collect_after` (a trace read
    here, where the readers are imported already), collected now that its process ended."""
    return [_collected_after(pass_spec, result) if result.later else result
            for result in results]


def _collected_after(pass_spec: PassSpec, result: PassResult) -> PassResult:
    ctx = pass_spec.for_rank(result.rank, result.world_size).context()
    rows, samples, timeline, artifacts, failures = [], [], [], [], []
    for left in result.later:
        name = left["backend"]
        backend = backends.load(name)(pass_spec.options.get(name))
        try:
            collected = backend.collect_after(ctx, left["later"])
        except Exception as error:
            failures.append({"backend": name, "phase": "collect",
                             "error": f"{type(error).__name__}: {error}"})
            continue
        prefix = [name, result.number, result.rank]
        rows += [[*prefix, *measured] for measured in collected.rows]
        samples += [[*prefix, *kept] for kept in collected.samples]
        timeline += [[*prefix, *entry] for entry in collected.timeline]
        artifacts += [artifact.to_dict() for artifact in collected.artifacts]
        failures += said_by(backend, collected)
    return dataclasses.replace(
        result, rows=result.rows + rows, samples=result.samples + samples,
        timeline=result.timeline + timeline, artifacts=result.artifacts + artifacts,
        backend_failures=result.backend_failures + failures, later=[])
