"""Training with LBFGS, whose step() calls the model through a closure (four times a step),
after a validation loop of ten forward calls; argv[1] "train-only" leaves the validation
out. Prints how many steps and forward calls it made."""

import sys

import torch

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))
inputs, targets = torch.randn(64, 8), torch.randn(64, 1)
forwards = 0


def forward():
    global forwards
    forwards += 1
    return torch.nn.functional.mse_loss(model(inputs), targets)


if sys.argv[1:] != ["train-only"]:
    with torch.no_grad():
        for _ in range(10):
            forward()
# no tolerance: every step runs its closure max_iter times
optimizer = torch.optim.LBFGS(model.parameters(), max_iter=4, tolerance_grad=0,
                              tolerance_change=0)


def closure():
    optimizer.zero_grad()
    loss = forward()
    loss.backward()
    return loss


for step in range(6):
    optimizer.step(closure)
    print(f"step {step + 1} done, {forwards} forward calls")
