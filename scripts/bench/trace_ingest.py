"""Reading a large torch.profiler trace: our reader beside the orjson floor and key_averages.

Makes a CPU trace of at least --events events with torch.profiler on a tiny loop, then in
one run measures
- the floor: reading the file's bytes and parsing them with orjson (a fresh process);
- our reader, from the file to report rows (a fresh process);
- `prof.key_averages()` on the same profile (this process, which holds it).
Peak memory is the process's peak RSS (VmHWM) above its RSS before reading, against the
trace file's (uncompressed) size. Targets (issue 3): reader <= 2x the floor's time, >= 10x
faster than key_averages, peak memory <= 3x the file's size.

    python scripts/bench/trace_ingest.py [--events 500000]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

MEASURE = r"""
import json, sys, time
from pathlib import Path
import orjson
from profile_all.readers.chrome_trace import load
from profile_all.readers.trace_analysis import trace_rows

def status(field):
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field):
            return int(line.split()[1]) * 1024

path, what = sys.argv[1], sys.argv[2]
before = status("VmRSS:")
started = time.perf_counter()
if what == "floor":
    events = len(orjson.loads(Path(path).read_bytes())["traceEvents"])
else:
    trace = load(path)
    rows = trace_rows(trace)
    events = trace.columns.events
seconds = time.perf_counter() - started
peak = status("VmHWM:")  # not ru_maxrss: Linux keeps that across fork and exec
print(json.dumps({"seconds": seconds, "peak_above_start": peak - before, "events": events}))
"""


def measure_in_fresh_process(path: Path, what: str) -> dict:
    output = subprocess.run([sys.executable, "-c", MEASURE, str(path), what],
                            capture_output=True, text=True, check=True).stdout
    return json.loads(output)


def make_profile(events: int):
    import torch
    from torch.profiler import ProfilerActivity, profile

    x = torch.ones(4)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(events // 4):  # torch 2.13 writes about five events per iteration
            x = x + 1
    return prof


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--events", type=int, default=500_000)
    wanted = parser.parse_args().events

    with tempfile.TemporaryDirectory() as scratch:
        trace_path = Path(scratch) / "trace.json"
        started = time.perf_counter()
        prof = make_profile(wanted)
        prof.export_chrome_trace(str(trace_path))
        print(f"made the trace in {time.perf_counter() - started:.1f} s: "
              f"{trace_path.stat().st_size / 2**20:.1f} MiB")
        size = trace_path.stat().st_size
        floor = measure_in_fresh_process(trace_path, "floor")
        reader = measure_in_fresh_process(trace_path, "reader")
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        started = time.perf_counter()
        averages = prof.key_averages()
        key_averages_seconds = time.perf_counter() - started
        key_averages_peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - before

    print(f"{floor['events']:,} events in the trace ({reader['events']:,} read by ours); "
          f"{len(averages)} operator names")
    print(f"  orjson floor (bytes -> objects): {floor['seconds']:7.2f} s  "
          f"peak +{floor['peak_above_start'] / 2**20:7.0f} MiB")
    print(f"  profile-all reader (file -> rows): {reader['seconds']:5.2f} s  "
          f"peak +{reader['peak_above_start'] / 2**20:7.0f} MiB")
    print(f"  key_averages():                  {key_averages_seconds:7.2f} s  "
          f"peak +{max(key_averages_peak, 0) / 2**20:7.0f} MiB (above this process's peak)")
    vs_floor = reader["seconds"] / floor["seconds"]
    vs_key_averages = key_averages_seconds / reader["seconds"]
    memory = reader["peak_above_start"] / size
    print("targets:")
    print(f"  reader / floor = {vs_floor:.2f}x (target <= 2x: "
          f"{'met' if vs_floor <= 2 else 'NOT met'})")
    print(f"  key_averages / reader = {vs_key_averages:.1f}x (target >= 10x: "
          f"{'met' if vs_key_averages >= 10 else 'NOT met'})")
    print(f"  reader peak / file size = {memory:.2f}x (target <= 3x: "
          f"{'met' if memory <= 3 else 'NOT met'}); the floor's: "
          f"{floor['peak_above_start'] / size:.2f}x")


if __name__ == "__main__":
    main()
