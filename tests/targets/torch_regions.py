"""A small torch training loop with nested regions and steps."""
import torch

import profile_all as pa

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4))
inputs = torch.randn(16, 32)
for _ in range(6):
    with pa.region("train_step"):
        with pa.region("forward"):
            loss = model(inputs).square().mean()
        with pa.region("backward"):
            loss.backward()
    pa.step()
print("loss", round(loss.item(), 6))
