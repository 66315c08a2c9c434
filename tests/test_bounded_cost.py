"""The deep files of issue 40 at the sizes that hurt, each ingested by the command under an
address-space cap (prlimit) and a time bound: every one ends in a report whose 64 outer
levels are rows and whose doubts count the rest. Smaller cases of each reader, and their
rows, are tested beside the reader (test_nsys_csv, test_nsys_reader, test_hostile_files)."""

from __future__ import annotations

import sqlite3
import subprocess
import sys

import profile_all as pa
from test_nsys_csv import PUSHPOP

DEPTH = 20_000


def _ingested_within_bounds(path, out) -> pa.Report:
    done = subprocess.run(["prlimit", f"--as={2 * 2**30}", sys.executable, "-m", "profile_all",
                           "ingest", str(path), "-o", str(out)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr[-2000:]
    report = pa.load(out)
    assert f"{path}: {DEPTH - 64:,} NVTX ranges nested deeper than 64 levels left out " \
        "(their time is in the ranges around them)" in report.meta.doubts
    calls = report.frame.query("scope == 'region' and metric == 'calls'")
    assert len(calls) == 64 and calls["parent"].str.count("/").max() == 62
    return report


def test_an_nsys_pushpop_csv_of_20000_levels(tmp_path):
    """1.2 MB: no result in 150 s before the cap (5,000 levels: 1.51 GB)."""
    path = tmp_path / "deep_nvtx_pushpop_trace.csv"
    path.write_text("\n".join([PUSHPOP, *(
        f"{1000 + level},{90000 - level},{89000 - 2 * level},0,0,:r{level},1,1,{level},1,"
        f"{level + 1},{level if level else ''},:x,:r{level}" for level in range(DEPTH))]) + "\n")
    _ingested_within_bounds(path, tmp_path / "run")


def test_an_nsys_sqlite_export_of_20000_levels(tmp_path):
    """0.5 MB: an ArrowMemoryError traceback before the cap (5,000 levels: 2.8 GB)."""
    path = tmp_path / "deep.sqlite"
    with sqlite3.connect(path) as db:
        db.execute("create table StringIds (id integer primary key, value text)")
        db.execute("create table NVTX_EVENTS (start integer, end integer, text text, "
                   "textId integer, eventType integer, globalTid integer, domainId integer)")
        db.executemany("insert into NVTX_EVENTS values (?, ?, ?, NULL, 59, 1, 0)",
                       [(1000 + level, 1000 + 2 * DEPTH - level + 10, f"r{level}")
                        for level in range(DEPTH)])
    _ingested_within_bounds(path, tmp_path / "run")
