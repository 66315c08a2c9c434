"""How long a run takes to start its first pass when many start together on a loaded
machine, and whether the fork server's start ever stalls (runner/starting/server_start.py says so
after 10 s, dumps the server's stack after 60 s, and gives up after 600 s).

Starts `--together` runs of a tiny script at once, `--rounds` times, each with its own
output folder; per run, the seconds from its start to its first "pass 1/... started" line
and to its end. Prints the distribution, the slowest, and every line the runs said about
waiting for the fork server (with the stacks it dumped).

    python scripts/stress_start.py [--together 6] [--rounds 3]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

SCRIPT = "import torch\nprint(torch.ones(2).sum().item())\n"


def one_run(script: Path, out: Path, found: dict[str, object]) -> None:
    started = time.monotonic()
    process = subprocess.Popen([sys.executable, "-m", "profile_all", "run", str(script),
                                "-b", "wallclock", "-o", str(out)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    first, said = None, []
    for line in process.stderr:
        if first is None and " started" in line and line.startswith("pass 1/"):
            first = time.monotonic() - started
        if "waiting for the fork server" in line or "File " in line:
            said.append(line.rstrip())
    process.wait()
    found.update(first=first, total=time.monotonic() - started, code=process.returncode,
                 said=said)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--together", type=int, default=6)
    parser.add_argument("--rounds", type=int, default=3)
    options = parser.parse_args()
    results: list[dict[str, object]] = []
    with tempfile.TemporaryDirectory() as scratch:
        script = Path(scratch) / "tiny.py"
        script.write_text(SCRIPT)
        for round_index in range(options.rounds):
            found = [{} for _ in range(options.together)]
            threads = [threading.Thread(target=one_run, args=(
                script, Path(scratch) / f"r{round_index}-{index}", found[index]))
                for index in range(options.together)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            results += found
    firsts = sorted(r["first"] for r in results if r["first"] is not None)
    print(f"{len(results)} runs, {options.together} at a time: first pass started after "
          f"median {statistics.median(firsts):.1f} s, max {firsts[-1]:.1f} s; exit codes "
          f"{sorted({r['code'] for r in results})}")
    for result in results:
        for line in result["said"]:
            print(f"  {line}")


if __name__ == "__main__":
    main()
