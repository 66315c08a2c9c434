"""What does profile-all add to a two-rank run? scripts/examples/ddp_train.py, alternating
in one run:
- bare: `python -m torch.distributed.run --standalone --nproc-per-node 2 ddp_train.py`
- profiled: `profile-all run --nproc-per-node 2 -b wallclock ddp_train.py`
Prints each round's wall time of the whole command, their medians and the ratio; and, from
the report, the target's own time (the slowest rank's) against the command's, i.e. what
launching, collecting and writing the report cost.

    python scripts/bench/ddp_overhead.py [--rounds 3] [--steps 50]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import profile_all as pa

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "ddp_train.py"


def _timed(argv: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run(argv, check=True, capture_output=True)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=50)
    args = parser.parse_args()
    script_args = ["--steps", str(args.steps)]
    bare, profiled, target = [], [], []
    with tempfile.TemporaryDirectory() as scratch:
        for round_index in range(args.rounds):
            bare.append(_timed([sys.executable, "-m", "torch.distributed.run", "--standalone",
                                "--nproc-per-node", "2", str(EXAMPLE), *script_args]))
            out = Path(scratch) / f"run{round_index}"
            profiled.append(_timed([sys.executable, "-m", "profile_all", "run",
                                    "--nproc-per-node", "2", "-b", "wallclock", "-o", str(out),
                                    str(EXAMPLE), "--", *script_args]))
            target.append(pa.load(out).meta.passes[0].target_wall_time)
            print(f"round {round_index + 1}: bare torchrun {bare[-1]:.2f} s, profile-all "
                  f"{profiled[-1]:.2f} s (target {target[-1]:.2f} s)")
    bare_median, profiled_median = statistics.median(bare), statistics.median(profiled)
    print(f"median: bare torchrun {bare_median:.2f} s, profile-all -b wallclock "
          f"{profiled_median:.2f} s, ratio {profiled_median / bare_median:.2f}x; the target "
          f"itself {statistics.median(target):.2f} s")


if __name__ == "__main__":
    main()
