"""A compiled training loop, as people write one in 2026: torch.compile on the model, AdamW,
a graph break (a branch on a tensor's value), and a new batch size at step 5 (a recompile).
With `--report`, prints at its end what torch itself counted: the graphs made and the
recompiles (to compare a run under profile-all with a bare one). `--backend aot_eager`
compiles without Inductor's code generation: the same Dynamo graphs, guards and breaks,
in a fraction of the time."""

import sys

import torch
from torch import nn


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.first = nn.Linear(16, 32)
        self.second = nn.Linear(32, 4)

    def forward(self, x):
        hidden = self.first(x).relu()
        if hidden.sum() > 0:  # the graph break: a branch on a tensor's value
            hidden = hidden * 2
        return self.second(hidden)


torch.manual_seed(0)
model = Net()
backend = sys.argv[sys.argv.index("--backend") + 1] if "--backend" in sys.argv else "inductor"
compiled = torch.compile(model, backend=backend)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
for step in range(8):
    batch = 8 if step < 4 else 12
    x, y = torch.randn(batch, 16), torch.randint(0, 4, (batch,))
    loss = nn.functional.cross_entropy(compiled(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
if "--report" in sys.argv:
    from torch._dynamo import utils

    recompiles = sum(1 for m in utils.get_compilation_metrics() if m.recompile_reason)
    print(f"GRAPHS {utils.counters['stats']['unique_graphs']} RECOMPILES {recompiles}")
