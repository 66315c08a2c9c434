"""Train an MNIST-shaped MLP on synthetic data, with profile-all regions around each phase.

    python scripts/examples/train_mlp.py --steps 50
    profile-all run scripts/examples/train_mlp.py -- --steps 50
"""

import argparse

import torch
from torch import nn

import profile_all as pa


def make_model() -> nn.Module:
    return nn.Sequential(nn.Flatten(), nn.Linear(28 * 28, 256), nn.ReLU(),
                         nn.Linear(256, 128), nn.ReLU(), nn.Linear(128, 10))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=0.05)
    args = parser.parse_args()

    torch.manual_seed(0)
    model = make_model()
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr)
    loss_fn = nn.CrossEntropyLoss()
    # a fixed synthetic "dataset": 10 class prototypes plus noise, so the loss falls
    prototypes = torch.randn(10, 1, 28, 28)

    for step in range(args.steps):
        with pa.region("train_step"):
            with pa.region("data"):
                labels = torch.randint(0, 10, (args.batch_size,))
                images = prototypes[labels] + 0.5 * torch.randn(args.batch_size, 1, 28, 28)
            with pa.region("forward"):
                loss = loss_fn(model(images), labels)
            with pa.region("backward"):
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
            with pa.region("optimizer_step"):
                optimizer.step()
        pa.step()
        if step % 20 == 0 or step == args.steps - 1:
            print(f"step {step:4d}  loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
