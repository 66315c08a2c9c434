"""py-spy (sampler): the target's stacks sampled from outside its process, at a rate.

A deterministic profiler (cProfile) runs code at every call and return, so it slows what
calls most (up to 29x a step on the demo) and cannot see into torch's C++. py-spy reads
the process's stacks from another process, `rate` times a second: the target runs its
own code, and every thread's Python frames are seen (with `--native`, the C and C++
frames under them: torch's autograd engine under `loss.backward()`), and with it child
processes (DataLoader workers) as rows of their own. Its times are estimates: a
function's share of the samples, with the error a count of samples carries
(readers/sampled_rows.py). py-spy samples threads that run; a thread's idle time is its
wall time less its samples (`--py-spy-idle` samples waiting threads too, and their
waits then count as the time of the function that waits).

Writes `artifacts/py_spy.speedscope.json` (https://www.speedscope.app, or `speedscope
FILE`) and `artifacts/py_spy.svg`, a flame graph any browser opens.
"""

from __future__ import annotations

import os
import shutil
import time
from typing import Any

from profile_all import validate
from profile_all.backends.base import Artifact, Backend, Collected, Option, PassContext
from profile_all.backends.flame_svg import flame_svg
from profile_all.backends.py_spy_recorder import Recorder, why_not
from profile_all.fileio import current_folder
from profile_all.rows import Facts
from profile_all.safe_text import utf8

DEFAULT_RATE = 50
MAX_RATE = 1000
#: fewer samples than this are said to give rough estimates
FEW_SAMPLES = 100


class PySpy(Backend):
    name = "py-spy"
    kind = "sampler"
    windowed = True
    sees_children = True
    measures = ("where the time goes, sampled from outside the process at a rate: every "
                "thread's Python frames (and native ones with --native), child processes")
    native_file = "py_spy.speedscope.json (speedscope), py_spy.svg (flame graph)"
    facts = Facts(sampled=True)
    offered_options = (
        Option("rate", "--py-spy-rate", (int,), DEFAULT_RATE,
               "py-spy: samples a second", "HZ"),
        Option("native", "--native", (bool,), False,
               "py-spy: native frames too (torch's C++ under the Python call); the process "
               "is paused longer at each sample"),
        Option("idle", "--py-spy-idle", (bool,), False,
               "py-spy: sample waiting threads too (a wait counts as its function's time)"),
        Option("lines", "--py-spy-lines", (list, tuple), [],
               "py-spy: time per line of this function besides the hottest ones (repeat)",
               "MODULE:FUNCTION"))

    @classmethod
    def available(cls) -> tuple[bool, str]:
        reason = why_not(of_own_child=True)
        return not reason, reason

    @classmethod
    def check_options(cls, options: dict[str, Any]) -> None:
        rate = options.get("rate", DEFAULT_RATE)
        validate.whole("--py-spy-rate", rate, 1)
        if rate > MAX_RATE:
            raise validate.ArgumentValueError(
                f"--py-spy-rate wants at most {MAX_RATE} samples a second, got {rate}")
        for spec in validate.strings("--py-spy-lines", options.get("lines", [])):
            if not all(spec.partition(":")[::2]):
                raise validate.ArgumentValueError(
                    f"--py-spy-lines wants MODULE:FUNCTION, got {spec!r}")

    def window_seconds(self) -> float:
        """Half the samples whose shares are not said to be rough: steps of milliseconds
        would give none in a window of a few."""
        return FEW_SAMPLES / 2 / int(self.options.get("rate", DEFAULT_RATE))

    def start(self, ctx: PassContext) -> None:
        self._rate = int(self.options.get("rate", DEFAULT_RATE))
        stem = f"py_spy.pass{ctx.pass_index}.rank{ctx.rank}"
        self._recorder = Recorder(
            os.getpid(), ctx.scratch_dir / f"{stem}.json", ctx.scratch_dir / f"{stem}.log",
            rate=self._rate, native=bool(self.options.get("native")),
            idle=bool(self.options.get("idle")), own=True)
        self._recorder.start()
        self._started = time.perf_counter()
        self._cwd = current_folder()  # the target may remove it: its paths are shown from here

    def stop(self, ctx: PassContext) -> None:
        self._wall = time.perf_counter() - self._started
        self._recorder.stop()

    def collect(self, ctx: PassContext) -> Collected:
        from profile_all.readers.sampled_rows import idle_row, sampled_rows, unheard_lines
        from profile_all.readers.speedscope import read_speedscope

        if not self._recorder.output.is_file():  # py-spy failed as it stopped: said
            return Collected()
        if any(utf8(part) != part for part in ctx.command[1:2]):
            self.notes.append("py-spy leaves out the frames of code in a file whose name is "
                              "not UTF-8 (the script's): its stacks stop above them")
        rows = sampled_rows(read_speedscope(self._recorder.output), 1 / self._rate,
                            self.options.get("lines", []), root_pid=os.getpid(),
                            on_cpu=not self.options.get("idle"))
        if not self.options.get("idle"):  # waiting threads were not sampled
            rows.append(idle_row(rows, self._wall))
        taken = sum(r[5] for r in rows if r[:2] == ["run", "run"] and r[3] == "samples")
        more = "--pass-steps all or a higher --py-spy-rate gives more"
        if not taken:  # nothing to show: no native file either
            self.losses.append(f"py-spy took no sample of the target in its {self._wall:.2g} s "
                               f"at {self._rate} a second: {more}")
            return Collected(rows)
        if taken < FEW_SAMPLES:
            self.notes.append(
                f"py-spy took {taken:.0f} samples in {self._wall:.2g} s at {self._rate} a "
                f"second: its estimates are rough (see each one's ±); {more}")
        self.notes += unheard_lines(rows, self.options.get("lines", []))
        unread = self._recorder.unread()
        if unread and unread[0]:
            self.notes.append(f"py-spy could not read {unread[0]} of {sum(unread)} samples "
                              "(the process changed as it read it); the shares are of the rest")
        speedscope = ctx.artifact_path("py_spy.speedscope.json")
        shutil.move(self._recorder.output, speedscope)
        svg = ctx.artifact_path("py_spy.svg")
        svg.write_text(flame_svg([r for r in rows if r[0] == "call"],
                                 f"py-spy, {self._rate} samples a second", cwd=self._cwd))
        folder = ctx.artifacts_dir.name
        return Collected(rows, [
            Artifact(self.name, f"{folder}/{speedscope.name}", "speedscope",
                     f"open https://www.speedscope.app and load {{run_dir}}/{folder}/"
                     f"{speedscope.name}"),
            Artifact(self.name, f"{folder}/{svg.name}", "a browser (flame graph)",
                     f"open {{run_dir}}/{folder}/{svg.name}")])
