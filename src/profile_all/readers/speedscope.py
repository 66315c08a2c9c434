"""speedscope files of sampled stacks (py-spy's `record --format speedscope`, and any other
profiler's "sampled" profiles) -> a `SampledProfile`, checked as data someone else made.

The format (https://www.speedscope.app/file-format-schema.json): `shared.frames`, a list of
{name, file, line}; `profiles`, one a thread, each `samples` (a stack a sample: frame
indices from the root to the innermost frame) with `weights` (what each sample counts, in
the profile's `unit`). py-spy names a profile `Thread TID "NAME"`, or `Process PID Thread
TID "NAME"` when it follows child processes, and then puts `process PID:"CMDLINE"` frames
at the root of each stack (the process and its parents). Evented profiles (a timeline of
open and close events) are not samples, and are refused.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from profile_all.readers import IngestError, limits
from profile_all.readers.trace_bytes import read_bytes

#: an ingest's peak memory per byte of the file (orjson's objects for its lists of ints)
PEAK_PER_BYTE = 12
#: the most one sample may stand for: an hour, or (weights without a unit) a billion
MAX_SAMPLE_SECONDS, MAX_SAMPLE_COUNT = 3600.0, 1e9
#: seconds per unit of a profile's weights; "none": the weights count samples
_SECONDS = {"seconds": 1.0, "milliseconds": 1e-3, "microseconds": 1e-6, "nanoseconds": 1e-9,
            "none": None}
_PROFILE_NAME = re.compile(r'(?:Process (\d{1,18}) )?Thread (\d{1,18})(?: "(.*)")?$', re.DOTALL)
_PROCESS_FRAME = re.compile(r"process (\d+):")


@dataclass(frozen=True)
class Frame:
    name: str
    file: str
    line: int

    @property
    def is_process(self) -> bool:
        """py-spy's pseudo-frame for the process a stack was sampled in."""
        return not self.file and _PROCESS_FRAME.match(self.name) is not None


@dataclass
class Thread:
    """One profile of the file: a thread's stacks, each counted once with its weight."""

    name: str
    pid: int | None
    tid: int | None
    #: (frame indices from the root, innermost last) -> how many samples had that stack
    counts: Counter = field(default_factory=Counter)
    #: the same stacks -> the total weight of those samples
    weights: Counter = field(default_factory=Counter)


@dataclass
class SampledProfile:
    frames: list[Frame]
    threads: list[Thread]
    #: seconds a unit of weight is; None when the weights count samples
    seconds_per_unit: float | None
    exporter: str = ""


def read_speedscope(path: Path) -> SampledProfile:
    """The file's sampled profiles, every field checked: one line (IngestError) for a file
    that is not what the format says, or beyond the readers' limits."""
    import psutil

    bound = limits.current()
    # unpacked no further than reading it could hold: a bomb stops as it passes that
    fitting = int(0.8 * psutil.virtual_memory().available / PEAK_PER_BYTE)
    with limits.applied(max_unpacked=min(bound.max_unpacked, max(fitting, 1))):
        data = read_bytes(path)
    bound.fits_memory(path, len(data), PEAK_PER_BYTE)
    try:
        document = orjson.loads(data)
    except orjson.JSONDecodeError as error:
        raise IngestError(f"{path}: not valid JSON ({error})") from None
    if not isinstance(document, dict) or not isinstance(document.get("profiles"), list):
        raise IngestError(f"{path}: not a speedscope file (no list of profiles)")
    frames = _frames(path, document.get("shared"), bound)
    units = {profile.get("unit") for profile in document["profiles"]
             if isinstance(profile, dict)}
    if len(units) > 1 or not units <= set(_SECONDS):
        raise IngestError(f"{path}: profiles in units {sorted(map(str, units))}: one of "
                          f"{', '.join(_SECONDS)} is read")
    per_unit = _SECONDS[next(iter(units))] if units else 1.0
    heaviest = MAX_SAMPLE_SECONDS / per_unit if per_unit else MAX_SAMPLE_COUNT
    threads = [_thread(path, position, profile, len(frames), bound, heaviest)
               for position, profile in enumerate(document["profiles"])]
    exporter = document.get("exporter")
    return SampledProfile(frames, threads, per_unit,
                          exporter if isinstance(exporter, str) else "")


def _frames(path: Path, shared: Any, bound: limits.Limits) -> list[Frame]:
    listed = shared.get("frames") if isinstance(shared, dict) else None
    if not isinstance(listed, list):
        raise IngestError(f"{path}: not a speedscope file (no shared.frames)")
    frames = []
    for position, frame in enumerate(listed):
        if not isinstance(frame, dict):
            frame = {}
        name, file, line = frame.get("name"), frame.get("file") or "", frame.get("line") or 0
        if not (isinstance(name, str) and isinstance(file, str) and type(line) is int
                and line >= 0):
            raise IngestError(f"{path}: frame {position} is not a speedscope frame "
                              "(a name, a file, a line)")
        bound.field(path, max(len(name), len(file)), f"frame {position}'s name")
        frames.append(Frame(name, file, line))
    return frames


def _thread_name(said: re.Match) -> str:
    """py-spy's thread name; a thread it names "" (a child process's, as py-spy sees
    them): MainThread where its id is its process's, else `thread ID`."""
    if said.group(3):
        return said.group(3)
    return "MainThread" if said.group(1) == said.group(2) else f"thread {said.group(2)}"


def _thread(path: Path, position: int, profile: Any, frames: int,
            bound: limits.Limits, heaviest: float) -> Thread:
    _check_profile(path, position, profile)
    name = profile.get("name") if isinstance(profile.get("name"), str) else ""
    bound.field(path, len(name), f"profile {position}'s name")
    said = _PROFILE_NAME.match(name)
    thread = Thread(_thread_name(said) if said else name,
                    int(said.group(1)) if said and said.group(1) else None,
                    int(said.group(2)) if said else None)
    for sample, weight in zip(profile["samples"], profile["weights"], strict=True):
        if not (isinstance(sample, list) and all(
                type(index) is int and 0 <= index < frames for index in sample)):
            raise IngestError(f"{path}: profile {position} has a sample that is not a list "
                              f"of frame indices below {frames}")
        if not (isinstance(weight, (int, float)) and 0 <= weight <= heaviest):
            raise IngestError(f"{path}: profile {position} has a weight that is not a "
                              f"number from 0 to {heaviest:g} ({str(weight)[:40]}): not a "
                              "sample's")
        stack = tuple(sample)
        thread.counts[stack] += 1
        thread.weights[stack] += weight
    return thread


def _check_profile(path: Path, position: int, profile: Any) -> None:
    """A sampled profile with a weight a sample, or one line on what it is instead."""
    if not isinstance(profile, dict) or profile.get("type") != "sampled":
        kind = profile.get("type") if isinstance(profile, dict) else type(profile).__name__
        raise IngestError(f"{path}: profile {position} is {str(kind)[:40]!r}, not 'sampled': "
                          "only sampled profiles (py-spy's) are read")
    samples, weights = profile.get("samples"), profile.get("weights")
    if not (isinstance(samples, list) and isinstance(weights, list)
            and len(samples) == len(weights)):
        raise IngestError(f"{path}: profile {position} has no samples with a weight each")
