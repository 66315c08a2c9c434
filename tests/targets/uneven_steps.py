"""Steps whose count depends on argv[1]'s file: each run takes the next count from it, so
that two passes of one profile-all run do different work (as a script that stops at a
random point does). argv[2] "noisy": the steps sleep 1 to 30 ms, at random."""

import random
import sys
import time
from pathlib import Path

import profile_all as pa

counter = Path(sys.argv[1])
runs = int(counter.read_text()) if counter.exists() else 0
counter.write_text(str(runs + 1))
noisy = len(sys.argv) > 2 and sys.argv[2] == "noisy"
for _ in range(10 + 5 * runs):
    with pa.region("work"):
        time.sleep(random.uniform(0.001, 0.03) if noisy else 0.002)
    pa.step()
