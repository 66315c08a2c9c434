"""A target that starts its own cProfile two thirds of the way through, which ends any
profiler already running in the process (Python has one profile hook a thread)."""

import cProfile
import time


def busy(n):
    return sum(i * i for i in range(n))


for _ in range(20):
    busy(20_000)
time.sleep(0.2)
with cProfile.Profile() as own:  # line 15
    for _ in range(20):
        busy(20_000)
print("own profile saw calls:", own.getstats()[0].callcount > 0)
