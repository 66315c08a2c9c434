"""How fast profile-all is by default: every figure issues 15 and 24 ask for, measured in one
run, interleaved round by round (this machine is shared and noisy), as ratios.

- a default `profile-all run` over the bare script, whole commands: train_mlp.py --steps
  100 (the demo; target <= 1.25x) and train_cnn.py (a few seconds bare; target <= 2x)
- the cost of one more pass (`-b wallclock -b cprofile` against `-b wallclock`) on a script
  that imports torch; target <= 0.3 s
- the parent's report write (load a run, save it again, matplotlib never imported);
  target <= 0.3 s
- `profile-all model` against `Timer.blocked_autorange(2)` in a fresh process, whole
  commands; target <= 1.2x
- `profile-all --help` (the CLI's start); target < 0.3 s
- a nested `pa.region` under the wallclock pass against `record_function`; targets
  <= 0.5 µs and >= 20x cheaper

    OMP_NUM_THREADS=1 python scripts/bench/fast_by_default.py [--rounds 3]
"""

from __future__ import annotations

import argparse
import importlib.util
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
PROFILE_ALL = [sys.executable, "-m", "profile_all"]
IMPORTS_TORCH = "import torch\nprint(torch.__version__)\n"
TIMER = """
import importlib.util, sys, torch
from torch.utils.benchmark import Timer
spec = importlib.util.spec_from_file_location("models", sys.argv[1])
models = importlib.util.module_from_spec(spec); spec.loader.exec_module(models)
model = models.small_cnn().eval()
x = torch.randn(16, 3, 32, 32)
with torch.inference_mode():
    print(Timer("model(x)", globals={"model": model, "x": x}).blocked_autorange(min_run_time=2))
"""
SAVE = """
import sys, time
started = time.perf_counter()
import profile_all as pa
from profile_all.runs.store import save
report = pa.load(sys.argv[1])
loaded = time.perf_counter()
save(report, __import__("pathlib").Path(sys.argv[2]))
print(f"write_seconds={time.perf_counter() - loaded:.4f} "
      f"matplotlib={'matplotlib' in sys.modules}")
"""


def wall(command: list[str], **kwargs) -> float:
    started = time.perf_counter()
    subprocess.run(command, check=True, capture_output=True, **kwargs)
    return time.perf_counter() - started


def _region_costs() -> tuple[float, float]:
    """(a nested pa.region under the wallclock pass, record_function), ns per call."""
    spec = importlib.util.spec_from_file_location(
        "region_overhead", Path(__file__).with_name("region_overhead.py"))
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    nested, recorded = [], []
    for _ in range(3):  # interleaved: the machine's noise falls on both alike
        nested.append(bench.under_wallclock(False, 100_000, nested=True))
        recorded.append(bench.per_call_ns(bench.record_function_once, 20_000))
    return min(nested), min(recorded)


def summary(ratios: list[float]) -> str:
    return f"min {min(ratios):.2f}, median {statistics.median(ratios):.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--cnn-steps", type=int, default=300)
    rounds = parser.parse_args().rounds
    cnn_steps = str(parser.parse_args().cnn_steps)
    found: dict[str, list[float]] = {key: [] for key in (
        "mlp", "cnn", "pass", "write", "model", "help")}
    seconds: dict[str, list[float]] = {key: [] for key in (
        "mlp bare", "cnn bare", "model", "timer", "help", "python")}
    with tempfile.TemporaryDirectory() as scratch:
        out = Path(scratch)
        (out / "imports_torch.py").write_text(IMPORTS_TORCH)
        (out / "timer.py").write_text(TIMER)
        (out / "save.py").write_text(SAVE)
        for round_index in range(rounds):
            run = out / f"r{round_index}"
            bare = wall([sys.executable, str(EXAMPLES / "train_mlp.py"), "--steps", "100"])
            profiled = wall([*PROFILE_ALL, "run", str(EXAMPLES / "train_mlp.py"), "-o",
                             str(run / "mlp"), "--", "--steps", "100"])
            found["mlp"].append(profiled / bare)
            seconds["mlp bare"].append(bare)
            bare = wall([sys.executable, str(EXAMPLES / "train_cnn.py"), "--steps", cnn_steps])
            profiled = wall([*PROFILE_ALL, "run", str(EXAMPLES / "train_cnn.py"), "-o",
                             str(run / "cnn"), "--", "--steps", cnn_steps])
            found["cnn"].append(profiled / bare)
            seconds["cnn bare"].append(bare)
            one = wall([*PROFILE_ALL, "run", str(out / "imports_torch.py"), "-b", "wallclock",
                        "-o", str(run / "one")])
            two = wall([*PROFILE_ALL, "run", str(out / "imports_torch.py"), "-b", "wallclock",
                        "-b", "cprofile", "-o", str(run / "two")])
            found["pass"].append(two - one)
            (run / "saved").mkdir()
            written = subprocess.run([sys.executable, str(out / "save.py"), str(run / "mlp"),
                                      str(run / "saved")], check=True, capture_output=True,
                                     text=True).stdout
            found["write"].append(float(written.split("write_seconds=")[1].split()[0]))
            model = wall([*PROFILE_ALL, "model", f"{EXAMPLES / 'models.py'}:small_cnn",
                          "--input-shape", "16,3,32,32", "-o", str(run / "model")])
            timer = wall([sys.executable, str(out / "timer.py"), str(EXAMPLES / "models.py")])
            found["model"].append(model / timer)
            seconds["model"].append(model)
            seconds["timer"].append(timer)
            cli = wall([str(Path(sys.executable).with_name("profile-all")), "--help"])
            floor = wall([sys.executable, "-c", "pass"])
            found["help"].append(cli)
            seconds["help"].append(cli)
            seconds["python"].append(floor)
            print(f"round {round_index + 1}/{rounds} done "
                  f"(matplotlib imported by the write: {written.split('matplotlib=')[1].strip()})",
                  flush=True)
    nested, record_function = _region_costs()
    print(f"\n{platform.processor() or platform.machine()}, {os.cpu_count()} cores, Python "
          f"{platform.python_version()}; {rounds} rounds, interleaved")
    print(f"  default run / bare, train_mlp --steps 100: {summary(found['mlp'])}  (target <= 1.25; "
          f"bare {statistics.median(seconds['mlp bare']):.2f} s)")
    print(f"  default run / bare, train_cnn --steps {cnn_steps}: {summary(found['cnn'])}  "
          f"(target <= 2; bare {statistics.median(seconds['cnn bare']):.2f} s)")
    print(f"  one more pass, import-torch script: min {min(found['pass']):.2f} s, median "
          f"{statistics.median(found['pass']):.2f} s  (target <= 0.3 s)")
    print(f"  parent's report write: min {min(found['write']):.3f} s, median "
          f"{statistics.median(found['write']):.3f} s  (target <= 0.3 s)")
    print(f"  profile-all model / Timer.blocked_autorange(2): {summary(found['model'])}  "
          f"(target <= 1.2; {statistics.median(seconds['model']):.2f} s against "
          f"{statistics.median(seconds['timer']):.2f} s)")
    print(f"  profile-all --help: min {min(found['help']):.2f} s, median "
          f"{statistics.median(found['help']):.2f} s  (target < 0.3 s; python -c pass "
          f"{statistics.median(seconds['python']):.2f} s)")
    print(f"  nested pa.region under wallclock: {nested:.0f} ns; record_function "
          f"{record_function:.0f} ns: {record_function / nested:.1f}x  (targets <= 500 ns, "
          ">= 20x)")


if __name__ == "__main__":
    main()
