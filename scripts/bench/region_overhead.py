"""Cost of one `pa.region` enter+exit: outside profile-all, and under the wallclock pass,
beside `torch.profiler.record_function` and an NVTX push/pop pair, measured in one run.

Targets (issue 2): under 0.3 µs outside profile-all; under 1 µs under the wallclock pass,
and at least 10x cheaper than record_function.

    python scripts/bench/region_overhead.py [--number 200000]
"""

from __future__ import annotations

import argparse
import platform
import tempfile
import timeit
from collections.abc import Callable
from pathlib import Path

import torch

import profile_all as pa
from profile_all import regions
from profile_all.backends.base import PassContext, listen_to
from profile_all.backends.wallclock import WallClock


def per_call_ns(body: Callable[[], None], number: int, repeat: int = 5) -> float:
    """Best of `repeat` runs of `number` calls of `body`, less the cost of calling a no-op."""
    def empty() -> None:
        pass

    best = min(timeit.repeat(body, number=number, repeat=repeat))
    floor = min(timeit.repeat(empty, number=number, repeat=repeat))
    return (best - floor) / number * 1e9


def region_once() -> None:
    with pa.region("bench"):
        pass


def record_function_once() -> None:
    with torch.profiler.record_function("bench"):
        pass


def under_wallclock(cpu_time: bool, number: int, nested: bool = False) -> float:
    """ns per region in a wallclock pass, routed as a pass routes it; `nested`: inside
    an open region, as most regions are."""
    with tempfile.TemporaryDirectory() as scratch:
        ctx = PassContext(pass_index=1, artifacts_dir=Path(scratch), scratch_dir=Path(scratch))
        clock = WallClock({"cpu_time": cpu_time})
        clock.start(ctx)
        listen_to([clock], ctx)
        try:
            if not nested:
                return per_call_ns(region_once, number)
            with pa.region("outer"):
                return per_call_ns(region_once, number)
        finally:
            regions.listen(())
            clock.stop(ctx)
            clock.collect(ctx)


def nvtx_pair() -> tuple[str, Callable[[], None]] | None:
    try:
        from nvtx import pop_range, push_range
    except ImportError:
        return None

    def pair() -> None:
        push_range("bench")
        pop_range()

    return "nvtx package push_range/pop_range", pair


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--number", type=int, default=200_000)
    number = parser.parse_args().number

    results = {
        "pa.region, outside profile-all": per_call_ns(region_once, number),
        "pa.region, wallclock pass (default)": under_wallclock(False, number),
        "pa.region, wallclock pass (--region-cpu-time)": under_wallclock(True, number),
        "record_function, no profiler running": per_call_ns(record_function_once, number),
    }
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]):
        results["record_function, inside torch.profiler"] = per_call_ns(
            record_function_once, number // 10)
    nvtx = nvtx_pair()
    if nvtx:
        results[nvtx[0]] = per_call_ns(nvtx[1], number)
    else:
        print("nvtx package not installed (pip install nvtx): NVTX pair not measured")

    print(f"{platform.processor() or platform.machine()}, Python {platform.python_version()}, "
          f"torch {torch.__version__}; {number} calls per run, best of 5, no-op call subtracted")
    for what, ns in results.items():
        print(f"  {what:52s} {ns:8.0f} ns")

    outside = results["pa.region, outside profile-all"]
    record_function = results["record_function, no profiler running"]
    print("targets:")
    for label, cpu_key in (("default", "pa.region, wallclock pass (default)"),
                           ("--region-cpu-time", "pa.region, wallclock pass (--region-cpu-time)")):
        under = results[cpu_key]
        print(f"  wallclock pass {label}: {under / 1000:.2f} µs (target < 1 µs: "
              f"{'met' if under < 1000 else 'NOT met'}); record_function / region = "
              f"{record_function / under:.1f}x (target >= 10x: "
              f"{'met' if record_function / under >= 10 else 'NOT met'})")
    print(f"  outside profile-all: {outside / 1000:.3f} µs (target < 0.3 µs: "
          f"{'met' if outside < 300 else 'NOT met'})")


if __name__ == "__main__":
    main()
