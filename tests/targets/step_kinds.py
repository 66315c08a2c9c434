"""A loop of STEPS steps of one KIND (argv: KIND STEPS [RAISE_AT]): `pa` marks each with
pa.step(), `optimizer` calls optimizer.step() only, `module` is an inference loop (one
outermost model call a step). With RAISE_AT it raises right after that step."""

import sys

import torch
from torch import nn

import profile_all as pa

kind, steps = sys.argv[1], int(sys.argv[2])
raise_at = int(sys.argv[3]) if len(sys.argv) > 3 else None
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 4))
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(1, steps + 1):
    print(f"step {step}", flush=True)  # (a pass ended at step N's mark printed N last)
    x = torch.randn(16, 32)
    if kind == "module":
        with torch.no_grad():
            model(x)
    else:
        loss = model(x).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if kind == "pa":
            pa.step()
    if step == raise_at:
        raise RuntimeError(f"stopped after step {step}")
print("done", flush=True)
