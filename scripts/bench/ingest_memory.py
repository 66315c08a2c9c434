"""How much memory `profile-all ingest` holds against the size of the trace it reads, and
how fast it refuses a decompression bomb (readers/limits.py).

A real torch.profiler trace of a small CNN training loop is made here, then copied with
its events repeated (shifted in time, so that they do not overlap) to several sizes, each
written as gzip. Each is ingested in a process of its own, whose peak RSS is read by
wait4; the baseline is the peak of ingesting the smallest trace once the repeats are
taken away (the interpreter, pandas, pyarrow: what every ingest holds). Prints per size
the unpacked bytes, the peak, and (peak - baseline) / unpacked bytes; then a gzip whose
one name unpacks to 1 GiB: the seconds and the peak it takes to be refused.

    python scripts/bench/ingest_memory.py [--sizes 20,60,120]   (MB of JSON)
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PROFILE_ALL = [sys.executable, "-m", "profile_all"]
SCRIPT = """
import torch, sys
from torch import nn
from torch.profiler import profile
model = nn.Sequential(nn.Conv2d(3, 8, 3), nn.ReLU(), nn.Flatten(), nn.Linear(8 * 30 * 30, 10))
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
with profile() as prof:
    for _ in range(20):
        loss = model(torch.randn(4, 3, 32, 32)).sum()
        optimizer.zero_grad(); loss.backward(); optimizer.step()
        prof.step()
prof.export_chrome_trace(sys.argv[1])
"""


def _peak_of(command: list[str]) -> tuple[int, float, int]:
    """(exit code, seconds, peak RSS in bytes) of `command` in a process of its own."""
    started = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _pid, status, usage = os.wait4(process.pid, 0)
    return os.waitstatus_to_exitcode(status), time.perf_counter() - started, \
        usage.ru_maxrss * 1024


def _scaled(trace: dict, copies: int) -> dict:
    events = trace["traceEvents"]
    timed = [e for e in events if isinstance(e.get("ts"), int | float)]
    span = max(e["ts"] + e.get("dur", 0) for e in timed) - min(e["ts"] for e in timed) + 1000
    scaled = []
    for copy in range(copies):
        for event in events:
            if "ts" in event and event.get("ph") == "X":
                scaled.append({**event, "ts": event["ts"] + copy * span})
            elif copy == 0:
                scaled.append(event)
    return {**trace, "traceEvents": scaled}


def _bomb(path: Path, name_bytes: int) -> None:
    with gzip.open(path, "wb", compresslevel=9) as stream:
        stream.write(b'{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "')
        for _ in range(name_bytes // 2**20):
            stream.write(b"A" * 2**20)
        stream.write(b'", "pid": 1, "tid": 1, "ts": 0, "dur": 10, "args": {}}]}')


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", default="20,60,120", help="MB of JSON, comma-separated")
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        subprocess.run([sys.executable, "-c", SCRIPT, str(root / "base.json")], check=True)
        base = json.loads((root / "base.json").read_text())
        one = len(json.dumps(base).encode())
        small = root / "small.json.gz"
        small.write_bytes(gzip.compress(json.dumps(base).encode()))
        _code, _seconds, baseline = _peak_of([*PROFILE_ALL, "ingest", str(small), "-o",
                                              str(root / "out-small")])
        print(f"one trace: {one / 1e6:.1f} MB of JSON, {len(base['traceEvents']):,} events; "
              f"baseline peak {baseline / 2**20:.0f} MiB")
        for megabytes in map(int, options.sizes.split(",")):
            copies = max(1, round(megabytes * 1e6 / one))
            data = json.dumps(_scaled(base, copies)).encode()
            path = root / f"trace{megabytes}.json.gz"
            path.write_bytes(gzip.compress(data, compresslevel=1))
            code, seconds, peak = _peak_of([*PROFILE_ALL, "ingest", str(path), "-o",
                                            str(root / f"out{megabytes}")])
            print(f"  {len(data) / 1e6:6.1f} MB unpacked ({copies} copies): exit {code}, "
                  f"{seconds:5.1f} s, peak {peak / 2**20:6.0f} MiB, (peak - baseline) / "
                  f"unpacked = {(peak - baseline) / len(data):.2f}", flush=True)
        bomb = root / "bomb.json.gz"
        _bomb(bomb, 2**30)
        code, seconds, peak = _peak_of([*PROFILE_ALL, "ingest", str(bomb), "-o",
                                        str(root / "out-bomb")])
        print(f"a {bomb.stat().st_size / 1e6:.1f} MB gzip whose one name unpacks to 1 GiB: "
              f"exit {code} in {seconds:.1f} s, peak {peak / 2**20:.0f} MiB")


if __name__ == "__main__":
    main()
