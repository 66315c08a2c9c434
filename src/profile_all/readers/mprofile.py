"""memory_profiler's mprofile `.dat` format: read it, and write it from our own samples.

The format is what `mprof run` writes and `mprof plot` / `mprof peak` read, a line each:
`CMDLINE <command>`, `MEM <MiB> <epoch>`, `CHLD <child> <MiB> <epoch>`, and
`FUNC <name> <MiB at start> <epoch start> <MiB at end> <epoch end> <stack level>`.
mprof splits a FUNC line on single spaces, so a name's whitespace is written as `_`.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from profile_all.readers import limits, plausible
from profile_all.readers.plausible import Field

MIB = 2**20


@dataclass
class Mprofile:
    """Times are epoch seconds; memory in bytes."""

    command: str = ""
    times: np.ndarray = field(default_factory=lambda: np.empty(0))
    rss: np.ndarray = field(default_factory=lambda: np.empty(0))
    #: child pid -> (times, rss)
    children: dict[str, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)
    #: (name, start, end, rss at start, rss at end, level)
    functions: list[tuple[str, float, float, float, float, int]] = field(default_factory=list)

    def children_total(self) -> np.ndarray:
        """The children's summed RSS at each of the process's sample times."""
        total = np.zeros_like(self.rss)
        for times, rss in self.children.values():
            index = np.searchsorted(self.times, times).clip(0, len(self.times) - 1)
            np.add.at(total, index, rss)
        return total


def read(path: str | Path) -> Mprofile:
    """Parse an mprofile file; ValueError names the first line that is not the format;
    limits.BeyondLimits a file or a line beyond the readers' limits."""
    profile = Mprofile()
    times, rss = [], []
    children: dict[str, tuple[list[float], list[float]]] = {}
    bound = limits.current()
    bound.unpacked(path, Path(path).stat().st_size)
    with open(path, encoding="utf-8", errors="replace") as lines:
        for number, line in enumerate(lines, start=1):
            bound.field(path, len(line), f"line {number}")
            field_name, _, value = line.rstrip("\n").partition(" ")
            try:
                if field_name == "MEM":
                    mib, stamp = value.split()
                    rss.append(float(mib) * MIB)
                    times.append(float(stamp))
                elif field_name == "CHLD":
                    child, mib, stamp = value.split()
                    series = children.setdefault(child, ([], []))
                    series[0].append(float(stamp))
                    series[1].append(float(mib) * MIB)
                elif field_name == "FUNC":
                    parts = value.split(" ")
                    name, mem_start, start, mem_end, end = parts[:5]
                    level = int(parts[5]) if len(parts) > 5 else 0
                    profile.functions.append((name, float(start), float(end),
                                              float(mem_start) * MIB, float(mem_end) * MIB,
                                              level))
                elif field_name == "CMDLINE":
                    profile.command = value
                elif line.strip():
                    raise ValueError(f"unknown field {field_name!r}")
            except ValueError as error:
                raise ValueError(f"{path}:{number}: not an mprofile line: {error}") from None
    profile.times, profile.rss = np.array(times), np.array(rss)
    profile.children = {child: (np.array(t), np.array(m)) for child, (t, m) in children.items()}
    return profile


def _line_of(path: str | Path, prefix: str, nth: int) -> int:
    """The number of the `nth` (from 0) line that starts with `prefix`."""
    with open(path, encoding="utf-8", errors="replace") as lines:
        found = (number for number, line in enumerate(lines, start=1) if line.startswith(prefix))
        return next(itertools.islice(found, nth, None), 0)


def drop_impossible(path: str | Path, profile: Mprofile) -> list[str]:
    """Leave out the samples (MEM, CHLD) with an impossible value (plausible: not a finite
    number, a negative size, a time more than a year from the median sample's); the doubt
    to say of them; IngestError when they are too many."""
    series = {"MEM ": (profile.times, profile.rss),
              **{f"CHLD {child} ": pair for child, pair in profile.children.items()}}
    centre = plausible.centre_of([times for times, _rss in series.values()])
    tally = plausible.Tally()
    for prefix, (times, rss) in series.items():
        fields = [Field("MiB", plausible.COUNT, rss, rss / MIB, "MiB"),
                  Field("time", plausible.TIME, times, times, "s")]

        def describe(position: int, prefix: str = prefix) -> str:
            return f"line {_line_of(path, prefix, position)} ({prefix.strip()} sample)"

        keep = tally.add(fields, centre, describe)
        if prefix == "MEM ":
            profile.times, profile.rss = times[keep], rss[keep]
        else:
            profile.children[prefix.split()[1]] = (times[keep], rss[keep])
    return tally.settled(path, "samples")


def drop_unordered(path: str | Path, profile: Mprofile) -> list[str]:
    """Leave out the samples (MEM, and each child's CHLD) no later than one before them, and
    the FUNC lines that repeat one before: mprof writes each series in time order, so they
    come of a file written twice or joined to another, whose samples would count twice and
    draw the timeline backwards; the doubt to say of them."""
    left_out, total = 0, len(profile.times) + sum(len(t) for t, _m in profile.children.values())
    series = {"": (profile.times, profile.rss), **profile.children}
    for child, (times, rss) in series.items():
        before = np.maximum.accumulate(np.concatenate([[-np.inf], times]))[:-1]
        keep = times > before
        left_out += int((~keep).sum())
        if child:
            profile.children[child] = (times[keep], rss[keep])
        else:
            profile.times, profile.rss = times[keep], rss[keep]
    said = [f"{path}: {left_out:,} of {total:,} samples no later than a sample before them "
            "(a file written twice, or joined to another) left out"] if left_out else []
    functions = list(dict.fromkeys(profile.functions))
    if len(functions) < len(profile.functions):
        said.append(f"{path}: {len(profile.functions) - len(functions):,} FUNC lines that "
                    "repeat one before them counted once")
        profile.functions = functions
    return said


def write(path: str | Path, command: str, samples: Iterable[str],
          functions: Iterable[tuple[str, float, float, float, float, int]]) -> None:
    """`samples` are MEM and CHLD lines as the sampler wrote them; functions as in Mprofile."""
    # mprof reads the file as text: a command or name whose bytes are not UTF-8 is shown
    # as its escapes (safe_text.utf8)
    with open(path, "w", encoding="utf-8", errors="backslashreplace") as out:
        out.write(f"CMDLINE {' '.join(command.splitlines())}\n")  # one line, whatever argv held
        out.writelines(samples)
        for name, start, end, mem_start, mem_end, level in functions:
            name = re.sub(r"\s", "_", name)
            out.write(f"FUNC {name} {mem_start / MIB:.4f} {start:.4f} "
                      f"{mem_end / MIB:.4f} {end:.4f} {level}\n")
