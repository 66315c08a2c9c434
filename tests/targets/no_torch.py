"""Pure Python: no torch operator for torch.profiler to record."""

total = sum(i * i for i in range(100_000))
print(total)
