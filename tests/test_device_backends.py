"""cuda-events and nsys: what can be checked without a GPU or Nsight Systems, and the GPU
checks themselves (marked gpu, skipped where CUDA is absent)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch

import profile_all as pa
from conftest import TARGETS, profile_all
from profile_all import regions
from profile_all.backends.base import PassContext
from profile_all.backends.cuda_events import CudaEvents
from profile_all.backends.nsys import TRACE, Nsys


@pytest.fixture
def ctx(tmp_path) -> PassContext:
    (tmp_path / "artifacts").mkdir()
    return PassContext(pass_index=3, artifacts_dir=tmp_path / "artifacts", scratch_dir=tmp_path)


@pytest.mark.skipif(torch.cuda.is_available(), reason="CUDA is available here")
def test_cuda_events_unavailable_without_cuda_says_why(tmp_path):
    ok, reason = CudaEvents.available()
    assert not ok and reason.startswith("CUDA not available")
    result = profile_all("run", TARGETS / "contract.py", "-b", "cuda-events", cwd=tmp_path)
    assert result.returncode == 2
    assert "no requested backend can run here: cuda-events: CUDA not available" in result.stderr


@pytest.mark.skipif(shutil.which("nsys") is not None, reason="nsys is installed here")
def test_default_run_lists_the_skipped_backends_with_reasons(tmp_path):
    report = pa.run(TARGETS / "contract.py", out=tmp_path / "run")
    skipped = report.meta.skipped_backends
    assert skipped["nsys"] == "nsys not found on PATH (Nsight Systems is not installed)"
    if not torch.cuda.is_available():
        assert skipped["cuda-events"].startswith("CUDA not available")
    assert "backend nsys skipped: nsys not found on PATH" in (
        tmp_path / "run" / "summary.md").read_text()
    assert [p.backends for p in report.meta.passes] == [
        ["wallclock", "memory"], ["cprofile"], ["torch-profiler"], ["flop-counter"],
        ["py-spy"]]


def test_nsys_command_lines(ctx):
    nsys = Nsys()
    worker = ["python", "-m", "profile_all.runner.inside.worker", "/run/scratch/pass3.spec.json"]
    command = nsys.wrap(worker, ctx)
    base = str(ctx.artifacts_dir / "nsys")
    assert Path(command[0]).name == "nsys"
    assert command[1:] == ["profile", "--trace", TRACE, "--force-overwrite", "true",
                           "--output", base, *worker]
    assert TRACE == "cuda,nvtx,osrt,cudnn,cublas"
    export = nsys.export_command(ctx)
    assert export[1:] == ["export", "--type", "sqlite", "--force-overwrite", "true",
                          "--output", f"{base}.sqlite", f"{base}.nsys-rep"]
    several = PassContext(pass_index=3, artifacts_dir=ctx.artifacts_dir,
                          scratch_dir=ctx.scratch_dir, rank=1, world_size=2)
    assert nsys.wrap(worker, several)[7] == str(ctx.artifacts_dir / "nsys.rank1")


def test_nvtx_ranges_for_regions_and_modules(ctx):
    """With the nvtx package (no tool attached, so nothing to read back): the hooks run
    inside a real forward pass and are removed at stop."""
    from torch.nn.modules import module

    hooks_before = (len(module._global_forward_pre_hooks), len(module._global_forward_hooks))
    nsys = Nsys({"module_ranges": True})
    nsys.start(ctx)
    regions.listen([nsys])
    try:
        with pa.region("forward"):
            output = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU())(torch.ones(2, 4))
        pa.step()
    finally:
        regions.listen(())
        nsys.stop(ctx)
    assert output.shape == (2, 4)
    assert (len(module._global_forward_pre_hooks), len(module._global_forward_hooks)) == \
        hooks_before


@pytest.mark.gpu
def test_cuda_events_agree_with_a_synchronised_wall_clock(tmp_path):
    """10 ms matmul regions: the device time by events and the host time with a
    synchronisation around each region should agree within a few percent."""
    script = tmp_path / "matmul_loop.py"
    script.write_text(
        "import time, torch\nimport profile_all as pa\n"
        "a = torch.randn(4096, 4096, device='cuda'); b = torch.randn(4096, 4096, device='cuda')\n"
        "for _ in range(30):\n"
        "    torch.cuda.synchronize()\n"
        "    with pa.region('matmul'):\n"
        "        for _ in range(10): c = a @ b\n"
        "        torch.cuda.synchronize()\n"
        "    pa.step()\n")
    report = pa.run(script, backends=["wallclock", "cuda-events", "torch-profiler"],
                    out=tmp_path / "run", options={"cuda-events": {"warmup_steps": 5}})
    frame = report.frame

    def median(backend, metric):
        picked = frame[(frame["backend"] == backend) & (frame["name"] == "matmul")
                       & (frame["metric"] == metric) & (frame["stat"] == "median")]
        return picked["value"].item()

    events, host = median("cuda-events", "gpu_time"), median("wallclock", "wall_time")
    assert events == pytest.approx(host, rel=0.05)
    assert report.kernels()["gpu_time"].sum() > 0  # torch.profiler saw CUDA activity
    excluded = frame[(frame["backend"] == "cuda-events") & (frame["metric"]
                                                            == "warmup_steps_excluded")]
    assert excluded["value"].item() == 5
