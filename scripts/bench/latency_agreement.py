"""Does `profile-all model` measure the latency torch's own benchmark Timer measures?

The same CPU model and input, measured in one run, alternating, by
- `pa.profile_model` (the benchmark pass of `profile-all model`: warm-up, then iterations
  until the median's 95% confidence interval is within 2%), and
- `torch.utils.benchmark.Timer(...).blocked_autorange()`,
both timing one `model(x)` under `torch.inference_mode()`. Prints each round's medians,
their ratio (target: within 0.95 to 1.05) and the seconds each method took.

    python scripts/bench/latency_agreement.py [--rounds 3] [--model small_cnn]
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import tempfile
import time
from pathlib import Path

import torch
import torch.utils.benchmark as torch_benchmark

import profile_all as pa

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "models.py"
SHAPES = {"mlp": (64, 784), "small_cnn": (16, 3, 32, 32), "encoder_layer": (8, 32, 64)}


def load(name: str) -> torch.nn.Module:
    spec = importlib.util.spec_from_file_location("example_models", EXAMPLES)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, name)().eval()


def with_profile_all(model: torch.nn.Module, shape: tuple[int, ...], out: Path) -> float:
    report = pa.profile_model(model, input_shapes=[shape], backends=[], out=out)
    latency = report.latency()
    return latency[(latency["metric"] == "latency") & (latency["stat"] == "median")][
        "value"].item()


def with_torch_timer(model: torch.nn.Module, shape: tuple[int, ...]) -> float:
    x = torch.randn(shape)
    timer = torch_benchmark.Timer(
        stmt="with torch.inference_mode(): model(x)", globals={"model": model, "x": x,
                                                              "torch": torch},
        num_threads=torch.get_num_threads())
    return timer.blocked_autorange(min_run_time=2.0).median


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--model", choices=sorted(SHAPES), default="small_cnn")
    options = parser.parse_args()
    model, shape = load(options.model), SHAPES[options.model]
    print(f"{options.model} at {shape}, {torch.get_num_threads()} threads, torch "
          f"{torch.__version__}")
    ratios = []
    with tempfile.TemporaryDirectory() as scratch:
        for round_index in range(options.rounds):
            started = time.perf_counter()
            ours = with_profile_all(model, shape, Path(scratch) / f"run{round_index}")
            ours_seconds = time.perf_counter() - started
            started = time.perf_counter()
            theirs = with_torch_timer(model, shape)
            theirs_seconds = time.perf_counter() - started
            ratios.append(ours / theirs)
            print(f"  round {round_index + 1}: profile-all median {ours * 1e3:.3f} ms "
                  f"({ours_seconds:.1f} s), Timer.blocked_autorange median "
                  f"{theirs * 1e3:.3f} ms ({theirs_seconds:.1f} s), ratio {ours / theirs:.3f}")
    ratio = statistics.median(ratios)
    print(f"median ratio {ratio:.3f} (target 0.95 to 1.05: "
          f"{'met' if 0.95 <= ratio <= 1.05 else 'NOT met'})")


if __name__ == "__main__":
    main()
