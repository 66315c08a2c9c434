"""A script that opens its own torch.profiler session, as some training scripts do."""
import torch
from torch.profiler import ProfilerActivity, profile

with profile(activities=[ProfilerActivity.CPU]) as own:
    total = torch.ones(100).sum().item()
print("own profiler events:", len(own.events()) > 0, "total:", total)
