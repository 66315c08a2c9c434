"""Whether the clean timing pass's steps, with the other passes in windows of them, still
measure what a bare run measures: a training loop times its own steps bare (`python`),
profile-all's default run reports its clean steps' median (the windows left out);
interleaved, one thread; prints each pair and the ratio of the medians. Issue 39's
check: within the noise between bare runs (also printed).

    OMP_NUM_THREADS=1 python scripts/bench/clean_steps.py [--rounds 5] [-- -b wallclock]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

LOOP = '''
import statistics, sys, time, torch
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10))
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
x, y = torch.randn(64, 256), torch.randint(0, 10, (64,))
STEPS = int(sys.argv[1])
ends = [time.perf_counter()]
for _ in range(STEPS):
    loss = torch.nn.functional.cross_entropy(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    ends.append(time.perf_counter())
steps = [b - a for a, b in zip(ends, ends[1:])][1:]
print("median_step", statistics.median(steps))
'''


def _bare(script: Path, steps: int) -> float:
    out = subprocess.run([sys.executable, str(script), str(steps)], capture_output=True,
                         text=True, check=True).stdout
    return float(out.split("median_step")[1].split()[0])


def _profiled(script: Path, out: Path, options: list[str], steps: int) -> float:
    subprocess.run([sys.executable, "-m", "profile_all", "run", *options, str(script), "-o",
                    str(out), "--", str(steps)], capture_output=True, check=True)
    import profile_all as pa

    frame = pa.load(out).frame
    picked = frame[(frame["backend"] == "wallclock") & (frame["scope"] == "step")
                   & (frame["metric"] == "wall_time") & (frame["stat"] == "median")]
    return float(picked["value"].item())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=2000,
                        help="steps of about 0.7 ms (200: py-spy's window of a second takes "
                             "every step after the tracers', the clean ones are the first)")
    parser.add_argument("options", nargs="*", help="options for profile-all run (after --)")
    args = parser.parse_args()
    rounds = args.rounds
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    bare, profiled = [], []
    with tempfile.TemporaryDirectory() as scratch:
        script = Path(scratch) / "loop.py"
        script.write_text(LOOP)
        for number in range(rounds):
            bare.append(_bare(script, args.steps))
            profiled.append(_profiled(script, Path(scratch) / f"run{number}", args.options,
                                      args.steps))
            print(f"round {number}: bare {bare[-1] * 1e3:.3f} ms, clean steps "
                  f"{profiled[-1] * 1e3:.3f} ms")
    spread = (max(bare) - min(bare)) / statistics.median(bare)
    print(f"clean steps / bare: {statistics.median(profiled) / statistics.median(bare):.3f} "
          f"(bare runs spread {spread:.1%} between them)")


if __name__ == "__main__":
    main()
