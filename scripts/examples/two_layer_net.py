"""A two-layer ReLU network fitted to random data by hand-written gradient steps.

The classic PyTorch "learning by examples" network, with no autograd and no optimizer:
forward, loss, backward and update are written out with tensor operations.

    profile-all run scripts/examples/two_layer_net.py -- --steps 200
"""

import argparse

import torch

import profile_all as pa


@pa.region("forward")
def forward(x, w1, w2):
    hidden = x.mm(w1)
    relu = hidden.clamp(min=0)
    return hidden, relu, relu.mm(w2)


@pa.region("backward")
def backward(x, y, hidden, relu, prediction, w2):
    grad_prediction = 2.0 * (prediction - y)
    grad_w2 = relu.t().mm(grad_prediction)
    grad_relu = grad_prediction.mm(w2.t())
    grad_hidden = grad_relu.clone()
    grad_hidden[hidden < 0] = 0
    return x.t().mm(grad_hidden), grad_w2


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=1e-6)
    args = parser.parse_args()

    torch.manual_seed(0)
    d_in, d_hidden, d_out = 1000, 100, 10
    x = torch.randn(args.batch_size, d_in)
    y = torch.randn(args.batch_size, d_out)
    w1 = torch.randn(d_in, d_hidden)
    w2 = torch.randn(d_hidden, d_out)

    for step in range(args.steps):
        hidden, relu, prediction = forward(x, w1, w2)
        loss = (prediction - y).pow(2).sum().item()
        grad_w1, grad_w2 = backward(x, y, hidden, relu, prediction, w2)
        with pa.region("update"):
            w1 -= args.lr * grad_w1
            w2 -= args.lr * grad_w2
        pa.step()
        if step % 50 == 0 or step == args.steps - 1:
            print(f"step {step:4d}  loss {loss:.1f}")


if __name__ == "__main__":
    main()
