"""An inference loop that marks nothing: 40 calls of a model (each several modules), under
no_grad, with a helper module call outside the loop's model too."""
import torch

model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
calls = 0
with torch.no_grad():
    for _ in range(40):
        model(torch.randn(8, 16))
        calls += 1
print("inference calls", calls)
