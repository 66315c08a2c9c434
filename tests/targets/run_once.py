"""A training loop that says how often it ran: its set-up appends a line to the file in
argv[1] (a run's side effect, as a checkpoint is). argv[2]: steps (default 40); argv[3]
"eval": 10 forward calls under no_grad before the training (an evaluation at iteration 0);
"eval-at-9": 2000 of them in step 9 (an evaluation inside the loop). Prints the loss every
10 steps."""

import sys

import torch
from torch import nn

import profile_all as pa

WIDTH, BATCH = 32, 8
with open(sys.argv[1], "a") as runs:
    runs.write("set-up\n")
steps = int(sys.argv[2]) if len(sys.argv) > 2 else 40
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(WIDTH, 64), nn.ReLU(), nn.Linear(64, 4))
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
data = torch.randn(steps, BATCH, WIDTH)


def batch(step):
    return data[step]


if sys.argv[3:] == ["eval"]:
    with torch.no_grad():
        for step in range(10):
            model(batch(step))
for step in range(steps):
    if sys.argv[3:] == ["eval-at-9"] and step == 8:
        with torch.no_grad():
            for _ in range(2000):
                model(batch(step))
    with pa.region("forward"):
        loss = model(batch(step)).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if step % 10 == 0:
        print(f"step {step} loss {loss.item():.4f}")
