"""TensorBoard's profiler plugin (torch-tb-profiler) on a profile-all run folder: does it
find the run, load the trace and see its steps? The plugin's own discovery pattern and
loader, no browser. In a venv of its own (the plugin pins old packages):

    python -m venv /tmp/tb && /tmp/tb/bin/pip install torch-tb-profiler torch
    /tmp/tb/bin/python scripts/checks/tensorboard_lists_run.py RUN_DIR
"""

import sys

from torch_tb_profiler import consts, io
from torch_tb_profiler.profiler.loader import RunLoader


def main() -> None:
    found = [root for root, _, files in io.walk(sys.argv[1])
             if any(consts.WORKER_PATTERN.match(name) for name in files)]
    print("runs the plugin lists:", found)
    run = RunLoader("run", found[0], io.Cache()).load()
    for key, profile in run.profiles.items():
        steps = (profile.overview or {}).get("steps", {}).get("rows", [])
        print("profile", key, "steps:", len(steps))


if __name__ == "__main__":
    main()
