"""`profile-all merge DIR... -o OUT`: one report from the run directories of several nodes.

Each node of a several-machine run writes its own run directory with its own ranks. The
merge keeps every row (the rank column tells them apart), joins each pass's ranks, and
copies each node's native files to `artifacts/node<K>/`. Directories from different runs
(another target, rendezvous or node count) or holding the same rank of the same pass twice
are refused unless `force`.
"""

from __future__ import annotations

import shutil
import stat
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pandas as pd

from profile_all.errors import UsageError
from profile_all.pass_record import PassRecord
from profile_all.report.report import Report
from profile_all.run_record import ArtifactRecord, RunRecord, inside
from profile_all.runs.folder import RunDirectory, load


def _run_identity(report: Report) -> tuple:
    distributed = report.meta.distributed
    return (report.meta.target.get("command"), distributed.get("rdzv_endpoint"),
            distributed.get("rdzv_id"), distributed.get("nnodes"))


def _check_same_run(reports: list[Report], force: bool) -> None:
    if force:
        return
    first = _run_identity(reports[0])
    for report in reports[1:]:
        if _run_identity(report) != first:
            raise UsageError(
                f"{reports[0].run_dir} and {report.run_dir} are not from the same run (target, "
                "rendezvous endpoint and id, node count differ); --force merges them anyway")
    seen: dict[tuple[int, int], Path | None] = {}
    for report in reports:
        for key in sorted(set(zip(report.frame["pass"], report.frame["rank"], strict=True))):
            if key in seen:
                raise UsageError(f"pass {key[0]} rank {key[1]} is in both {seen[key]} and "
                                 f"{report.run_dir}; --force merges them anyway")
            seen[key] = report.run_dir


def _merged_passes(reports: list[Report]) -> list[PassRecord]:
    """A record per pass: the ranks of every node, the first failure's outcome."""
    by_index: dict[int, list[PassRecord]] = {}
    for report in reports:
        for summary in report.meta.passes:
            by_index.setdefault(summary.number, []).append(summary)
    merged = []
    for index in sorted(by_index):
        summaries = by_index[index]
        cause = next((s for s in summaries if s.status != "ok"), summaries[0])
        times = [s.target_wall_time for s in summaries if s.target_wall_time is not None]
        merged.append(replace(cause, target_wall_time=max(times, default=None),
                              ranks=[rank for s in summaries for rank in s.ranks],
                              backend_failures=[f for s in summaries
                                                for f in s.backend_failures],
                              logs=[]))
    return merged


def merge(run_dirs: list[Path], out: Path | None, *, force: bool = False,
          command: list[str] | None = None,
          meanwhile: Callable[[Report], object] | None = None) -> Report:
    if len(run_dirs) < 2:
        raise UsageError("merge wants two run directories or more")
    reports = [load(run_dir) for run_dir in run_dirs]
    _check_same_run(reports, force)
    target = RunDirectory.create(out, "merge")
    meta = _merged_meta(reports, _copied_artifacts(reports, target), command or [])
    frame = pd.concat([r.frame for r in reports], ignore_index=True)
    samples = pd.concat([r.samples for r in reports], ignore_index=True)
    timeline = pd.concat([r.timeline for r in reports], ignore_index=True)
    return target.save(Report(frame, meta, target.final, samples, timeline), meanwhile)


def _copied_artifacts(reports: list[Report], target: RunDirectory) -> list[ArtifactRecord]:
    """Each node's artifacts copied under `artifacts/nodeN/`, and listed with their new
    paths, and its passes' logs: only the files its meta.json names, each inside its folder
    and a regular file; what else `artifacts/` holds is not the run's and is
    neither read nor copied (a link to /etc, a sparse gigabyte, a FIFO)."""
    artifacts = []
    for node, report in enumerate(reports):
        artifacts += [replace(artifact, path=_in_node(artifact.path, node))
                      for artifact in report.meta.artifacts
                      if _copied(report.run_dir, artifact.path, target.work, node)]
        for log in dict.fromkeys(log for summary in report.meta.passes for log in summary.logs):
            _copied(report.run_dir, log, target.work, node)  # the passes' stdout and stderr
    return artifacts


def _in_node(path: str, node: int) -> str:
    return path.replace("artifacts/", f"artifacts/node{node}/", 1)


def _copied(run_dir: Path, path: str, work: Path, node: int) -> bool:
    """Copy `run_dir/path` to the merge's `work` folder under node `node`, where it lies
    inside the run folder and is a regular file; whether it was."""
    try:
        inside(run_dir, path)
    except UsageError:
        return False
    if not _regular(run_dir / path):
        return False
    moved = work / _in_node(path, node)
    moved.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(run_dir / path, moved)
    return True


def _regular(path: Path) -> bool:
    try:
        return stat.S_ISREG(path.stat().st_mode)
    except (OSError, ValueError):
        return False


def _merged_meta(reports: list[Report], artifacts: list[ArtifactRecord],
                 command: list[str]) -> RunRecord:
    """The first node's record, with the run's status and exit code those of the first
    node that failed, and every node's passes, ranks, backends and environment."""
    first = reports[0].meta
    failed = [r.meta for r in reports if r.meta.exit_code]
    return replace(first, status=failed[0].status if failed else first.status,
                   exit_code=failed[0].exit_code if failed else 0, command=command,
                   passes=_merged_passes(reports), artifacts=artifacts,
                   ranks=sorted({rank for r in reports for rank in r.meta.ranks}),
                   backend_facts={name: said for r in reports
                                  for name, said in r.meta.backend_facts.items()},
                   merged_from=[{"run_dir": str(r.run_dir), "node": node,
                                 "environment": r.meta.environment}
                                for node, r in enumerate(reports)])
