"""What sampling costs the target, against what tracing costs it (issue 25's goal: the
py-spy pass under 5% over the clean pass at the default rate), measured two ways in one
run, interleaved round by round, one thread:

- profile-all's own figure: `profile-all run SCRIPT -b wallclock -b py-spy -b cprofile
  --pass-steps all`, each pass's median step time over the clean timing pass's (the
  passes' `overhead` in meta.json), at the default rate and at 100 samples a second, on
  the demo (train_mlp.py, 2 ms steps) and train_cnn.py (20 ms steps);
- whole commands, outside profile-all: each script bare against it under `py-spy record`
  (blocking, as profile-all runs it) at the same rates.

    OMP_NUM_THREADS=1 python scripts/bench/sampling_overhead.py [--rounds 5]
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
EXAMPLES = ROOT / "scripts" / "examples"
#: the demo (2 ms steps) and a CNN (20 ms steps), their own arguments
TARGETS = {"demo": (EXAMPLES / "train_mlp.py", "300"), "cnn": (EXAMPLES / "train_cnn.py", "80")}
sys.path.insert(0, str(ROOT / "src"))
from profile_all.backends.py_spy import DEFAULT_RATE  # noqa: E402
from profile_all.backends.py_spy_recorder import binary  # noqa: E402

RATES = (DEFAULT_RATE, 100)


def _overheads(out: Path, script: Path, steps: str, rate: int) -> dict[str, float]:
    subprocess.run([sys.executable, "-m", "profile_all", "run", str(script), "-b", "wallclock",
                    "-b", "py-spy", "-b", "cprofile", "--pass-steps", "all",
                    "--py-spy-rate", str(rate), "-q", "-o", str(out), "--", "--steps",
                    steps], check=True, capture_output=True)
    passes = json.loads((out / "meta.json").read_text())["passes"]
    return {p["backends"][0]: p["overhead"] for p in passes if not p["timing"]}


def _wall(command: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run(command, check=True, capture_output=True)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    passes: dict[str, list[float]] = {}
    whole: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory() as scratch:
        for round_index in range(args.rounds):
            for name, (script, steps) in TARGETS.items():
                for rate in RATES:
                    found = _overheads(Path(scratch) / f"r{round_index}-{name}-{rate}", script,
                                       steps, rate)
                    passes.setdefault(f"{name}: py-spy at {rate}/s", []).append(found["py-spy"])
                    passes.setdefault(f"{name}: cprofile", []).append(found["cprofile"])
                command = [sys.executable, str(script), "--steps", steps]
                bare = _wall(command)
                for rate in RATES:
                    sampled = _wall([binary() or "py-spy", "record", "--rate", str(rate),
                                     "--format", "speedscope", "--output",
                                     str(Path(scratch) / "s.json"), "--", *command])
                    whole.setdefault(f"{name}: py-spy record at {rate}/s", []).append(
                        sampled / bare)
            print(f"round {round_index + 1}/{args.rounds} done", flush=True)
    print(f"\n{platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
          f"OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')}, "
          f"{args.rounds} rounds, default rate {DEFAULT_RATE}/s")
    print("  a pass's median step time over the clean pass's (profile-all's overhead):")
    for label, values in passes.items():
        print(f"    {label:32} median {statistics.median(values):.3f}x, "
              f"min {min(values):.3f}x, max {max(values):.3f}x")
    print("  the whole command under py-spy over the bare command (outside profile-all;")
    print("  the import of torch included, which py-spy samples too):")
    for label, values in whole.items():
        print(f"    {label:32} median {statistics.median(values):.3f}x, "
              f"min {min(values):.3f}x, max {max(values):.3f}x")
    print(f"  goal: py-spy at {DEFAULT_RATE}/s under 1.05x")


if __name__ == "__main__":
    main()
