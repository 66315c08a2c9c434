"""Work done in a child process (a subprocess burning about 0.4 s of CPU), beside a little
in the target itself."""

import subprocess
import sys

import profile_all as pa

with pa.region("parent_work"):
    sum(range(200_000))
with pa.region("child_work"):
    subprocess.run([sys.executable, "-c", "import time\nend = time.process_time() + 0.4\n"
                    "while time.process_time() < end: pass"], check=True)
