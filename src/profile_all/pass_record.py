"""A pass as the run's record (meta.json's `passes`) has it: its backends, how it ended,
its target's time and steps, what torch.compile and the target's own profilers did, what
its backends lost, and its overhead over the clean timing pass.

Made by runner/judging/outcome.py as the pass ends, its overhead added by
runner/judging/run_checks.py once every pass has ended; read by the views and renderers as
attributes."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from profile_all.record_fields import (
    counted,
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
    with_keys,
    written,
)

#: a pass's torch.compile record (compile_watch.CompileWatch.facts), {} when none
_COMPILATION = with_keys({
    "intervals": list_of(list_of(numeric)), "graphs": whole,
    "frames": list_of(with_keys({"frame": text, "seconds": numeric,
                                 "backward_seconds": numeric, "recompile_reason": text})),
    "graph_breaks": list_of(with_keys({"reason": text, "where": text, "count": whole}))})


def _compilation(value: Any) -> bool:
    return value == {} or _COMPILATION(value)


@dataclass
class PassRecord:
    """One pass. Per rank (`ranks`, a distributed run's) and per backend failure
    (`backend_failures`: backend, phase, error) the entries are dicts as the ranks said
    them."""

    #: the pass's number, from 1 (meta.json's `pass`)
    number: int = field(default=0, metadata=stored(whole, key="pass", required=True))
    backends: list[str] = field(default_factory=list, metadata=stored(list_of(text)))
    #: the clean timing pass (or one of its repeats): the reference of every overhead
    timing: bool = field(default=False, metadata=stored(flag))
    #: which repeat of the timing pass it is (from 1), 0 for the other passes
    repeat: int = field(default=0, metadata=stored(whole))
    #: ok, partial (the target ended well, a backend lost data), failed, timeout...
    status: str = field(default="", metadata=stored(text, required=True))
    exit_code: int = field(default=0, metadata=stored(whole, required=True))
    error: str = field(default="", metadata=stored(text))
    #: the target's wall time, its slowest rank's (s)
    target_wall_time: float | None = field(default=None, metadata=stored(optional(numeric)))
    #: the pass's process from start to end, as profile-all saw it (s)
    process_wall_time: float | None = field(default=None, metadata=stored(optional(numeric)))
    #: made from the journals of a worker that died without writing its result
    recovered: bool = field(default=False, metadata=stored(flag))
    steps: int | None = field(default=None, metadata=stored(optional(counted)))
    #: the step the pass ended its target at, None when it ran whole; in a window of
    #: steps of another pass's process (`host`), the steps of the window
    window: int | None = field(default=None, metadata=stored(optional(counted)))
    #: the pass whose process it ran in, in a window of steps (runner/inside/windows.py);
    #: None: a process of its own
    host: int | None = field(default=None, metadata=stored(optional(whole), only_some=True))
    #: the host's step its window began with
    window_from: int | None = field(default=None,
                                    metadata=stored(optional(counted), only_some=True))
    #: what marked the steps (`pa.step()`, `optimizer.step()`, `outermost module call`)
    step_source: str = field(default="", metadata=stored(text))
    #: the device a model ran on ("meta" under --count-on meta); "" for a script
    ran_on: str = field(default="", metadata=stored(text))
    #: the steps (from 1) that held a torch.compile compilation
    compile_steps: list[int] = field(default_factory=list, metadata=stored(list_of(whole)))
    #: the steps (from 1) that overlap a window of steps of a pass it hosted: left out of
    #: its per-step figures, as those that held a compilation are
    window_steps: list[int] = field(default_factory=list,
                                    metadata=stored(list_of(whole), only_some=True))
    compilation: dict[str, Any] = field(default_factory=dict, metadata=stored(_compilation))
    #: the profilers the target ran itself (target_profilers.Use.to_dict each)
    target_profilers: list[dict[str, Any]] = field(
        default_factory=list, metadata=stored(list_of(dict_of(of(str, int)))))
    backend_failures: list[dict[str, str]] = field(
        default_factory=list, metadata=stored(list_of(dict_of(text))))
    #: the pass's stdout and stderr logs, relative to the run folder
    logs: list[str] = field(default_factory=list, metadata=stored(list_of(text)))
    #: the ratio of its time to the timing passes', with its interval (None: untested)
    overhead: float | None = field(default=None, metadata=stored(optional(numeric)))
    overhead_low: float | None = field(default=None, metadata=stored(optional(numeric)))
    overhead_high: float | None = field(default=None, metadata=stored(optional(numeric)))
    #: what the overhead rests on, in words
    overhead_basis: str = field(default="", metadata=stored(text))
    #: reference, within noise, above noise, untested, below 1...
    overhead_verdict: str = field(default="", metadata=stored(text))
    #: a distributed pass's failing rank, the cause of its status
    failed_rank: int | None = field(
        default=None, metadata=stored(optional(whole), only_some=True))
    #: a distributed pass's ranks, each with how it ended
    ranks: list[dict[str, Any]] = field(
        default_factory=list, metadata=stored(list_of(with_keys(
            {"rank": whole, "status": text, "exit_code": whole})), only_some=True))
    #: the target's processes left running at the pass's end, ended by profile-all
    left_running: list[str] = field(
        default_factory=list, metadata=stored(list_of(text), only_some=True))
    #: what meta.json holds of the pass that this profile-all does not know, kept
    extra: dict[str, Any] = field(default_factory=dict)

    def killed_after_the_script(self, passes: list[PassRecord]) -> bool:
        """A profiler's pass killed (SIGKILL: the out-of-memory killer, most often) where
        the clean timing pass ran the script to a good end: the profiler's cost, not the
        script's failure."""
        return (self.status == "killed" and not self.timing
                and any(p.timing and p.ended_well for p in passes))

    @property
    def ended_well(self) -> bool:
        """The target ended well (a backend may have lost data: partial)."""
        return self.status in ("ok", "partial")

    def to_json(self) -> dict[str, Any]:
        return written(self, self.extra)

    @classmethod
    def from_json(cls, data: dict[str, Any], run_dir: Path, where: str) -> PassRecord:
        """The pass of `data` (checked as a dict already), every field it has checked;
        UsageError naming the field (`where`: `passes[N].`) when one is not what
        profile-all writes."""
        known, extra = read(cls, data, run_dir, where)
        return cls(**known, extra=extra)
