"""torch-memory (tracer): what holds the memory, step by step, from torch.profiler's memory
profile: parameters, gradients, optimizer state, activations, temporaries, inputs,
autograd's own tensors, other (torch's `_memory_profiler`, which TensorBoard's memory view
and `export_memory_timeline` draw).

torch tells a tensor's category from the graph: what a module holds is a parameter, its
`.grad` a gradient, what an optimizer keeps between steps its state, what the forward
keeps for the backward an activation, what lives within one operator a temporary. It
needs shapes, memory and stacks recorded (`record_shapes`, `profile_memory`,
`with_stack`), which slow the target: so this is a pass of its own, never a default.

Per device (CPU, each GPU) and per step (as the pass's steps are marked, from the end of
one to the end of the next): the bytes of each category at the step's end and at the
step's peak, and each category's own largest (stat `max`); over the whole pass, at its
peak and each category's largest (rows `held_memory`, parent `cpu/step 3`
or `cpu`); the categories over time (timeline series `held_memory:cpu`). Where CUDA is
present, the CUDA allocator's snapshot is written too, for pytorch.org/memory_viz.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from profile_all.backends.base import Artifact, Backend, Collected, PassContext
from profile_all.fileio import utf8_path
from profile_all.rows import row

#: torch's categories as the report names them
CATEGORY_NAMES = {"PARAMETER": "parameters", "OPTIMIZER_STATE": "optimizer_state",
                  "INPUT": "inputs", "TEMPORARY": "temporaries", "ACTIVATION": "activations",
                  "GRADIENT": "gradients", "AUTOGRAD_DETAIL": "autograd", None: "other"}
#: points of the timeline kept per device (its peak always among them)
TIMELINE_POINTS = 1500
SNAPSHOT = "cuda_memory_snapshot.pickle"


class TorchMemory(Backend):
    name = "torch-memory"
    kind = "tracer"
    #: torch's memory profile tells a tensor's category from the allocations it saw: one
    #: started at a step's end counted the gradients made before it twice (a pass of its
    #: own, from the script's start)
    windowed = False
    #: its analysis builds a graph of every tensor of every operator: 25 steps of a small
    #: GPT took 21.6 GB and a SIGKILL (a script's Python-heavy set-up adds its own events)
    most_steps = 6
    measures = ("memory by what holds it (parameters, gradients, optimizer state, "
                "activations, temporaries) per step and device, at each step's end and peak")
    native_file = f"{SNAPSHOT} (pytorch.org/memory_viz; CUDA only)"
    imports = ("torch", "torch._dynamo")
    requires = (("torch", "torch"),)

    def start(self, ctx: PassContext) -> None:
        import torch
        from torch.profiler import ProfilerActivity, profile

        self._torch = torch
        self._cuda = torch.cuda.is_available()
        if self._cuda:
            torch.cuda.memory._record_memory_history(max_entries=100_000)
        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if self._cuda else [])
        self._profile = profile(activities=activities, record_shapes=True,
                                profile_memory=True, with_stack=True)
        # torch's events are on the Unix clock (ns), the pass's steps on perf_counter's
        self._unix_offset = time.time_ns() - time.perf_counter_ns()
        self._marks = [time.perf_counter()]
        self._profile.start()

    def step(self) -> None:
        self._marks.append(time.perf_counter())

    def steps_found(self, marks: Sequence[float]) -> None:
        self._marks = [self._marks[0], *marks]

    def stop(self, ctx: PassContext) -> None:
        self._profile.stop()
        self._marks.append(time.perf_counter())
        if self._cuda:
            self._snapshot = ctx.artifact_path(SNAPSHOT)
            with utf8_path(self._snapshot) as path:
                self._torch.cuda.memory._dump_snapshot(path)
            self._torch.cuda.memory._record_memory_history(enabled=None)

    def collect(self, ctx: PassContext) -> Collected:
        from torch.profiler._memory_profiler import MemoryProfileTimeline

        timeline = MemoryProfileTimeline(self._profile._memory_profile())
        devices = sorted({str(key.device) for _, _, (key, _), _ in timeline.timeline})
        marks = [int(mark * 1e9) + self._unix_offset for mark in self._marks]
        rows: list[list[Any]] = []
        entries: list[list[Any]] = []
        for device in devices:
            times, sizes = timeline._coalesce_timeline(device)
            held = _by_category(sizes)
            rows += device_rows(device, times, held, marks)
            entries += _timeline(device, times, held, marks[0])
        artifacts = []
        if self._cuda:
            relative = str(self._snapshot.relative_to(ctx.artifacts_dir.parent))
            artifacts.append(Artifact(self.name, relative, "pytorch.org/memory_viz",
                                      "open https://pytorch.org/memory_viz and drop "
                                      "{run_dir}/" + relative))
        return Collected(rows=rows, timeline=entries, artifacts=artifacts)


def _by_category(sizes: list[list[int]]) -> dict[str, list[int]]:
    """torch's rows of sizes (a column per category, after one unused) by category name."""
    from torch.profiler._memory_profiler import _CATEGORY_TO_INDEX

    return {CATEGORY_NAMES[category.name if category else None]: [size[index + 1]
                                                                  for size in sizes]
            for category, index in _CATEGORY_TO_INDEX.items()}


def _rows_at(held: dict[str, list[int]], at: int, stat: str, parent: str) -> list[list[Any]]:
    return [row("held_memory", name, "bytes", values[at], stat=stat, parent=parent)
            for name, values in held.items()]


def _maxima(held: dict[str, list[int]], within: Sequence[int], parent: str
            ) -> list[list[Any]]:
    """Each category's own largest bytes over `within` (stat `max`): the activations at the
    end of the forward, though the total peaks in the backward."""
    return [row("held_memory", name, "bytes", max(values[at] for at in within), stat="max",
                parent=parent) for name, values in held.items()]


def device_rows(device: str, times: list[int], held: dict[str, list[int]],
                marks: list[int]) -> list[list[Any]]:
    """The whole pass's peak and each step's end and peak; `times` in µs, `marks` (the
    pass's start, each step's end, its stop) in ns of the same clock."""
    if not times:
        return []
    totals = [sum(values) for values in zip(*held.values(), strict=True)]
    peak = max(range(len(totals)), key=totals.__getitem__)
    rows = [*_rows_at(held, peak, "at_peak", device), *_maxima(held, range(len(times)), device),
            row("held_memory", "total", "peak_memory", totals[peak], parent=device)]
    steps = marks[1:-1]
    position = 0
    for number, (begin, end) in enumerate(zip([marks[0], *steps], steps, strict=False), 1):
        inside = []
        while position < len(times) and times[position] * 1000 <= end:
            if times[position] * 1000 >= begin:
                inside.append(position)
            position += 1
        if not inside:
            continue
        parent = f"{device}/step {number}"
        high = max(inside, key=totals.__getitem__)
        rows += [*_rows_at(held, inside[-1], "at_end", parent),
                 *_rows_at(held, high, "at_peak", parent), *_maxima(held, inside, parent),
                 row("held_memory", "total", "peak_memory", totals[high], parent=parent)]
    return rows


def _timeline(device: str, times: list[int], held: dict[str, list[int]], start_ns: int
              ) -> list[list[Any]]:
    """Each category's bytes over time (s since the pass started), at most TIMELINE_POINTS
    points, the peak among them."""
    if not times:
        return []
    totals = [sum(values) for values in zip(*held.values(), strict=True)]
    every = max(1, len(times) // TIMELINE_POINTS)
    kept = sorted({*range(0, len(times), every), max(range(len(times)),
                                                     key=totals.__getitem__)})
    return [[f"held_memory:{device}", name, (times[at] * 1000 - start_ns) / 1e9,
             (times[at] * 1000 - start_ns) / 1e9, values[at], "B"]
            for name, values in held.items() if any(values) for at in kept]
