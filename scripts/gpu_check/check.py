"""`make gpu-check`: every GPU path of profile-all end to end, with a verdict table.

On a machine with a CUDA GPU each check profiles a real workload (the scripts beside this
one) and compares what profile-all reports with an independent figure; on a machine
without one every check says it was skipped, and why. Exit code 1 when a check failed.

    python scripts/gpu_check/check.py [--out DIR]
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import profile_all as pa

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]


@dataclass
class Verdict:
    check: str
    verdict: str  # pass, FAIL, skipped
    measured: str
    why: str = ""


def _value(report, **criteria) -> float:
    rows = report.frame
    criteria.setdefault("stat", "total")
    for column, wanted in criteria.items():
        rows = rows[rows[column] == wanted]
    return float(rows["value"].iloc[0])


def cuda_events_against_the_wall_clock(out: Path) -> Verdict:
    """~10 ms matmuls synchronised in their region: device time by events within 3% of the
    host's wall clock around the same work."""
    report = pa.run(HERE / "matmuls.py", backends=["wallclock", "cuda-events"],
                    out=out / "cuda_events")
    wall = _value(report, backend="wallclock", scope="region", name="matmul",
                  metric="wall_time", stat="median")
    device = _value(report, backend="cuda-events", scope="region", name="matmul",
                    metric="gpu_time", stat="median")
    gap = device / wall - 1
    return Verdict("cuda-events vs synchronised wall clock", "pass" if abs(gap) <= 0.03
                   else "FAIL", f"median {device * 1e3:.2f} ms vs {wall * 1e3:.2f} ms "
                   f"({gap:+.1%}, within 3%)")


def kernel_to_operator_join(out: Path) -> Verdict:
    """torch.profiler with CUDA activity: at least 95% of the device time reaches an
    operator through correlation ids on a live trace, and the top operator is a conv."""
    report = pa.run(HERE / "train_cuda.py", backends=["torch-profiler"],
                    out=out / "torch_profiler")
    share = _value(report, scope="run", name="trace", metric="attributed_share",
                   stat="value")
    operators = report.operators()
    top = operators["name"].iloc[0] if not operators.empty else "none"
    ok = share >= 0.95 and "conv" in top
    return Verdict("torch.profiler kernel -> operator join", "pass" if ok else "FAIL",
                   f"attributed {share:.1%} (>= 95%); top operator by device time: {top}")


def nvtx_ranges(out: Path) -> Verdict:
    import torch

    depth = torch.cuda.nvtx.range_push("gpu-check")
    torch.cuda.nvtx.range_pop()
    return Verdict("NVTX ranges (torch.cuda.nvtx)", "pass" if depth >= 0 else "FAIL",
                   f"range_push returned depth {depth}")


def _model(out: Path, name: str, dtype: str) -> pa.Report:
    return pa.profile_model(f"{HERE / 'models.py'}:conv_net",
                            input_shapes=[(32, 3, 128, 128)], device="cuda", dtype=dtype,
                            backends=["flop-counter"], out=out / name)


def model_on_the_gpu(out: Path) -> Verdict:
    """`profile-all model --device cuda` in float32 and bfloat16: timed by CUDA events,
    with achieved FLOP/s from flop-counter's count."""
    measured, ok = [], True
    for dtype in ("float32", "bfloat16"):
        report = _model(out, f"model_{dtype}", dtype)
        clock = report.meta.model.get("clock")
        achieved = _value(report, backend="derived", scope="model", metric="achieved_flops",
                          stat="value")
        median = _value(report, backend="bench", scope="model", metric="latency",
                        stat="median")
        ok &= clock == "cuda_events" and achieved > 0
        measured.append(f"{dtype}: {median * 1e3:.3g} ms, {achieved / 1e12:.3g} TFLOP/s "
                        f"({clock})")
    return Verdict("profile-all model --device cuda", "pass" if ok else "FAIL",
                   "; ".join(measured))


def batch_search_through_an_oom(out: Path) -> Verdict:
    """--batch-size auto on a model of 8 GiB of activations a sample: the search meets an
    out-of-memory, frees it, bisects, and reports the largest batch that fit."""
    report = pa.profile_model(f"{HERE / 'models.py'}:wide_activations",
                              input_shapes=[(1, 1, 2048, 2048)], device="cuda",
                              batch_size="auto", backends=[], out=out / "batch_search")
    batches = report.batches()
    sizes = list(batches["batch_size"])
    bisected = any(size & (size - 1) for size in sizes)  # a size that is not a power of 2
    ok = report.exit_code == 0 and len(sizes) >= 2
    return Verdict("batch-size search through an OOM", "pass" if ok else "FAIL",
                   f"batches tried {sizes}, best {report.meta.model.get('best_batch_size')}"
                   f"{', bisected after the OOM' if bisected else ''}")


def two_ranks_with_nccl(out: Path) -> Verdict:
    import torch

    if torch.cuda.device_count() < 2:
        return Verdict("two ranks with NCCL", "skipped", "",
                       f"{torch.cuda.device_count()} GPU here, 2 needed")
    report = pa.run(HERE / "ddp_nccl.py", backends=["wallclock", "torch-profiler"],
                    nproc_per_node=2, out=out / "nccl", timeout=300)
    ranks = sorted(report.frame["rank"].unique())
    nccl = report.kernels()["name"].str.contains("nccl", case=False).any()
    ok = report.exit_code == 0 and ranks == [0, 1] and nccl
    return Verdict("two ranks with NCCL", "pass" if ok else "FAIL",
                   f"ranks {ranks}, NCCL kernels in the trace: {nccl}")


def nsys_pass(out: Path) -> Verdict:
    if shutil.which("nsys") is None:
        return Verdict("-b nsys", "skipped", "", "nsys not found on PATH")
    report = pa.run(HERE / "train_cuda.py", backends=["nsys"], out=out / "nsys")
    forward = _value(report, backend="nsys", scope="region", name="forward",
                     metric="gpu_time")
    kernels = len(report.kernels())
    ok = report.exit_code == 0 and forward > 0 and kernels > 0
    return Verdict("-b nsys (NVTX ranges, kernels)", "pass" if ok else "FAIL",
                   f"forward's projected GPU time {forward * 1e3:.3g} ms, {kernels} kernels")


def gpu_tests(out: Path) -> Verdict:
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-m", "gpu", "-p",
                           "no:cacheprovider"], cwd=REPO, capture_output=True, text=True)
    last = (done.stdout.strip().splitlines() or [""])[-1]
    return Verdict("pytest -m gpu", "pass" if done.returncode == 0 else "FAIL", last)


CHECKS: list[Callable[[Path], Verdict]] = [
    cuda_events_against_the_wall_clock, kernel_to_operator_join, nvtx_ranges,
    model_on_the_gpu, batch_search_through_an_oom, two_ranks_with_nccl, nsys_pass,
    gpu_tests]


def _title(check: Callable[[Path], Verdict]) -> str:
    return check.__name__.replace("_", " ")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path,
                        default=REPO / "reports" / time.strftime("gpu-check-%Y%m%d-%H%M%S"))
    options = parser.parse_args()
    import torch

    verdicts = []
    if not torch.cuda.is_available():
        why = f"CUDA not available (torch {torch.__version__}, torch.cuda.is_available() False)"
        verdicts = [Verdict(_title(check), "skipped", "", why) for check in CHECKS]
    else:
        options.out.mkdir(parents=True, exist_ok=True)
        for check in CHECKS:
            try:
                verdicts.append(check(options.out))
            except Exception as error:  # a broken path is a failed check, not a crash
                verdicts.append(Verdict(_title(check), "FAIL", "",
                                        f"{type(error).__name__}: {error}"))
            print(f"{verdicts[-1].verdict:8} {verdicts[-1].check}", flush=True)
        print(f"run directories: {options.out}")
    device = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no GPU"
    print(f"\nGPU check on {device}\n\n| check | verdict | measured | why |\n|---|---|---|---|")
    for verdict in verdicts:
        print(f"| {verdict.check} | {verdict.verdict} | {verdict.measured} | {verdict.why} |")
    return 1 if any(v.verdict == "FAIL" for v in verdicts) else 0


if __name__ == "__main__":
    sys.exit(main())
