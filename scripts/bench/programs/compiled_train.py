"""A torch.compile'd MLP classifier trained with Adam, an evaluation under no_grad every 25
steps (a second graph, one per grad mode), as a compiled training script is."""

import sys

import torch
from _setup import corpus
from torch import nn

torch.manual_seed(0)
iters = int(sys.argv[1]) if len(sys.argv) > 1 else 100
features = torch.tensor(corpus(2_000_000), dtype=torch.float32).view(-1, 100) % 97 / 97
labels = (features.sum(1) > features.sum(1).median()).long()
model = torch.compile(nn.Sequential(nn.Linear(100, 512), nn.ReLU(), nn.Linear(512, 512),
                                    nn.ReLU(), nn.Linear(512, 2)))
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
loss_fn = nn.CrossEntropyLoss()
for it in range(iters):
    rows = torch.randint(0, len(features), (256,))
    loss = loss_fn(model(features[rows]), labels[rows])
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if it % 25 == 0:
        with torch.no_grad():
            accuracy = (model(features[:512]).argmax(1) == labels[:512]).float().mean()
        print(f"step {it}: loss {loss.item():.3f} accuracy {accuracy:.2f}")
