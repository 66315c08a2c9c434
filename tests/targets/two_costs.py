"""Two parts of known cost, a step each iteration: `calls` makes many small Python calls,
two a turn (what a tracer slows most), `loop` one long loop in one frame (what a tracer
barely slows). Each part is a region, so the wall clock measures both; the script also prints
its own perf_counter totals of each (argv[1]: iterations, default 60)."""

import sys
import time

import profile_all as pa


def tiny(value):
    return value + 1


def calls(count=20_000):
    total = 0
    for index in range(count):
        total = tiny(tiny(total)) + index % 3
    return total


def loop(count=120_000):
    total = 0
    for index in range(count):
        total += index * index % 7
    return total


spent = {"calls": 0.0, "loop": 0.0}
for _ in range(int(sys.argv[1]) if len(sys.argv) > 1 else 60):
    for name, part in (("calls", calls), ("loop", loop)):
        started = time.perf_counter()
        with pa.region(name):
            part()
        spent[name] += time.perf_counter() - started
    pa.step()
print(" ".join(f"{name}={seconds:.6f}" for name, seconds in spent.items()))
