"""A small CNN trained on the GPU for a few steps, with regions: a live trace for the
kernel -> operator join, NVTX ranges and CUDA events."""

import torch
from torch import nn

import profile_all as pa

torch.manual_seed(0)
model = nn.Sequential(nn.Conv2d(3, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(),
                      nn.Conv2d(64, 64, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                      nn.Flatten(), nn.Linear(64, 10)).cuda()
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
images = torch.randn(64, 3, 64, 64, device="cuda")
labels = torch.randint(0, 10, (64,), device="cuda")
for _ in range(12):
    with pa.region("forward"):
        loss = nn.functional.cross_entropy(model(images), labels)
    with pa.region("backward"):
        loss.backward()
    with pa.region("optimizer"):
        optimizer.step()
        optimizer.zero_grad()
    pa.step()
torch.cuda.synchronize()
