"""The run's record (meta.json, `Report.meta`): how the run ended, what it profiled and
where, its passes (pass_record.PassRecord), the native files it kept, the files it was
ingested from, the doubts about its numbers, and what its backends state about their rows.

Made once by each maker of a run folder (runner/judging/run_report.py, runs/ingest.py,
runs/merge.py), read by every view and renderer as attributes. `from_json` is the one
door from a folder on disk: every field is checked for the type profile-all writes, and
every native file it names must lie inside the folder, before any view sees it."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from profile_all.errors import UsageError
from profile_all.pass_record import PassRecord
from profile_all.record_fields import (
    anything,
    dict_of,
    flag,
    list_of,
    numeric,
    of,
    optional,
    read,
    stored,
    text,
    whole,
    written,
)

#: version of the run-directory layout; `load` refuses a newer one. 2: the memory timeline
#: in timeline.parquet (1 kept it in the frame, its time in the stat column as `t=...`)
FORMAT_VERSION = 2


def inside(run_dir: Path, relative: str) -> Path:
    """`run_dir / relative`, which must stay inside the run folder (no absolute path, no
    `..` out of it, no link leading out)."""
    try:  # a link loop (RuntimeError), a NUL in the name (ValueError): no file of the run
        candidate = (run_dir / relative).resolve()
    except (OSError, RuntimeError, ValueError) as error:
        raise UsageError(f"{run_dir}/meta.json names a file that cannot be reached "
                         f"({relative[:80]!r}: {error}): refused") from None
    root = run_dir.resolve()
    if Path(relative).is_absolute() or not candidate.is_relative_to(root):
        raise UsageError(f"{run_dir}/meta.json names a file outside the run folder "
                         f"({relative!r}): refused")
    return candidate


@dataclass
class ArtifactRecord:
    """A native file of the run (a trace, a pstats file, a log) and what opens it;
    `open_command` holds `{run_dir}` where the folder's path goes."""

    backend: str = field(metadata=stored(text))
    #: relative to the run folder, and inside it
    path: str = field(metadata=stored(text))
    viewer: str = field(metadata=stored(text))
    open_command: str = field(metadata=stored(text))
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return written(self, self.extra)

    @classmethod
    def from_json(cls, data: dict[str, Any], run_dir: Path, where: str) -> ArtifactRecord:
        known, extra = read(cls, data, run_dir, where)
        inside(run_dir, known["path"])
        return cls(**known, extra=extra)


@dataclass
class SourceRecord:
    """A file a report was ingested from, read as the pass `number`."""

    number: int = field(default=0, metadata=stored(whole, key="pass"))
    #: where the file was when it was read: never opened again (view serves the folder's
    #: own copies, the artifacts)
    path: str = field(default="", metadata=stored(text))
    backend: str = field(default="", metadata=stored(text))
    rank: int = field(default=0, metadata=stored(whole))
    #: what the reader found of the file (nsys's `report` kind, a trace's `distributed`
    #: facts...), kept as meta.json has them, beside the fields above
    facts: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return written(self, self.facts)

    @classmethod
    def from_json(cls, data: dict[str, Any], run_dir: Path, where: str) -> SourceRecord:
        known, facts = read(cls, data, run_dir, where)
        return cls(**known, facts=facts)


@dataclass
class RunRecord:
    """The run. `target`, `environment`, `model` and `distributed` are dicts as their
    makers said them (targets' to_spec, environment.collect, the model benchmark's facts,
    launch.Launch)."""

    format: int = field(default=FORMAT_VERSION, metadata=stored(whole))
    #: complete, partial (a pass lost data), failed, interrupted
    status: str = field(default="", metadata=stored(text, required=True))
    exit_code: int = field(default=0, metadata=stored(whole, required=True))
    #: the stop signal's name (SIGTERM...) that ended the run, None when none did
    stopped_by: str | None = field(default=None, metadata=stored(optional(text)))
    #: what was profiled (its kind, its `command` as one line...)
    target: dict[str, Any] = field(
        default_factory=dict, metadata=stored(dict_of(anything), inner={"command": text},
                                              required=True))
    #: profile-all's own command line (the CLI's argv)
    command: list[str] = field(default_factory=list, metadata=stored(list_of(text)))
    cwd: str = field(default="", metadata=stored(text, only_some=True))
    environment: dict[str, Any] = field(default_factory=dict,
                                        metadata=stored(dict_of(anything)))
    passes: list[PassRecord] = field(
        default_factory=list, metadata=stored(list_of(dict_of(anything)), each=PassRecord,
                                              required=True))
    #: the planned passes a stop left unrun
    passes_not_run: list[int] = field(default_factory=list, metadata=stored(list_of(whole)))
    #: backend name -> why it was not run
    skipped_backends: dict[str, str] = field(default_factory=dict,
                                             metadata=stored(dict_of(text)))
    #: backend name -> its rows.Facts as a dict
    backend_facts: dict[str, dict[str, bool | str]] = field(
        default_factory=dict, metadata=stored(dict_of(dict_of(of(bool, str)))))
    #: what makes the numbers doubtful, a sentence each
    doubts: list[str] = field(default_factory=list, metadata=stored(list_of(text)))
    #: the modules every pass imported before its target
    preimported: list[str] = field(
        default_factory=list, metadata=stored(list_of(text), only_some=True))
    #: how the passes' processes began (fork, fresh interpreter...)
    process_start: str = field(default="", metadata=stored(text, only_some=True))
    #: where pa.region's enter and exit ran: in C or Python, and why
    region_marks: str = field(default="", metadata=stored(text, only_some=True))
    ranks: list[int] = field(default_factory=list,
                             metadata=stored(list_of(whole), only_some=True))
    artifacts: list[ArtifactRecord] = field(
        default_factory=list, metadata=stored(list_of(dict_of(anything)),
                                              each=ArtifactRecord))
    #: a distributed run's launch (torchrun's nodes, rendezvous) and world size
    distributed: dict[str, Any] = field(
        default_factory=dict, metadata=stored(dict_of(anything), only_some=True))
    #: a model benchmark's: the model's spec and what its timing passes found
    model: dict[str, Any] = field(default_factory=dict, metadata=stored(
        dict_of(anything), only_some=True,
        inner={"unstable": flag, "cv": numeric, "timing_passes": list_of(dict_of(anything))}))
    #: an ingested report's files
    sources: list[SourceRecord] = field(default_factory=list, metadata=stored(
        list_of(dict_of(anything)), only_some=True, each=SourceRecord))
    #: a merged report's nodes: each one's run folder and environment
    merged_from: list[dict[str, Any]] = field(
        default_factory=list, metadata=stored(list_of(dict_of(anything)), only_some=True))
    #: set when the run folder is first saved, and kept
    run_id: str | None = field(default=None,
                               metadata=stored(optional(text), only_some=True))
    #: what meta.json holds that this profile-all does not know, kept
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """As meta.json holds it."""
        return written(self, self.extra)

    @classmethod
    def from_json(cls, data: Any, run_dir: Path) -> RunRecord:
        """The record of `run_dir`'s meta.json (`data`, as JSON read it); UsageError with
        one line when it is not profile-all's, comes from a newer profile-all, or holds a
        field that is not what profile-all writes or a native file outside the folder."""
        if not isinstance(data, dict) or not isinstance(data.get("format"), int):
            raise UsageError(f"{run_dir}/meta.json is not profile-all run metadata")
        if data["format"] > FORMAT_VERSION:
            raise UsageError(f"{run_dir} was written by a newer profile-all (format "
                             f"{data['format']}, this one reads up to {FORMAT_VERSION}); "
                             "upgrade")
        known, extra = read(cls, data, run_dir, "")
        return cls(**known, extra=extra)
