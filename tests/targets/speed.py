"""Regions "work" (sleeps argv[1] seconds, default 2 ms) and "steady" (2 ms), 30 steps;
the region names of argv[2:] are used as well, to test escaping."""

import sys
import time

import profile_all as pa

delay = float(sys.argv[1]) if len(sys.argv) > 1 else 0.002
for _ in range(30):
    with pa.region("work"):
        time.sleep(delay)
    with pa.region("steady"):
        time.sleep(0.002)
    for name in sys.argv[2:]:
        with pa.region(name):
            sum(range(1000))
    pa.step()
