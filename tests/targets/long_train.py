"""A training loop that runs until the file argv[1] exists (or argv[2] seconds pass,
default 120), for `profile-all attach`; it prints `ready` once it trains, and marks each
step with pa.step() unless argv[3] is `optimizer` (then only optimizer.step() marks).
argv[4]: seconds it waits after each step, as for its data (default 0: it spins)."""

import sys
import time
from pathlib import Path

import torch

import profile_all as pa

stop, limit = Path(sys.argv[1]), float(sys.argv[2]) if len(sys.argv) > 2 else 120.0
marks = sys.argv[3] if len(sys.argv) > 3 else "pa.step"
pace = float(sys.argv[4]) if len(sys.argv) > 4 else 0.0
model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10))
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
inputs, labels = torch.randn(64, 256), torch.randint(0, 10, (64,))
if marks == "listen":
    pa.listen()
started = time.monotonic()
steps = 0
while not stop.exists() and time.monotonic() - started < limit:
    loss = torch.nn.functional.cross_entropy(model(inputs), labels)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if marks == "pa.step":
        pa.step()
    steps += 1
    if steps == 1:
        print("ready", flush=True)
    if pace:
        time.sleep(pace)
print(f"steps={steps}", flush=True)
