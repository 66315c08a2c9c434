"""The Report of an attach (runner/attaching/attach.py): what was gathered of a running process, as
rows of the backends that would have measured it in a run (py-spy's samples, the memory
sampler's RSS, torch.profiler's window) and the process's own figures from the OS (backend
`os`: wall and CPU time over the attach, threads), in a run folder of its own."""

from __future__ import annotations

import gzip
import shutil
import signal
from collections.abc import Callable
from typing import Any

from profile_all import backends, environment
from profile_all.errors import ProfileAllError
from profile_all.fileio import current_folder
from profile_all.pass_record import PassRecord
from profile_all.readers import IngestError
from profile_all.report.report import Report
from profile_all.rows import row
from profile_all.run_record import ArtifactRecord, RunRecord
from profile_all.runner.attaching.attach import Attached

#: the rows the OS gives of the process itself
OS = "os"


def written(attached: Attached, rate: int, idle: bool, command: list[str],
            meanwhile: Callable[[Report], object] | None = None) -> Report:
    rows: list[list[Any]] = []
    artifacts: list[ArtifactRecord] = []
    failures: list[dict[str, str]] = []
    parts = [(OS, _os_rows), ("py-spy", lambda a: _spy(a, rate, idle)), ("memory", _memory),
             ("torch-profiler", _torch_window)]
    for backend, part in parts:
        try:
            made, native = part(attached)
        except (ProfileAllError, IngestError, OSError, ValueError) as error:
            failures.append({"backend": backend, "phase": "collect", "error": str(error)})
            continue
        rows += made
        artifacts += native
    timeline = _memory_timeline(attached)
    used = list(dict.fromkeys(measured[0] for measured in rows if measured[0] != OS))
    meta = _record(attached, used, failures, artifacts, command)
    report = Report.from_rows(rows, meta, timeline=timeline)
    return attached.run_dir.save(report, meanwhile)


def _record(attached: Attached, used: list[str], failures: list[dict[str, str]],
            artifacts: list[ArtifactRecord], command: list[str]) -> RunRecord:
    stopped = attached.stopped_by
    doubts = [note for note in (attached.spy_failure, attached.memory_failure,
                                attached.window_note,
                                _window_ended(attached)) if note]
    if attached.ended and not stopped:
        doubts.append(f"{attached.ended} after {attached.seconds:.3g} s of the attach: the "
                      "figures cover it up to there")
    if attached.children:
        doubts.append(f"{len(attached.children)} child process(es) at the end: "
                      + "; ".join(attached.children[:5]))
    status = "interrupted" if stopped else ("partial" if failures or attached.spy_failure
                                            or attached.memory_failure
                                            else "complete")
    code = 128 + _signal_number(stopped) if stopped else 0
    one = PassRecord(number=1, backends=used, status="interrupted" if stopped else (
        "partial" if failures else "ok"), exit_code=code, error=attached.ended,
        target_wall_time=attached.seconds, process_wall_time=attached.seconds,
        steps=attached.window.get("steps"), step_source=attached.window.get("marked_by", ""),
        backend_failures=failures)
    return RunRecord(status=status, exit_code=code, stopped_by=stopped,
                     target={**attached.target, "command": attached.target["command"]},
                     command=command, environment=environment.collect(), passes=[one],
                     backend_facts=backends.facts_of(used), doubts=doubts,
                     artifacts=artifacts)


def _window_ended(attached: Attached) -> str:
    """How the torch.profiler window ended where it ended short of its steps: the
    process's own words (its deadline, a session of its own, its end, a stop)."""
    note = attached.window.get("note", "") if not attached.window.get("error") else ""
    if not note:
        return ""
    return (f"the torch.profiler window {note} ({attached.window.get('steps', 0)} of the "
            f"{attached.window_asked} steps asked for)")


def _signal_number(name: str) -> int:
    return int(signal.Signals[name])


def _os_rows(attached: Attached) -> tuple[list[list[Any]], list[ArtifactRecord]]:
    begun, ended = attached.cpu
    rows = [row("run", "run", "wall_time", attached.seconds)]
    if ended >= begun > 0 or ended > 0:
        rows.append(row("run", "run", "cpu_time", max(ended - begun, 0.0)))
    rows.append(row("run", "run", "threads", attached.threads))
    return [[OS, 1, 0, *measured] for measured in rows], []


def _spy(attached: Attached, rate: int, idle: bool
         ) -> tuple[list[list[Any]], list[ArtifactRecord]]:
    from profile_all.backends.flame_svg import flame_svg
    from profile_all.readers.sampled_rows import idle_row, sampled_rows
    from profile_all.readers.speedscope import read_speedscope

    spy = attached.spy
    if spy is None or not spy.output.is_file():
        return [], []
    rows = sampled_rows(read_speedscope(spy.output), 1 / rate, root_pid=attached.pid,
                        on_cpu=not idle)
    if not idle:
        rows.append(idle_row(rows, attached.seconds))
    artifacts_dir = attached.run_dir.artifacts
    shutil.move(spy.output, artifacts_dir / "py_spy.speedscope.json")
    (artifacts_dir / "py_spy.svg").write_text(flame_svg(
        [r for r in rows if r[0] == "call"], f"py-spy of process {attached.pid}, {rate} "
        "samples a second", cwd=current_folder()))
    return [["py-spy", 1, 0, *measured] for measured in rows], [
        ArtifactRecord(backend="py-spy", path="artifacts/py_spy.speedscope.json",
                       viewer="speedscope", open_command="open https://www.speedscope.app "
                       "and load {run_dir}/artifacts/py_spy.speedscope.json"),
        ArtifactRecord(backend="py-spy", path="artifacts/py_spy.svg",
                       viewer="a browser (flame graph)",
                       open_command="open {run_dir}/artifacts/py_spy.svg")]


def _memory_profile(attached: Attached) -> Any:
    from profile_all.readers import mprofile

    path = attached.run_dir.scratch / "memory.samples"
    if not path.is_file() or not path.stat().st_size:
        return None
    profile = mprofile.read(path)
    return profile if len(profile.times) else None


def _memory(attached: Attached) -> tuple[list[list[Any]], list[ArtifactRecord]]:
    from profile_all.readers.mprofile_rows import run_rows

    profile = _memory_profile(attached)
    if profile is None:
        return [], []
    return [["memory", 1, 0, *measured] for measured in run_rows(profile, attached.started)], []


def _memory_timeline(attached: Attached) -> list[list[Any]]:
    from profile_all.readers.mprofile_rows import timeline

    try:
        profile = _memory_profile(attached)
    except (OSError, ValueError):
        return []
    if profile is None:
        return []
    return [["memory", 1, 0, *entry] for entry in timeline(profile, attached.started)]


def _torch_window(attached: Attached) -> tuple[list[list[Any]], list[ArtifactRecord]]:
    from profile_all.readers.chrome_trace import load
    from profile_all.readers.trace_analysis import trace_rows

    if not attached.window:
        return [], []
    if attached.window.get("error"):
        raise ProfileAllError(f"the process's torch.profiler window failed: "
                              f"{attached.window['error']}")
    plain = attached.trace  # copied out of the process's folder (attach_window)
    if plain is None:
        return [], []
    trace = load(plain)
    kept = attached.run_dir.artifacts / "torch_trace.pt.trace.json.gz"
    with plain.open("rb") as source, gzip.open(kept, "wb", compresslevel=1) as packed:
        shutil.copyfileobj(source, packed, 1 << 20)
    plain.unlink()
    rows = trace_rows(trace)
    return [["torch-profiler", 1, 0, *measured] for measured in rows], [
        ArtifactRecord(backend="torch-profiler", path="artifacts/torch_trace.pt.trace.json.gz",
                       viewer="Perfetto (ui.perfetto.dev), TensorBoard, HTA",
                       open_command="open https://ui.perfetto.dev and load "
                       "{run_dir}/artifacts/torch_trace.pt.trace.json.gz")]
