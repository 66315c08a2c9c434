"""A training loop that calls optimizer.step() but never pa.step(); argv[1]: a file that
counts runs, when given, makes each run do 2 more iterations than the last."""

import sys
from pathlib import Path

import torch

iterations = 12
if len(sys.argv) > 1:
    counter = Path(sys.argv[1])
    runs = int(counter.read_text()) if counter.exists() else 0
    counter.write_text(str(runs + 1))
    iterations += 2 * runs
model = torch.nn.Linear(32, 4)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
for _ in range(iterations):
    model(torch.randn(16, 32)).square().mean().backward()
    optimizer.step()
    optimizer.zero_grad()
