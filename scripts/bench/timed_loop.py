"""A CPU training loop that times itself, for timing_distortion.py.

Prints `loop_seconds=<seconds>`: the loop's own perf_counter time, imports excluded.
"""

import argparse
import time

import torch
from torch import nn

import profile_all as pa

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=400)
parser.add_argument("--threads", type=int, default=1,
                    help="torch threads; 1 leaves a core to the profiler's own process")
args = parser.parse_args()
torch.set_num_threads(args.threads)

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10))
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
inputs, labels = torch.randn(64, 512), torch.randint(0, 10, (64,))

started = time.perf_counter()
for _ in range(args.steps):
    with pa.region("train_step"):
        with pa.region("forward"):
            loss = nn.functional.cross_entropy(model(inputs), labels)
        with pa.region("backward"):
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
        with pa.region("optimizer_step"):
            optimizer.step()
    pa.step()
print(f"loop_seconds={time.perf_counter() - started:.6f}")
