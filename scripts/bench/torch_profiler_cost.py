"""What a torch-profiler pass costs per recorded operator, against torch.profiler itself.

A loop of `x = x + 1` on a 4-element CPU tensor (five operators an iteration as torch
records them: aten::add, aten::to, aten::_to_copy, aten::empty_strided, aten::copy_),
1,000 iterations a pa.step(), at two sizes; for each, interleaved round by round, one
thread:
- `profile-all run -b torch-profiler --pass-steps all` (the whole command: its passes,
  the trace read into rows, the report), and
- a bare script that wraps the same loop in `torch.profiler.profile()` and exports
  `trace.json.gz` as torch's docs do.
The peak is the largest resident set of the command's process tree (wait4's ru_maxrss).
Per operator = the difference between the two sizes over the difference in operators
recorded (the trace's operator calls, from the report), so what every run pays once
(imports, the server, the clean pass) drops out. Goal: the pass's peak at most 2 KB per
recorded operator.

    OMP_NUM_THREADS=1 python scripts/bench/torch_profiler_cost.py [--sizes 40000 160000]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import profile_all as pa

LOOP = """
import sys, torch
import profile_all as pa
x = torch.zeros(4)
for _ in range(int(sys.argv[1]) // 1000):
    for _ in range(1000):
        x = x + 1
    pa.step()
"""
BARE = """
import sys, torch
x = torch.zeros(4)
with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
    for _ in range(int(sys.argv[1])):
        x = x + 1
prof.export_chrome_trace(sys.argv[2])
"""


def measured(argv: list[str]) -> tuple[float, int]:
    """(wall seconds, peak RSS in bytes of the command's whole process tree)."""
    started = time.perf_counter()
    process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _pid, status, usage = os.wait4(process.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{argv} failed")
    return time.perf_counter() - started, usage.ru_maxrss * 1024


def operators(run_dir: Path) -> int:
    frame = pa.load(run_dir).frame
    calls = frame[(frame["scope"] == "operator") & (frame["metric"] == "calls")]
    return int(calls["value"].sum())


def slope(low: tuple[float, int], high: tuple[float, int], ops: list[int]
          ) -> tuple[float, float]:
    """(seconds, peak bytes) per operator between the small and the large size."""
    return (high[0] - low[0]) / (ops[1] - ops[0]), (high[1] - low[1]) / (ops[1] - ops[0])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs=2, default=[40_000, 160_000],
                        help="iterations of the loop, small and large")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    found: dict[str, list[tuple[float, float]]] = {"pass": [], "torch": []}
    with tempfile.TemporaryDirectory() as scratch:
        out = Path(scratch)
        (out / "loop.py").write_text(LOOP)
        (out / "bare.py").write_text(BARE)
        for round_index in range(args.rounds):
            runs, ops = {"pass": [], "torch": []}, []
            for size in args.sizes:
                run_dir = out / f"r{round_index}-{size}"
                runs["pass"].append(measured([
                    sys.executable, "-m", "profile_all", "run", str(out / "loop.py"), "-b",
                    "torch-profiler", "--pass-steps", "all", "-q", "-o", str(run_dir), "--",
                    str(size)]))
                ops.append(operators(run_dir))
                runs["torch"].append(measured([sys.executable, str(out / "bare.py"), str(size),
                                               str(out / "bare.json.gz")]))
            for side in runs:
                found[side].append(slope(*runs[side], ops))
            print(f"round {round_index + 1}/{args.rounds}: {ops[0]:,} and {ops[1]:,} "
                  f"operators; the pass {runs['pass']}, torch.profiler {runs['torch']}",
                  flush=True)
    print(f"\n{os.cpu_count()} cores, OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS')}, "
          f"{args.rounds} rounds, interleaved; per recorded operator (median):")
    for side, what in (("pass", "profile-all run -b torch-profiler"),
                       ("torch", "torch.profiler + export .json.gz")):
        seconds = statistics.median(s for s, _b in found[side])
        peak = statistics.median(b for _s, b in found[side])
        print(f"  {what}: {seconds * 1e6:.1f} us, peak {peak / 1024:.2f} KB")
    ratio = statistics.median(p[1] / t[1] for p, t in zip(found["pass"], found["torch"],
                                                            strict=True))
    print(f"  the pass's peak per operator / torch.profiler's own: {ratio:.2f} "
          f"(goal: the pass at most 2 KB)")


if __name__ == "__main__":
    main()
