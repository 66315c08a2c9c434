"""memory (sampler): resident memory over time, per run and per region, with memory_profiler.

A separate process (profile_all.backends.memory.sampler) samples this process's RSS by pid every
`interval` seconds (CLI `--memory-interval`, default 0.01 s), and each child process's
(DataLoader workers) separately. Regions are placed on that timeline by their epoch
timestamps: a region's peak is the largest sample from the last one taken before it opened
to the last one taken before it closed, and its increase is that peak minus the first of
those. A sample after the region closed is never its, so a region shorter than the
interval may show none of its memory: lower the interval for short regions.

With CUDA in use, `torch.cuda.max_memory_allocated` / `max_memory_reserved` are read per
region and for the run: the peak counter is reset when a region opens, and a region's peak
is folded into its parent's when it closes, so nested regions do not hide each other; and
`memory_allocated` at each step's end goes on the timeline (series `cuda`): memory that
grows step after step.

`lines=["module:function", ...]` (CLI `--memory-lines`) adds memory_profiler's
line-by-line memory of those functions, and of any decorated with its `@profile`.

Writes `artifacts/mprofile.dat` in memory_profiler's own format (`mprof plot`,
`mprof peak`), with one FUNC line per region: `mprof plot` gives every FUNC line a legend
entry of its own (250 of them for a 250-step run), so each region is there by the call
that raised RSS the most; every call is in the report's timeline (report.html's memory
chart shades them, at most TIMELINE_CALLS_PER_REGION each).
"""

from __future__ import annotations

import contextlib
import math
import os
import signal
import subprocess
import sys
import time
from array import array
from pathlib import Path
from typing import Any

from profile_all import validate
from profile_all.backends.base import Artifact, Backend, Collected, Option, PassContext
from profile_all.backends.memory.cuda_peaks import CudaPeaks
from profile_all.rows import region_path, row

DEFAULT_INTERVAL = 0.01
TIMELINE_CALLS_PER_REGION = 2000


def _sampler_died(code: int, samples: Path, seconds: float, slack: float) -> str:
    """The sampler ended before the target: how, and what its samples cover; "" where it
    ended well or by SIGTERM and its samples cover the target's time but for `slack` (a
    pass stopped at its timeout stops its sampler with it: nothing is missing). Killed
    otherwise (SIGKILL: the out-of-memory killer), it is said."""
    how = f"was killed by {signal.Signals(-code).name}" if code < 0 else f"exited {code}"
    last = 0.0
    with contextlib.suppress(OSError, ValueError, IndexError):
        lines = [line.split() for line in samples.read_text().splitlines()
                 if line.startswith("MEM")]
        last = float(lines[-1][2]) - float(lines[0][2]) if lines else 0.0
    if code in (0, -signal.SIGTERM) and last >= seconds - slack:
        return ""
    return (f"the memory sampler {how} before the target ended: its samples cover "
            f"{last:.3g} s of the target's {seconds:.3g} s, the peaks after that are missing")


def _samples_path(ctx: PassContext) -> Path:
    return ctx.scratch_dir / f"memory.pass{ctx.pass_index}.rank{ctx.rank}.samples"


class Memory(Backend):
    name = "memory"
    kind = "sampler"
    windowed = True
    beside = True
    sees_children = True
    measures = ("resident memory over time, peak and increase per region (memory_profiler, "
                "sampled from outside); CUDA peaks per region; line-by-line on request")
    native_file = "mprofile.dat (mprof plot)"
    requires = (("memory_profiler", "memory_profiler"), ("psutil", "psutil"))
    offered_options = (
        Option("interval", "--memory-interval", (float, int), DEFAULT_INTERVAL,
               "memory: seconds between two samples of the process's memory", "SECONDS"),
        Option("lines", "--memory-lines", (list, tuple), [],
               "memory: line-by-line memory of this function (repeat; the script's own "
               "module is its file's stem)", "MODULE:FUNCTION"))

    @classmethod
    def check_options(cls, options: dict[str, Any]) -> None:
        validate.seconds("--memory-interval", options.get("interval", DEFAULT_INTERVAL))
        lines = validate.strings("--memory-lines", options.get("lines", []))
        for spec in lines:
            module, _, function = spec.partition(":")
            if not module or not function:
                raise validate.ArgumentValueError(
                    f"--memory-lines wants MODULE:FUNCTION (the script's own module is its "
                    f"file's stem), got {spec!r}")

    @classmethod
    def beside_with(cls, options: dict[str, Any]) -> bool:
        """Not with --memory-lines: tracing a function's lines costs the target."""
        return not options.get("lines")

    def window_seconds(self) -> float:
        """Fifty samples of the RSS."""
        return 50 * float(self.options.get("interval", DEFAULT_INTERVAL))

    def start(self, ctx: PassContext) -> None:
        self._interval = float(self.options.get("interval", DEFAULT_INTERVAL))
        self._calls: dict[tuple[str, str], tuple[array, array]] = {}
        self._pid = os.getpid()
        self._cuda = self._cuda_peaks()
        self._step_ends = array("d")  # seconds since the start: the steps on the timeline
        self._lines = None
        if self.options.get("lines"):
            from profile_all.backends.memory.lines import LineMemory, parse_specs

            stem = Path(ctx.command[1]).stem if len(ctx.command) > 1 else ""
            self._lines = LineMemory(parse_specs(self.options["lines"]), stem)
        self._path = _samples_path(ctx)
        self._started = time.time()
        self._windows = ctx.windows  # others' windows of steps (perf_counter), as they end
        self._epoch = self._started - time.perf_counter()
        # started by its file, not `-m`: it needs nothing of profile_all, whose package
        # imports would hold the target's start (60 ms)
        self._sampler = subprocess.Popen(
            [sys.executable, str(Path(__file__).with_name("sampler.py")), str(self._pid),
             str(self._interval), str(self._path)], stdin=subprocess.DEVNULL)
        self._wait_for_first_sample()
        if self._lines:
            self._lines.start()

    def _wait_for_first_sample(self, patience: float = 10.0) -> None:
        """The sampler takes a while to import; the target starts once it is sampling."""
        deadline = time.monotonic() + patience
        while time.monotonic() < deadline and self._sampler.poll() is None:
            if self._path.exists() and self._path.stat().st_size > 0:
                return
            time.sleep(0.005)
        self.notes.append("the memory sampler had written nothing after "
                          f"{patience:g} s; the timeline may miss the start")

    def _cuda_peaks(self) -> CudaPeaks | None:
        torch = sys.modules.get("torch")
        if torch is None or not torch.cuda.is_available():
            return None
        return CudaPeaks(torch)

    def enter(self, name: str, parent: str) -> tuple[float, bool]:
        return time.time(), self._cuda is not None and self._cuda.enter()

    def step(self) -> None:
        if os.getpid() != self._pid:
            return
        now = time.time() - self._started
        self._step_ends.append(now)
        if self._cuda is not None:
            self._cuda.step_ended(now)

    def exit(self, name: str, parent: str, token: tuple[float, bool]) -> None:
        if os.getpid() != self._pid:
            return
        starts, ends = self._calls.get((name, parent)) or self._calls.setdefault(
            (name, parent), (array("d"), array("d")))
        starts.append(token[0])
        ends.append(time.time())
        if token[1]:
            self._cuda.exit((name, parent))

    def stop(self, ctx: PassContext) -> None:
        if self._lines:
            self._lines.stop()
        self._ended = time.time()
        time.sleep(self._interval)  # one more sample after the target's last work
        if self._sampler.poll() is not None:  # killed (the out-of-memory killer, a user)
            died = _sampler_died(self._sampler.returncode, self._path,
                                 self._ended - self._started, max(0.5, 5 * self._interval))
            if died:
                self.losses.append(died)
        self._sampler.terminate()
        self._sampler.wait()
        if self._cuda:
            self._cuda.finish()

    def collect(self, ctx: PassContext) -> Collected:
        from profile_all.readers import mprofile
        from profile_all.readers.mprofile_rows import (
            leave_out,
            region_bands,
            region_rows,
            run_rows,
            timeline,
        )

        profile = mprofile.read(self._path)
        if self._windows:  # a profiler's own memory (torch.profiler's events) is not the
            # script's: samples and region calls in others' windows of steps left out
            # (mprofile.dat keeps every sample: the sampler's own file)
            leave_out(profile, self._calls, [(start + self._epoch, end + self._epoch)
                                             for start, end in self._windows])
        rows = run_rows(profile, self._started) + region_rows(profile, self._calls)
        if self._cuda:
            rows += [row("run", "run", "gpu_mem_peak", self._cuda.run_peak[0], stat="max",
                         unit="B"),
                     row("run", "run", "gpu_mem_reserved_peak", self._cuda.run_peak[1],
                         stat="max", unit="B")]
            for (name, parent), (allocated, reserved) in self._cuda.regions.items():
                rows += [row("region", name, "gpu_mem_peak", allocated, stat="max",
                             parent=parent, unit="B"),
                         row("region", name, "gpu_mem_reserved_peak", reserved, stat="max",
                             parent=parent, unit="B")]
        if self._lines:
            rows += [row("line", name, metric, value, stat=stat, parent=function, unit=unit)
                     for name, function, metric, value, stat, unit in self._lines.rows()]
        dat = ctx.artifact_path("mprofile.dat")
        functions = _functions(profile, self._calls)
        mprofile.write(dat, " ".join(ctx.command), self._path.read_text().splitlines(True),
                       functions)
        self._path.unlink(missing_ok=True)
        steps = [["cuda", "allocated", at, at, allocated, "B"]
                 for at, allocated in (self._cuda.at_steps if self._cuda else [])]
        steps += [["step", "step", at, at, math.nan, "s"] for at in self._step_ends]
        return Collected(rows, [Artifact(self.name, f"artifacts/{dat.name}", "mprof",
                                         f"mprof plot {{run_dir}}/artifacts/{dat.name}")],
                         timeline=timeline(profile, self._started) + region_bands(
                             self._calls, self._started, TIMELINE_CALLS_PER_REGION) + steps)

    @classmethod
    def recover(cls, ctx: PassContext) -> Collected:
        """The timeline and the run's peak, from the sampler's file; regions are lost."""
        from profile_all.readers import mprofile
        from profile_all.readers.mprofile_rows import run_rows, timeline

        path = _samples_path(ctx)
        if not path.exists():
            return Collected()
        profile = mprofile.read(path)
        if not len(profile.times):
            return Collected()
        return Collected(run_rows(profile, profile.times[0]),
                         timeline=timeline(profile, profile.times[0]))


def _functions(profile: Any, calls: dict[tuple[str, str], tuple[array, array]]
               ) -> list[tuple[str, float, float, float, float, int]]:
    """FUNC entries for mprofile.dat: a region's call that raised RSS the most (the first of
    equals), with the RSS at its start and end."""
    import numpy as np

    functions = []
    if not len(profile.times):
        return functions
    for (name, parent), (starts, ends) in calls.items():
        starts, ends = np.frombuffer(starts, dtype="d"), np.frombuffer(ends, dtype="d")
        if not len(starts):
            continue
        at_start = profile.rss[np.searchsorted(profile.times, starts, "right").clip(1) - 1]
        at_end = profile.rss[np.searchsorted(profile.times, ends, "right").clip(1) - 1]
        most = int(np.argmax(at_end - at_start))
        path = region_path(parent, name)
        functions.append((path, starts[most], ends[most], at_start[most], at_end[most],
                          path.count("/")))
    return functions
