"""What goes into a pass and what comes out of it, typed: the `PassSpec` the orchestrator
builds once per pass (JSON for a worker process), and the `PassResult` one rank of it
gives back (JSON from a worker, or made from a dead worker's journals)."""

from __future__ import annotations

import dataclasses
import json
import signal
from pathlib import Path
from typing import Any

import orjson

from profile_all import backends
from profile_all.backends.base import PassContext
from profile_all.safe_text import utf8_all


def result_path(scratch: Path, number: int) -> str:
    """Where pass `number`'s ranks write their results (`{rank}` left for each to fill)."""
    return str((scratch / f"pass{number}.result.rank{{rank}}.json").resolve())


@dataclasses.dataclass(frozen=True)
class PassSpec:
    number: int
    backends: list[str]
    #: "bench": the timing pass of a model (the target repeats its work); else "once"
    mode: str
    target: dict[str, Any]
    options: dict[str, dict[str, Any]]
    #: modules imported before the target's clock starts, the same in every pass
    preimport: list[str]
    #: one of several ranks under torchrun: each rank reads its own from the environment
    distributed: bool
    #: profile-all's pid: the worker stops its pass when profile-all is gone
    parent_pid: int
    artifacts_dir: str
    scratch_dir: str
    #: where the result is written; `{rank}` is replaced by the rank (never str.format)
    result_path: str
    #: end the target at this step (a window of steps, --pass-steps, --max-steps); None:
    #: run it whole
    max_steps: int | None = None
    #: what marks the target's steps, as the timing pass found it ("" unknown or none)
    step_source: str = ""
    #: the passes it hosts, each in a window of steps (runner/inside/windows.py): their
    #: number, backends, steps and result_path (`{rank}` as above)
    windows: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    #: the steps it runs clean before the first window
    windows_after: int = 0
    rank: int = 0
    world_size: int = 1

    def to_json(self) -> bytes:
        """JSON; a path or argument whose bytes are not UTF-8 (Python holds them as lone
        surrogates, which orjson refuses) is written with Python's escapes, exactly."""
        said = dataclasses.asdict(self)
        try:
            return orjson.dumps(said)
        except TypeError:
            return json.dumps(said).encode()

    @classmethod
    def from_json(cls, data: bytes) -> PassSpec:
        try:
            return cls(**orjson.loads(data))
        except orjson.JSONDecodeError:  # Python's escapes of lone surrogates
            return cls(**json.loads(data))

    def for_rank(self, rank: int, world_size: int) -> PassSpec:
        return dataclasses.replace(self, rank=rank, world_size=world_size)

    @property
    def result_file(self) -> Path:
        return Path(self.result_path.replace("{rank}", str(self.rank)))

    def context(self, command: list[str] | None = None) -> PassContext:
        return PassContext(pass_index=self.number, artifacts_dir=Path(self.artifacts_dir),
                           scratch_dir=Path(self.scratch_dir), rank=self.rank,
                           world_size=self.world_size, command=list(command or []),
                           step_source=self.step_source, max_steps=self.max_steps)


@dataclasses.dataclass(frozen=True)
class PassResult:
    """One rank's pass: its rows (COLUMNS order), per-call samples, native files, how its
    target ended (pass_run.Outcome as a dict), what its backends lost, and what the pass
    saw of the target (steps, children, the model benchmark's facts)."""

    number: int
    rank: int
    backends: list[str]
    outcome: dict[str, Any]
    rows: list[list[Any]]
    samples: list[list[Any]] = dataclasses.field(default_factory=list)
    artifacts: list[dict[str, str]] = dataclasses.field(default_factory=list)
    backend_failures: list[dict[str, str]] = dataclasses.field(default_factory=list)
    world_size: int = 1
    runtime: dict[str, Any] = dataclasses.field(default_factory=dict)
    target_facts: dict[str, Any] = dataclasses.field(default_factory=dict)
    children: dict[str, float] = dataclasses.field(default_factory=dict)
    steps: int | None = None
    step_source: str = ""
    step_times: list[float] = dataclasses.field(default_factory=list)
    #: the steps (numbered from 1) that held a torch.compile compilation
    compile_steps: list[int] = dataclasses.field(default_factory=list)
    #: the steps (from 1) that overlap a window of steps of a pass it hosted (and held no
    #: compilation): left out of its per-step figures too
    window_steps: list[int] = dataclasses.field(default_factory=list)
    #: what torch.compile did (compile_watch.CompileWatch.facts), {} when nothing compiled
    compilation: dict[str, Any] = dataclasses.field(default_factory=dict)
    #: the profilers the target ran itself (target_profilers.Use.to_dict each)
    target_profilers: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    #: the target's processes left running outside its group, ended (process.end_escaped)
    left_running: list[str] = dataclasses.field(default_factory=list)
    #: the step the pass ended its target at (its window), None when it ran whole
    window: int | None = None
    #: rows.TIMELINE_COLUMNS each
    timeline: list[list[Any]] = dataclasses.field(default_factory=list)
    #: made from the journals of a worker that died without writing its result
    recovered: bool = False
    #: the device a model ran on in this pass ("meta" under --count-on meta); "" for a script
    ran_on: str = ""
    #: what backends left for `collect_after`: {"backend": name, "later": Collected.later}
    later: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    #: the pass whose process it ran in, in a window of steps (None: a process of its own),
    #: and the host's step its window began with
    host: int | None = None
    window_from: int | None = None

    def to_json(self) -> bytes:
        """JSON; where a string is not UTF-8 text (a function of a script whose path is
        bytes, a folder so named), the rows' names are written as `safe_text.utf8` shows
        them (names are for reading) and the rest (paths) exactly, with Python's escapes."""
        said = dataclasses.asdict(self)
        try:
            return orjson.dumps(said, option=orjson.OPT_SERIALIZE_NUMPY)
        except TypeError:
            for table in ("rows", "samples", "timeline", "step_times"):
                said[table] = utf8_all(said[table])
            return json.dumps(said, default=_plain).encode()

    @classmethod
    def from_json(cls, data: bytes) -> PassResult:
        try:
            return cls(**orjson.loads(data))
        except orjson.JSONDecodeError:  # Python's escapes of lone surrogates
            return cls(**json.loads(data))

    def with_more(self, rows: list[list[Any]], artifacts: list[dict[str, str]],
                  failures: list[dict[str, str]]) -> PassResult:
        """This result and what a wrapper backend measured outside the worker (nsys)."""
        return dataclasses.replace(self, rows=self.rows + rows,
                                   artifacts=self.artifacts + artifacts,
                                   backend_failures=self.backend_failures + failures)


def _plain(value: Any) -> Any:
    """A numpy number or array as JSON has it (what orjson's OPT_SERIALIZE_NUMPY writes)."""
    if hasattr(value, "tolist"):
        return value.tolist()
    raise TypeError(f"{type(value).__name__} is not JSON")


def not_started(spec: PassSpec, signum: int) -> PassResult:
    """The result of a pass stopped before its process started (while the fork server was
    still importing): nothing measured."""
    return PassResult(spec.number, spec.rank, spec.backends,
                      {"status": "interrupted", "exit_code": 128 + signum,
                       "error": f"stopped by {signal.Signals(signum).name} before its process "
                                "started", "target_wall_time": None, "started": False},
                      [], [], world_size=spec.world_size)


def not_started_for(spec: PassSpec, error: OSError) -> PassResult:
    """The result of a pass whose process could not be started (its spec could not be
    written: the run folder's disk is full): nothing measured, exit code 74 (EX_IOERR)."""
    return PassResult(spec.number, spec.rank, spec.backends,
                      {"status": "failed", "exit_code": 74,
                       "error": f"profile-all could not start it: {error.strerror or error}",
                       "target_wall_time": None, "started": False},
                      [], [], world_size=spec.world_size)


def _out_of_memory(max_rss: int) -> str:
    import psutil

    total = psutil.virtual_memory().total
    said = f" at a peak RSS of {max_rss / 2**30:.1f} GiB"
    if max_rss >= 0.8 * total:
        said += (f" of the machine's {total / 2**30:.1f} GiB: most likely the kernel's "
                 "out-of-memory killer (dmesg says)")
    return said


def recovered(spec: PassSpec, return_code: int, max_rss: int | None = None,
              how: str = "") -> PassResult:
    """The result of a worker (rank `spec.rank`) that died without writing one: what its
    backends journaled, and how the process ended (`max_rss`: its peak memory, which says
    whether the SIGKILL was likely the kernel's out-of-memory killer)."""
    ctx = spec.context()
    rows, samples, timeline = [], [], []
    for name in spec.backends:
        found = backends.load(name).recover(ctx)
        rows += [[name, spec.number, spec.rank, *measured] for measured in found.rows]
        samples += [[name, spec.number, spec.rank, *kept] for kept in found.samples]
        timeline += [[name, spec.number, spec.rank, *entry] for entry in found.timeline]
    if return_code < 0:
        code, error = 128 - return_code, f"killed by {signal.Signals(-return_code).name}"
        if max_rss and return_code == -signal.SIGKILL:
            error += _out_of_memory(max_rss)
    elif return_code == 74:  # worker.RESULT_UNWRITTEN
        code, error = return_code, ("the worker could not write its result (the run "
                                    "folder's disk is full, or not writable)")
    else:
        code, error = return_code, how or \
            f"the worker exited with {return_code} without a result"
    return PassResult(spec.number, spec.rank, spec.backends,
                      {"status": "killed", "exit_code": code, "error": error,
                       "target_wall_time": None},
                      rows, samples, world_size=spec.world_size, timeline=timeline,
                      recovered=True)
