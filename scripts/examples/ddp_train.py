"""Two-rank (or more) DDP training of a small MLP on the CPU with the gloo backend, on
synthetic data: `torchrun --nproc-per-node 2 scripts/examples/ddp_train.py`, or under
profile-all: `profile-all run --nproc-per-node 2 scripts/examples/ddp_train.py`.

`--fail-rank R --fail-step S` makes rank R raise at step S, to see a failing rank reported;
`--hang-rank R` makes it hang there instead (for `--timeout`).
`--slow-rank R` makes rank R's data loading 5 ms slower: a straggler.
"""

import argparse
import gc
import os
import time

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

import profile_all as pa


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--fail-rank", type=int, default=None)
    parser.add_argument("--fail-step", type=int, default=5)
    parser.add_argument("--hang-rank", type=int, default=None)
    parser.add_argument("--slow-rank", type=int, default=None)
    args = parser.parse_args()

    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(rank)
    model = DistributedDataParallel(
        nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 10)))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = nn.CrossEntropyLoss()
    for step in range(args.steps):
        with pa.region("train_step"):
            with pa.region("data"):
                inputs = torch.randn(args.batch, 256)
                targets = torch.randint(0, 10, (args.batch,))
                if rank == args.slow_rank:
                    time.sleep(0.005)
            if step == args.fail_step:
                if rank == args.fail_rank:
                    raise RuntimeError(f"rank {rank} failed at step {step}")
                while rank == args.hang_rank:
                    time.sleep(1)
            with pa.region("forward"):
                loss = loss_fn(model(inputs), targets)
            with pa.region("backward"):  # DDP's gradient all-reduce runs in here
                optimizer.zero_grad()
                loss.backward()
            with pa.region("optimizer_step"):
                optimizer.step()
        pa.step()
    if rank == 0:
        print(f"trained {args.steps} steps on {world} ranks "
              f"(LOCAL_RANK {os.environ['LOCAL_RANK']}), loss {loss.item():.3f}")
    # Tear down in this order: with torch 2.13, a DDP model freed as main() returns, after
    # destroy_process_group, deadlocks about one run in two when torch._dynamo was imported
    # before the process group (as a torch.profiler session does), under bare torchrun too.
    dist.barrier()
    del model, optimizer, loss
    gc.collect()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
