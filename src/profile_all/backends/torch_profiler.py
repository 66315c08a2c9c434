"""torch-profiler (tracer): torch.profiler over the whole target, CUDA activity when present.

Writes `artifacts/torch_trace.pt.trace.json.gz` (Perfetto, TensorBoard's trace viewer,
HTA and `chrome://tracing` open it; named as `tensorboard_trace_handler` names traces,
`<worker>.pt.trace.json.gz`, so that TensorBoard's profiler plugin finds it). Its rows
come from that file through the chrome-trace reader, never from `key_averages()` (80 s
and 4.9 GB for a 570,000-event profile on 2 cores). torch gzips an export at level 9 (9.8 s
for a 129 MB trace of 500,000 operators, two thirds of the pass's cost); so the trace is
exported as plain JSON, read from that, and gzipped at level 1 (0.3 s, a file 1.4x larger).
A single process's trace is read in profile-all's process once the pass has ended
(`collect_after`), which has pandas imported already (the pass would import it: 0.2 s of
every run); the ranks of a distributed pass read their own, side by side.

Regions become `record_function` ranges, so they show in the trace and as region rows;
`pa.step()` is `prof.step()`, which drives the optional schedule (wait, warmup, active).

torch writes record_function names into the trace as they are, except that it drops
newlines, turns `\\` into `/` and writes "unknown" for non-ASCII: so a region name with
any character outside printable ASCII, or with `"`, `\\` or `%`, is percent-encoded in the
trace (`a%22b`) and decoded back in the rows, so that it matches the other backends'.

torch.profiler allows one session per process: a target that opens its own ends ours
when it closes, and exporting our session after that crashes the process (seen with
torch 2.13). So `stop` checks that our session is still the running one, and when it is
not, nothing is exported and the collision is reported as this backend's failure.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import gzip
import json
import os
import re
import shutil
from pathlib import Path
from typing import Any
from urllib.parse import quote

from profile_all import validate
from profile_all.backends.base import Artifact, Backend, Collected, Option, PassContext
from profile_all.errors import ProfileAllError
from profile_all.fileio import utf8_path

OPTION_NAMES = ("record_shapes", "profile_memory", "with_flops", "with_stack")
#: a trace this large (bytes of JSON) is read only once the memory torch held for the
#: profile has been given back (a full collection costs 0.2 s beside torch._dynamo's objects)
_FREE_FIRST = 64 * 2**20
#: what torch writes into a trace unchanged
_TRACE_SAFE = re.compile(r"[ !#$&-\[\]-~]*")


def trace_name(name: str) -> str:
    """`name` as it can travel through a trace: itself, or percent-encoded when torch would
    change it or write invalid JSON."""
    return name if _TRACE_SAFE.fullmatch(name) else quote(name, safe=" ")


class SessionCollision(ProfileAllError):
    pass


class TorchProfiler(Backend):
    name = "torch-profiler"
    kind = "tracer"
    windowed = True
    measures = ("operators (calls, self and total CPU time, device time, FLOPs, input shapes), "
                "kernels, regions")
    native_file = "torch_trace.pt.trace.json.gz (Perfetto, TensorBoard, HTA)"
    # starting a profiler session imports torch._dynamo (1.1 s on a small VM), which a
    # bare target pays when it first builds an optimizer: every pass imports it first, or
    # the torch-profiler pass would look faster than the clean timing pass
    imports = ("torch", "torch._dynamo")
    requires = (("torch", "torch"),)
    offered_options = (
        Option("record_shapes", "--record-shapes", (bool,), False,
               "torch-profiler: record operator input shapes"),
        Option("profile_memory", "--profile-memory", (bool,), False,
               "torch-profiler: record tensor allocations"),
        Option("with_flops", "--with-flops", (bool,), False,
               "torch-profiler: estimate FLOPs of matmul and conv operators"),
        Option("with_stack", "--with-stack", (bool,), False,
               "torch-profiler: record Python stacks"),
        Option("schedule", "--torch-schedule", (str, dict), None,
               "torch-profiler: skip WAIT steps, warm up WARMUP, record ACTIVE (by "
               "pa.step())", "WAIT,WARMUP,ACTIVE"))

    @classmethod
    def check_options(cls, options: dict[str, Any]) -> None:
        _schedule(options.get("schedule"))

    def start(self, ctx: PassContext) -> None:
        import torch
        from torch.profiler import ProfilerActivity, profile, schedule

        self._torch = torch
        activities = [ProfilerActivity.CPU]
        if torch.cuda.is_available():
            activities.append(ProfilerActivity.CUDA)
        steps = _schedule(self.options.get("schedule"))
        self._scheduled = bool(steps)
        self._path = ctx.artifact_path("torch_trace.pt.trace.json")  # gzipped once read
        self._exported = False
        self._collision: str | None = None
        self._encoded: dict[str, str] = {}  # trace_name(region) -> region
        self._profile = profile(
            activities=activities,
            schedule=schedule(**steps, repeat=1) if steps else None,
            on_trace_ready=self._export if steps else None,
            **{option: bool(self.options.get(option, False)) for option in OPTION_NAMES})
        # ProfilerStep#N in the trace, as torch.profiler's own step() marks them, for
        # TensorBoard's step view and HTA: from the start where the target has steps
        self._profile.record_steps = bool(steps) or bool(ctx.step_source)
        self._steps = 0
        self._ctx = ctx
        self._profile.start()

    def enter(self, name: str, parent: str) -> Any:
        traced = trace_name(name)
        if traced is not name:
            self._encoded[traced] = name
        marker = self._torch.autograd.profiler.record_function(traced)
        marker.__enter__()
        return marker

    def exit(self, name: str, parent: str, token: Any) -> None:
        token.__exit__(None, None, None)

    def step(self) -> None:
        if self._profile is None:  # ended at the window's last step
            return
        self._steps += 1
        if not self._scheduled and self._steps == self._ctx.max_steps:
            # the pass's window ends at this step: so does the profile, so that the trace
            # holds a ProfilerStep range a step (one opened now would be the pass's tail,
            # which HTA and an ingest would count as one more step)
            self._end(self._ctx)
            return
        self._profile.step()

    def _export(self, profile: Any) -> None:
        tmp = self._path.with_name(f".{os.getpid()}.{self._path.name}")  # plain JSON
        try:
            with utf8_path(tmp) as path:
                profile.export_chrome_trace(path)
            os.replace(tmp, self._path)
        finally:  # a full disk: the half-written file goes, with the space it holds
            tmp.unlink(missing_ok=True)
        self._exported = True

    def stop(self, ctx: PassContext) -> None:
        if self._profile is not None:
            self._end(ctx)

    def _end(self, ctx: PassContext) -> None:
        from torch.profiler import ProfilerAction

        recording = not self._scheduled or self._profile.current_action in (
            ProfilerAction.RECORD, ProfilerAction.RECORD_AND_SAVE)
        if recording and not self._torch.autograd.profiler._is_profiler_enabled:
            self._collision = (
                "the target opened its own torch.profiler session, which ended profile-all's "
                "(one session per process); no trace was exported. Profile it without its own "
                "profiler, or leave out -b torch-profiler")
            return
        if ctx.world_size > 1 and recording:
            self._profile.add_metadata_json("distributedInfo", json.dumps(self._rank_info(ctx)))
        self._profile.stop()
        if not self._scheduled:
            self._export(self._profile)
        # torch's events (1.6 KB each: 2.5 GB for 1.6M) are written; reading the trace back
        # needs the memory, so the profile goes before it: 1.3 GB held -> 0.1 GB
        self._profile_steps = self._profile.record_steps
        self._profile = None
        if self._exported and self._path.stat().st_size > _FREE_FIRST:
            _give_back_freed_memory()

    def _rank_info(self, ctx: PassContext) -> dict[str, Any]:
        """torch writes distributedInfo only when the process group exists as the trace
        starts, which is before the target creates it; so it is written here, as the trace
        ends, from the group when it still exists, else from torchrun's RANK."""
        dist = self._torch.distributed
        if dist.is_available() and dist.is_initialized():
            return {"backend": dist.get_backend(), "rank": dist.get_rank(),
                    "world_size": dist.get_world_size()}
        return {"rank": ctx.rank, "world_size": ctx.world_size}

    def collect(self, ctx: PassContext) -> Collected:
        if self._collision:
            raise SessionCollision(self._collision)
        if not self._exported:
            raise ProfileAllError("the schedule's active steps never ran (fewer pa.step() "
                                  "calls than wait + warmup + active): no trace")
        later = {"trace": str(self._path), "encoded": self._encoded,
                 "steps": self._steps if self._profile_steps else None}
        if ctx.world_size > 1:  # each rank reads its own, side by side
            return self.collect_after(ctx, later)
        return Collected(later=later)  # read in profile-all, which has pandas imported

    def collect_after(self, ctx: PassContext, later: dict[str, Any]) -> Collected:
        """The rows, read from the trace, which is then gzipped."""
        from profile_all.readers.chrome_trace import load
        from profile_all.readers.limits import BeyondLimits
        from profile_all.readers.trace_analysis import trace_rows

        plain = Path(later["trace"])
        gzipped = plain.with_name(plain.name + ".gz")
        relative = str(gzipped.relative_to(ctx.artifacts_dir.parent))
        artifact = Artifact(self.name, relative, "Perfetto (ui.perfetto.dev), TensorBoard, HTA",
                            "open https://ui.perfetto.dev and load {run_dir}/" + relative)
        try:  # within the readers' limits: what does not fit the free memory is not read
            trace = load(plain)
        except BeyondLimits as error:
            self.losses.append(
                f"its trace was written but not read: {error}. Open the trace in Perfetto, "
                "or trace fewer steps (--pass-steps N, --torch-schedule)")
            return Collected([], [artifact])
        finally:
            _gzipped(plain, gzipped)
        if later["steps"] is not None:
            trace.keep_steps(later["steps"])  # as many ProfilerStep ranges as steps
        rows = trace_rows(trace)
        if later["encoded"]:
            rows = [_decoded(measured, later["encoded"]) for measured in rows]
        return Collected(rows, [artifact])


def _decoded(measured: list[Any], encoded: dict[str, str]) -> list[Any]:
    """A row whose region name or parent path held encoded names, decoded."""
    scope, name, parent = measured[:3]
    if scope not in ("region", "step"):
        return measured
    name = encoded.get(name, name)
    if parent:
        parent = "/".join(encoded.get(part, part) for part in parent.split("/"))
    return [scope, name, parent, *measured[3:]]


def _gzipped(plain: Path, gzipped: Path) -> None:
    """`plain` gzipped at level 1 into `gzipped` (whole or not at all), and removed."""
    tmp = gzipped.with_name(f".{os.getpid()}.{gzipped.name}")
    with plain.open("rb") as source, gzip.open(tmp, "wb", compresslevel=1) as packed:
        shutil.copyfileobj(source, packed, 1 << 20)
    os.replace(tmp, gzipped)
    plain.unlink()


def _give_back_freed_memory() -> None:
    """glibc keeps what Python frees for reuse by the process; malloc_trim returns it, so
    that the machine's free memory says what reading the trace can have."""
    gc.collect()
    with contextlib.suppress(OSError, AttributeError):  # not glibc: it stays with the process
        ctypes.CDLL("libc.so.6").malloc_trim(0)


def _schedule(steps: dict[str, int] | str | None) -> dict[str, int] | None:
    """{"wait": W, "warmup": U, "active": A}, or the same as text "W,U,A" (--torch-schedule);
    W and U >= 0, A >= 1."""
    if isinstance(steps, str):
        try:
            wait, warmup, active = (int(part) for part in steps.split(","))
        except ValueError:
            raise validate.ArgumentValueError(
                f"the torch-profiler schedule: --torch-schedule wants WAIT,WARMUP,ACTIVE "
                f"(three integers), got {steps!r}") from None
        steps = {"wait": wait, "warmup": warmup, "active": active}
    if steps is None:
        return None
    if set(steps) != {"wait", "warmup", "active"}:
        raise validate.ArgumentValueError(
            f"the torch-profiler schedule wants wait, warmup and active, got {sorted(steps)}")
    for key, least in (("wait", 0), ("warmup", 0), ("active", 1)):
        validate.whole(f"the schedule's {key}", steps[key], least)
    return steps
