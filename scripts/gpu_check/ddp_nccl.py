"""Two ranks with NCCL, a GPU each: a small DDP training loop with regions."""

import os

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

import profile_all as pa

dist.init_process_group("nccl")
rank = dist.get_rank()
torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
model = DistributedDataParallel(nn.Linear(1024, 1024).cuda())
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
data = torch.randn(256, 1024, device="cuda")
for _ in range(20):
    with pa.region("step"):
        loss = model(data).square().mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    pa.step()
torch.cuda.synchronize()
dist.barrier()
del model
dist.destroy_process_group()
