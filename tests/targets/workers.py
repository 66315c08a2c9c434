"""Processes of the target's own, as training scripts start them: argv[1] says which.

dataloader: a DataLoader with 2 worker processes (forked by torch), 6 batches, a step each;
spawn: a multiprocessing pool of 2 started with "spawn" (fresh interpreters that import
this script as __mp_main__: torch is imported only where used); fork: os.fork, the child
exits by os._exit."""

import multiprocessing
import os
import sys

import profile_all as pa


def square(value):
    return value * value


def dataloader():
    import torch

    class Squares(torch.utils.data.Dataset):
        def __len__(self):
            return 12

        def __getitem__(self, index):
            return torch.tensor([index * index], dtype=torch.float32)

    total = 0.0
    for batch in torch.utils.data.DataLoader(Squares(), batch_size=2, num_workers=2):
        with pa.region("batch"):
            total += float(batch.sum())
        pa.step()
    print(f"dataloader total {total:g}")  # 0 + 1 + 4 + ... + 121 = 506


if __name__ == "__main__":
    how = sys.argv[1]
    if how == "dataloader":
        dataloader()
    elif how == "spawn":
        with multiprocessing.get_context("spawn").Pool(2) as pool:
            print("spawn squares", pool.map(square, range(5)))
    elif how == "fork":
        child = os.fork()
        if child == 0:
            os._exit(7)
        _, status = os.waitpid(child, 0)
        print("fork child exit", os.waitstatus_to_exitcode(status))
