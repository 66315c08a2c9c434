"""How `profile-all compare` does on this machine: A/A pairs (the same script twice, back to
back) must say "no change", and a real 20% slowdown of one region must be caught.

The target is tests/targets/cnn_regions.py, a small CNN training loop on CPU with four
regions (data, forward, backward, optimizer) and 30 steps; the slowdown is a sleep of 20%
of the forward region's own time. Every run is `profile-all run -b wallclock --repeat R`.
Printed: for each R, the share of regions (and the step) called "no change" in A/A pairs,
and how often the slowed region was called "slower", with the intervals' median width.

    python scripts/bench/compare_noise.py [--repeats 3 8] [--pairs 2]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

TARGET = Path(__file__).resolve().parents[2] / "tests" / "targets" / "cnn_regions.py"


def run(out: Path, repeat: int, *args: str) -> Path:
    subprocess.run([sys.executable, "-m", "profile_all", "run", str(TARGET), "-b", "wallclock",
                    "--repeat", str(repeat), "-o", str(out), "--", "30", *args],
                   check=True, capture_output=True)
    return out


def compared(a: Path, b: Path) -> list[dict]:
    done = subprocess.run([sys.executable, "-m", "profile_all", "compare", str(a), str(b),
                           "--format", "json"], check=True, capture_output=True, text=True)
    return [row for row in json.loads(done.stdout) if row["kind"] in ("region", "step")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, nargs="+", default=[3, 8])
    parser.add_argument("--pairs", type=int, default=2)
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        for repeat in options.repeats:
            same, caught, widths = [], [], []
            for pair in range(options.pairs):  # base, again, slowed: back to back
                base = run(root / f"r{repeat}p{pair}base", repeat)
                again = run(root / f"r{repeat}p{pair}again", repeat)
                slowed = run(root / f"r{repeat}p{pair}slow", repeat, "forward", "0.2")
                same += [row["verdict"] == "no change" for row in compared(base, again)]
                rows = compared(base, slowed)
                forward = next(row for row in rows if row["name"] == "forward")
                caught.append(forward["verdict"] == "slower")
                widths += [row["ci_high"] - row["ci_low"] for row in rows]
                print(f"--repeat {repeat}, pair {pair + 1}: A/A no change "
                      f"{sum(same[-len(rows):])}/{len(rows)}; forward +20%: "
                      f"{forward['change']:+.1%} ({forward['ci_low']:+.1%} .. "
                      f"{forward['ci_high']:+.1%}) {forward['verdict']}", flush=True)
            widths.sort()
            print(f"--repeat {repeat}: A/A 'no change' {sum(same)}/{len(same)} "
                  f"({sum(same) / len(same):.0%}, target >= 95%); 20% slowdown caught "
                  f"{sum(caught)}/{len(caught)}; median interval width "
                  f"{widths[len(widths) // 2]:.0%}", flush=True)


if __name__ == "__main__":
    main()
