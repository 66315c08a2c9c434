"""nsys (wrapper): Nsight Systems around the whole pass, with an NVTX range per region.

The pass is launched as `nsys profile -t cuda,nvtx,osrt,cudnn,cublas ... -o
artifacts/nsys python -m profile_all.runner.inside.worker SPEC` (an argv list, no shell).
Inside, every `pa.region` pushes and pops an NVTX range (torch.cuda.nvtx on a CUDA build
of torch, the `nvtx` package otherwise), and with `module_ranges` every nn.Module forward
does too.

The report file exists only once nsys has exited, so the rows are made in the
orchestrator, by `finish`: `nsys export --type sqlite`, then the sqlite reader (NVTX
ranges with their projected GPU time, kernels). `nsys.nsys-rep` opens in the Nsight
Systems GUI: `nsys-ui artifacts/nsys.nsys-rep`.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable
from typing import Any

from profile_all.backends.base import Artifact, Backend, Collected, Option, PassContext
from profile_all.errors import ProfileAllError

TRACE = "cuda,nvtx,osrt,cudnn,cublas"
EXPORT_TIMEOUT_SECONDS = 600


def nvtx_functions() -> tuple[Callable[[str], Any], Callable[[], Any]] | None:
    """(push, pop): torch.cuda.nvtx where torch was built with CUDA, else the nvtx package."""
    try:
        import torch

        if torch.version.cuda is not None:
            return torch.cuda.nvtx.range_push, torch.cuda.nvtx.range_pop
    except ImportError:
        pass
    try:
        from nvtx import pop_range, push_range
    except ImportError:
        return None
    return push_range, pop_range


class Nsys(Backend):
    name = "nsys"
    kind = "wrapper"
    sees_children = True
    offered_options = (Option("module_ranges", "--nvtx-modules", (bool,), False,
                              "nsys: an NVTX range per nn.Module forward too"),)
    measures = "NVTX ranges with the GPU time of the kernels launched in them, kernels"
    native_file = "nsys.nsys-rep (Nsight Systems: nsys-ui), nsys.sqlite"

    @classmethod
    def available(cls) -> tuple[bool, str]:
        if shutil.which("nsys") is None:
            return False, "nsys not found on PATH (Nsight Systems is not installed)"
        return True, ""

    def report_base(self, ctx: PassContext) -> str:
        return str(ctx.artifact_path("nsys"))  # nsys adds .nsys-rep

    def wrap(self, argv: list[str], ctx: PassContext) -> list[str]:
        return [shutil.which("nsys") or "nsys", "profile", "--trace", TRACE,
                "--force-overwrite", "true", "--output", self.report_base(ctx), *argv]

    def export_command(self, ctx: PassContext) -> list[str]:
        base = self.report_base(ctx)
        return [shutil.which("nsys") or "nsys", "export", "--type", "sqlite",
                "--force-overwrite", "true", "--output", f"{base}.sqlite", f"{base}.nsys-rep"]

    def start(self, ctx: PassContext) -> None:
        functions = nvtx_functions()
        if functions is None:
            raise ProfileAllError("no NVTX: torch is not a CUDA build and the nvtx package is "
                                  "not installed (pip install nvtx)")
        self._push, self._pop = functions
        self._hooks = []
        if self.options.get("module_ranges"):
            from torch.nn.modules import module

            self._hooks = [
                module.register_module_forward_pre_hook(
                    lambda mod, args: self._push(type(mod).__name__)),
                module.register_module_forward_hook(lambda mod, args, out: self._pop()),
            ]

    def enter(self, name: str, parent: str) -> None:
        self._push(name)

    def exit(self, name: str, parent: str, token: Any) -> None:
        self._pop()

    def stop(self, ctx: PassContext) -> None:
        for hook in self._hooks:
            hook.remove()

    def finish(self, ctx: PassContext) -> Collected:
        """In the orchestrator, after nsys exited: export the report and read it."""
        from profile_all.readers.nsys_sqlite import read_nsys

        base = self.report_base(ctx)
        exported = subprocess.run(self.export_command(ctx), capture_output=True, text=True,
                                  timeout=EXPORT_TIMEOUT_SECONDS)
        if exported.returncode != 0:
            raise ProfileAllError(f"nsys export failed ({exported.returncode}): "
                                  f"{exported.stderr.strip()[-500:]}")
        run_relative = ctx.artifacts_dir.name
        name = ctx.artifact_path("nsys").name
        return Collected(read_nsys(f"{base}.sqlite"), [
            Artifact(self.name, f"{run_relative}/{name}.nsys-rep", "Nsight Systems",
                     f"nsys-ui {{run_dir}}/{run_relative}/{name}.nsys-rep"),
            Artifact(self.name, f"{run_relative}/{name}.sqlite", "sqlite3, profile-all ingest",
                     f"profile-all ingest {{run_dir}}/{run_relative}/{name}.sqlite")])
