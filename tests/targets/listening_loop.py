"""A training loop that listens for `profile-all attach` (its pa.step()), until the file
argv[1] exists. It prints `ready` once it trains, and `profiler on` / `profiler off` as
a torch.profiler session starts and ends in it (checked each step). argv[2]:
`own`: the loop runs inside a torch.profiler session of its own, whose event count it
prints at the end (`own events N`); `opens-own`: once a window is open, it opens a
session of its own for 3 steps and prints that session's event count; `ends`: once a
window is open, it ends (its exit status tells whether the window was ended cleanly)."""

import sys
import time
from pathlib import Path

import torch

import profile_all as pa

stop = Path(sys.argv[1])
mode = sys.argv[2] if len(sys.argv) > 2 else ""
model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4))
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
inputs, labels = torch.randn(16, 64), torch.randint(0, 4, (16,))


def enabled() -> bool:
    return bool(torch.autograd.profiler._is_profiler_enabled)


def train(steps: int | None = None) -> None:
    was, done = None, 0
    while not stop.exists() and (steps is None or done < steps):
        loss = torch.nn.functional.cross_entropy(model(inputs), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        pa.step()
        done += 1
        if done == 1 and steps is None:
            print("ready", flush=True)
        now = enabled()
        if now != was:
            print(f"profiler {'on' if now else 'off'}", flush=True)
            was = now
        if mode == "ends" and now:
            return
        if mode == "opens-own" and now:
            with torch.profiler.profile() as own:
                for _ in range(3):
                    model(inputs).sum().backward()
            print(f"own events {len(own.events())}", flush=True)
            return
        time.sleep(0.005)


if mode == "own":
    with torch.profiler.profile() as own:
        train()
    print(f"own events {len(own.events())}", flush=True)
else:
    train()
print("ended", flush=True)
