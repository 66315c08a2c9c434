"""A training loop whose memory is known by hand: an MLP trained by Adam (state 2x the
parameters), or with `wide` a wide MLP on a large batch (SGD: activations make the peak);
with `cuda`, on the GPU."""
import sys

import torch
from torch import nn

WIDE = "wide" in sys.argv[1:]
DEVICE = "cuda" if "cuda" in sys.argv[1:] else "cpu"
torch.manual_seed(0)
if WIDE:
    model = nn.Sequential(nn.Linear(100, 1000), nn.ReLU(), nn.Linear(1000, 1000), nn.ReLU(),
                          nn.Linear(1000, 10))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    batch = torch.randn(2048, 100)
else:
    model = nn.Sequential(nn.Linear(1000, 2000), nn.ReLU(), nn.Linear(2000, 10))
    optimizer = torch.optim.Adam(model.parameters())
    batch = torch.randn(64, 1000)
model.to(DEVICE)
batch = batch.to(DEVICE)
for _ in range(3):
    loss = model(batch).sum()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
