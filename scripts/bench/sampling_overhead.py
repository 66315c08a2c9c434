"""What sampling costs the target, against what tracing costs it (issue 25's goal: the
py-spy pass under 5% over the clean pass at the default rate), measured two ways in one
run, interleaved round by round, one thread:

- profile-all's own figure: `profile-all run DEMO -b wallclock -b py-spy -b cprofile
  --pass-steps all`, each pass's median step time over the clean timing pass's (the
  passes' `overhead` in meta.json), at the default rate and at 100 samples a second;
- whole commands, outside profile-all: the demo bare against the demo under
  `py-spy record` (blocking, as profile-all runs it) at the same rates.

    OMP_NUM_THREADS=1 python scripts/bench/sampling_overhead.py [--rounds 5] [--steps 300]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "scripts" / "examples" / "train_mlp.py"
sys.path.insert(0, str(ROOT / "src"))
from profile_all.backends.py_spy import DEFAULT_RATE  # noqa: E402
from profile_all.backends.py_spy_recorder import binary  # noqa: E402

RATES = (DEFAULT_RATE, 100)


def _overheads(out: Path, steps: int, rate: int) -> dict[str, float]:
    subprocess.run([sys.executable, "-m", "profile_all", "run", str(DEMO), "-b", "wallclock",
                    "-b", "py-spy", "-b", "cprofile", "--pass-steps", "all",
                    "--py-spy-rate", str(rate), "-q", "-o", str(out), "--", "--steps",
                    str(steps)], check=True, capture_output=True)
    passes = json.loads((out / "meta.json").read_text())["passes"]
    return {p["backends"][0]: p["overhead"] for p in passes if not p["timing"]}


def _wall(command: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run(command, check=True, capture_output=True)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=300)
    args = parser.parse_args()
    passes: dict[str, list[float]] = {}
    whole: dict[str, list[float]] = {}
    demo = [sys.executable, str(DEMO), "--steps", str(args.steps)]
    with tempfile.TemporaryDirectory() as scratch:
        for round_index in range(args.rounds):
            for rate in RATES:
                found = _overheads(Path(scratch) / f"r{round_index}-{rate}", args.steps, rate)
                passes.setdefault(f"py-spy at {rate}/s", []).append(found["py-spy"])
                passes.setdefault(f"cprofile (beside {rate}/s)", []).append(found["cprofile"])
            bare = _wall(demo)
            for rate in RATES:
                sampled = _wall([binary() or "py-spy", "record", "--rate", str(rate),
                                 "--format", "speedscope", "--output",
                                 str(Path(scratch) / "s.json"), "--", *demo])
                whole.setdefault(f"py-spy record at {rate}/s", []).append(sampled / bare)
            print(f"round {round_index + 1}/{args.rounds} done", flush=True)
    print(f"\n{platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
          f"OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')}, "
          f"{args.rounds} rounds, demo --steps {args.steps}, default rate {DEFAULT_RATE}/s")
    print("  a pass's median step time over the clean pass's (profile-all's overhead):")
    for label, values in passes.items():
        print(f"    {label:26} median {statistics.median(values):.3f}x, "
              f"min {min(values):.3f}x, max {max(values):.3f}x")
    print("  the whole demo under py-spy over the bare demo (outside profile-all):")
    for label, values in whole.items():
        print(f"    {label:26} median {statistics.median(values):.3f}x, "
              f"min {min(values):.3f}x, max {max(values):.3f}x")
    print(f"  goal: py-spy at {DEFAULT_RATE}/s under 1.05x")


if __name__ == "__main__":
    main()
