"""A plain training loop whose input is slow (each sample takes 3 ms to "decode"), with
no profile-all marks: its steps are found through optimizer.step(). argv[1]: "fast" makes
the input free; "workers" loads in two DataLoader workers (still slower than the step)."""

import sys
import time

import torch
from torch.utils.data import DataLoader, Dataset

WORKERS = 2 if sys.argv[1:] == ["workers"] else 0
# 24 ms of input a step against ~1.5 ms of compute: still the bottleneck when a loaded
# machine slows the compute tenfold (a sleep does not slow with the load); with workers a
# sample takes 2x longer, and two workers deliver a batch in 24 ms
DECODE_SECONDS = 0.0 if sys.argv[1:] == ["fast"] else 0.006 if WORKERS else 0.003


class Slow(Dataset):
    def __len__(self):
        return 8 * 40

    def __getitem__(self, index):
        if DECODE_SECONDS:
            time.sleep(DECODE_SECONDS)
        return torch.full((64,), float(index % 7)), index % 4


torch.manual_seed(0)
torch.set_num_threads(1)  # a small model: more threads only contend with a parallel test run
model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 4))
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
for inputs, labels in DataLoader(Slow(), batch_size=8, num_workers=WORKERS):
    loss = torch.nn.functional.cross_entropy(model(inputs), labels)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print("done")
