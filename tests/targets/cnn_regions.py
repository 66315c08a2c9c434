"""A small CNN training loop on CPU with four regions (data, forward, backward, optimizer),
30 steps by default: argv[1] steps, argv[2] a region to slow down, argv[3] by how much
(0.2: the region's own work is followed by a sleep of 20% of that work's time)."""

import sys
import time

import torch
from torch import nn

import profile_all as pa

steps = int(sys.argv[1]) if len(sys.argv) > 1 else 30
slow_region = sys.argv[2] if len(sys.argv) > 2 else ""
slow_by = float(sys.argv[3]) if len(sys.argv) > 3 else 0.0

torch.manual_seed(0)
torch.set_num_threads(1)
model = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                      nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                      nn.Flatten(), nn.Linear(32, 10))
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
images, labels = torch.randn(256, 3, 32, 32), torch.randint(0, 10, (256,))


def timed(name, work):
    """Run `work` in region `name`; the slowed region then sleeps slow_by of its time."""
    with pa.region(name):
        started = time.perf_counter()
        result = work()
        if name == slow_region:
            time.sleep(slow_by * (time.perf_counter() - started))
    return result


for step in range(steps):
    batch = timed("data", lambda step=step: (images[step % 8 * 32:][:32].clone(),
                                             labels[step % 8 * 32:][:32].clone()))
    loss = timed("forward", lambda batch=batch: nn.functional.cross_entropy(model(batch[0]),
                                                                            batch[1]))
    timed("backward", loss.backward)
    timed("optimizer", lambda: (optimizer.step(), optimizer.zero_grad()))
    pa.step()
