"""Starts a child in a session of its own (as a daemon would), writes its pid to argv[1],
and ends; the child would sleep for five minutes."""

import subprocess
import sys
from pathlib import Path

child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)  # escaped"],
                         start_new_session=True)
Path(sys.argv[1]).write_text(str(child.pid))
print("started", child.pid, flush=True)
