"""A training loop that marks no step of its own: 40 optimizer.step() calls, inside a
`try: ... except Exception` that must not swallow the end of a pass's window."""
import torch

model = torch.nn.Linear(8, 2)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
done = 0
try:
    for _ in range(40):
        loss = model(torch.randn(4, 8)).sum()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        done += 1
except Exception as error:  # a script's own handler: a window's end is not an Exception
    print("swallowed", error)
print("steps done", done)
