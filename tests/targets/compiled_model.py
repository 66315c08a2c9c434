"""A model factory that returns a compiled model, as people serve one: torch.compile with
the aot_eager backend (Dynamo's graphs and guards without Inductor's code generation, so
it compiles in a second on a small machine)."""

import torch
from torch import nn


def compiled_mlp() -> nn.Module:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))
    return torch.compile(model, backend="aot_eager")
