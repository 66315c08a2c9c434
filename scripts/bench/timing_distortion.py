"""How much `profile-all run -b wallclock` changes the time a training loop measures itself.

Runs scripts/bench/timed_loop.py bare (`python timed_loop.py`) and under profile-all,
alternating, and compares the medians of the loop's own timings. Target (issue 2): ratio
at most 1.03.

    python scripts/bench/timing_distortion.py [--rounds 7] [--steps 1500] \
        [--option=--region-cpu-time]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

LOOP = Path(__file__).with_name("timed_loop.py")


def loop_seconds(command: list[str]) -> float:
    output = subprocess.run(command, capture_output=True, text=True, check=True).stdout
    return float(output.split("loop_seconds=")[1].split()[0])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--steps", type=int, default=1500)
    parser.add_argument("--option", action="append", default=[],
                        help="an option for profile-all run (repeat), e.g. --region-cpu-time")
    options = parser.parse_args()
    script_args = ["--steps", str(options.steps)]

    bare, profiled = [], []
    with tempfile.TemporaryDirectory() as out:
        for round_index in range(options.rounds):
            bare.append(loop_seconds([sys.executable, str(LOOP), *script_args]))
            profiled.append(loop_seconds(
                [sys.executable, "-m", "profile_all", "run", str(LOOP), "-b", "wallclock",
                 *options.option, "-o", str(Path(out) / f"run{round_index}"), "--",
                 *script_args]))

    bare_median, profiled_median = statistics.median(bare), statistics.median(profiled)
    ratio = profiled_median / bare_median
    print(f"{options.rounds} rounds of {options.steps} steps, alternating; loop's own time:")
    print(f"  bare python:                 median {bare_median:.3f} s  "
          f"(min {min(bare):.3f}, max {max(bare):.3f})")
    print(f"  profile-all run -b wallclock {' '.join(options.option)}: median "
          f"{profiled_median:.3f} s  "
          f"(min {min(profiled):.3f}, max {max(profiled):.3f})")
    print(f"  ratio of medians {ratio:.3f} (target <= 1.03: "
          f"{'met' if ratio <= 1.03 else 'NOT met'}); ratio of minimums "
          f"{min(profiled) / min(bare):.3f}")


if __name__ == "__main__":
    main()
