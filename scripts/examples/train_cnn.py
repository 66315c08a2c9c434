"""Train a small CNN on synthetic 3x32x32 images (no download), with profile-all regions
around each phase: a few seconds of real convolution work on a CPU.

    python scripts/examples/train_cnn.py --steps 200
    profile-all run scripts/examples/train_cnn.py -- --steps 200
"""

import argparse

import torch
from torch import nn

import profile_all as pa


def make_model() -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(64 * 8 * 8, 10))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--batch-size", type=int, default=32)
    args = parser.parse_args()

    torch.manual_seed(0)
    model = make_model()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    prototypes = torch.randn(10, 3, 32, 32)
    for step in range(args.steps):
        with pa.region("train_step"):
            with pa.region("data"):
                labels = torch.randint(0, 10, (args.batch_size,))
                images = prototypes[labels] + 0.5 * torch.randn(args.batch_size, 3, 32, 32)
            with pa.region("forward"):
                loss = loss_fn(model(images), labels)
            with pa.region("backward"):
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
            with pa.region("optimizer_step"):
                optimizer.step()
        pa.step()
        if step % 50 == 0 or step == args.steps - 1:
            print(f"step {step:4d}  loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
