"""Does `profile-all model` measure the latency the user's own process would see?

Whole processes, interleaved round by round, one thread (OMP_NUM_THREADS=1):
- `profile-all model SPEC --input-shape SHAPE --device cpu -b flop-counter -q` (its median
  latency and page faults per iteration, read from the run folder), and
- a fresh `python` that builds the same model and input and runs
  `torch.utils.benchmark.Timer("with torch.inference_mode(): model(x)")
  .blocked_autorange(min_run_time=2)`, its page faults per iteration read around it.
Prints each round, then the min and the median over the rounds of each side and their
ratios (target: within 0.98 to 1.02).

A process's latency on CPU depends on its allocator's state (model/allocator.py: page
faults per iteration, glibc giving freed activations back to the OS and taking them
again), which differs between fresh processes of the same script; the faults column shows
which state each process was in. So the same comparison is made a second time in the one
state that every process can be put in: the heap held, the Timer's process started with
MALLOC_TRIM_THRESHOLD_ and MALLOC_MMAP_THRESHOLD_ set, profile-all's figure its timing
pass's `latency_memory_kept` (or its own median where its iterations did not fault).

    python scripts/bench/fresh_latency.py [--rounds 8] [--model small_cnn]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "scripts" / "examples" / "models.py"
SHAPES = {"mlp": (64, 784), "small_cnn": (16, 3, 32, 32), "encoder_layer": (8, 32, 64)}

TIMER = """
import importlib.util, json, resource, sys
import torch
import torch.utils.benchmark as benchmark
spec = importlib.util.spec_from_file_location("example_models", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
model = getattr(module, sys.argv[2])().eval()
x = torch.randn(*map(int, sys.argv[3].split(",")))
timer = benchmark.Timer(stmt="with torch.inference_mode(): model(x)",
                        globals={"model": model, "x": x, "torch": torch}, num_threads=1)
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
measured = timer.blocked_autorange(min_run_time=2.0)
faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
runs = measured.number_per_run * len(measured.raw_times)
print(json.dumps({"median": measured.median, "faults": faults / runs}))
"""


#: glibc's heap held: what the report's `try` says to set
HELD = {"MALLOC_TRIM_THRESHOLD_": "1073741824", "MALLOC_MMAP_THRESHOLD_": "33554432"}
#: page faults an iteration above which it faulted (model/allocator.py's FAULTING)
FAULTING = 8


def _environment(**more: str) -> dict[str, str]:
    return {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", **more}


def with_profile_all(model: str, shape: tuple[int, ...], out: Path) -> dict[str, float]:
    subprocess.run([sys.executable, "-m", "profile_all", "model", f"{EXAMPLES}:{model}",
                    "--input-shape", ",".join(map(str, shape)), "--device", "cpu",
                    "-b", "flop-counter", "-q", "-o", str(out)],
                   check=True, env=_environment(), stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    import pandas as pd

    frame = pd.read_parquet(out / "report.parquet")
    picked = frame[(frame["backend"] == "bench") & (frame["scope"] == "model")]
    value = dict(zip(zip(picked["metric"], picked["stat"], strict=True), picked["value"],
                     strict=True))
    median, faults = value[("latency", "median")], value[("page_faults", "mean")]
    held = value.get(("latency_memory_kept", "median"),
                     median if faults <= FAULTING else float("nan"))
    return {"median": median, "faults": faults, "held": held}


def with_torch_timer(model: str, shape: tuple[int, ...],
                     held: bool = False) -> dict[str, float]:
    done = subprocess.run([sys.executable, "-c", TIMER, str(EXAMPLES), model,
                           ",".join(map(str, shape))], check=True,
                          env=_environment(**HELD) if held else _environment(),
                          capture_output=True, text=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--model", choices=sorted(SHAPES), default="small_cnn")
    options = parser.parse_args()
    shape = SHAPES[options.model]
    print(f"{options.model} at {shape}, one thread, {options.rounds} rounds, whole processes")
    ours, theirs, theirs_held = [], [], []
    with tempfile.TemporaryDirectory() as scratch:
        for index in range(options.rounds):
            # alternate which goes first, so that neither always follows the other
            out = Path(scratch) / f"run{index}"
            sides = [("ours", lambda out=out: with_profile_all(options.model, shape, out)),
                     ("timer", lambda: with_torch_timer(options.model, shape)),
                     ("held", lambda: with_torch_timer(options.model, shape, held=True))]
            measured = {}
            for side, measure in sides if index % 2 == 0 else reversed(sides):
                measured[side] = measure()
            ours.append(measured["ours"])
            theirs.append(measured["timer"])
            theirs_held.append(measured["held"])
            print(f"  round {index + 1}: profile-all {measured['ours']['median'] * 1e3:.3f} ms "
                  f"({measured['ours']['faults']:.0f} faults/iter; held "
                  f"{measured['ours']['held'] * 1e3:.3f} ms), fresh Timer "
                  f"{measured['timer']['median'] * 1e3:.3f} ms "
                  f"({measured['timer']['faults']:.0f} faults/iter; held "
                  f"{measured['held']['median'] * 1e3:.3f} ms, "
                  f"{measured['held']['faults']:.0f} faults/iter)", flush=True)
    for label, a_side, b_side, key in (
            ("as each process was", ours, theirs, "median"),
            ("the heap held", ours, theirs_held, None)):
        for name, pick in (("min", min), ("median", statistics.median)):
            a = pick(m["held" if key is None else key] for m in a_side)
            b = pick(m["median"] for m in b_side)
            verdict = "met" if 0.98 <= a / b <= 1.02 else "NOT met"
            print(f"{label}, {name} over rounds: profile-all {a * 1e3:.3f} ms, fresh Timer "
                  f"{b * 1e3:.3f} ms, ratio {a / b:.3f} (target 0.98 to 1.02: {verdict})")


if __name__ == "__main__":
    main()
