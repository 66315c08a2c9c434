"""The deep files of issue 40 at the sizes that hurt, each ingested by the command under an
address-space cap (prlimit) and a time bound: every one ends in a report whose 64 outer
levels are rows and whose doubts count the rest. Smaller cases of each reader, and their
rows, are tested beside the reader (test_nsys_csv, test_nsys_reader, test_hostile_files)."""

from __future__ import annotations

import json
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


def _long_paths_said(path, out, what: str) -> pa.Report:
    done = subprocess.run(["prlimit", f"--as={2 * 2**30}", sys.executable, "-m", "profile_all",
                           "ingest", str(path), "-o", str(out)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr[-2000:]
    report = pa.load(out)
    said = [d for d in report.meta.doubts if "of their names and paths in all" in d]
    assert len(said) == 1 and said[0].startswith(f"{path}: ") and what in said[0], said
    assert sum(f.stat().st_size for f in out.rglob("*") if f.is_file()) < 40 * 2**20
    return report


def test_ranges_under_long_named_parents_are_cut_by_their_paths_length(tmp_path):
    """2,000 ranges inside 62 nested ranges of 1,000-character names (a 287 KB trace): an
    ArrowMemoryError traceback after gigabytes; the paths of its region rows are bounded
    (1 MiB in all), the ranges beyond left out and said."""
    events = [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 1000,
               "dur": 5, "args": {}}]
    events += [{"ph": "X", "cat": "user_annotation", "name": f"{depth:02d}" + "a" * 1000,
                "pid": 1, "tid": 1, "ts": 1010 + depth, "dur": 900 - 2 * depth}
               for depth in range(62)]
    events += [{"ph": "X", "cat": "user_annotation", "name": f"leaf{i}", "pid": 1, "tid": 1,
                "ts": 1080 + i * 0.001, "dur": 0.0005} for i in range(2000)]
    trace = tmp_path / "leaves.json"
    trace.write_text(json.dumps({"traceEvents": events}))
    report = _long_paths_said(trace, tmp_path / "run", "annotations left out")
    regions = report.frame.query("scope == 'region' and metric == 'calls'")
    assert 0 < len(regions) < 62 + 2000


def test_nvtx_ranges_under_long_named_parents_are_cut_by_their_paths_length(tmp_path):
    """The same shape as an nsys pushpop CSV (its paths from ParentId)."""
    lines = [f"{1000 + d},{3000 - d},{2000 - 2 * d},0,0,:{d:02d}{'a' * 1000},1,1,{d},1,{d + 1},"
             f"{d if d else ''},:x,:n" for d in range(62)]
    lines += [f"{1100 + i},{1101 + i},1,0,1,:leaf{i},1,1,62,0,{100 + i},62,:x,:n"
              for i in range(2000)]
    path = tmp_path / "leaves_nvtx_pushpop_trace.csv"
    path.write_text("\n".join([PUSHPOP, *lines]) + "\n")
    _long_paths_said(path, tmp_path / "run", "NVTX ranges left out")


def test_a_pushpop_csv_of_20000_levels_that_are_no_level(tmp_path):
    """Negative levels, one a row: one pass a level took 18 s for 5,000 rows and past 120 s
    for 20,000; a level that is no whole number from 0 starts no path."""
    path = tmp_path / "odd_nvtx_pushpop_trace.csv"
    path.write_text("\n".join([PUSHPOP, *(f"{i},{i + 10},10,0,10,r{i},1,1,{-i},0,{i},,:x,:n"
                                          for i in range(1, DEPTH + 1))]) + "\n")
    done = subprocess.run([sys.executable, "-m", "profile_all", "ingest", str(path), "-o",
                           str(tmp_path / "run")], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    calls = pa.load(tmp_path / "run").frame.query("scope == 'region' and metric == 'calls'")
    assert len(calls) == DEPTH and (calls["parent"] == "").all()


def test_a_trace_of_100000_distinct_range_names_gives_20000_regions(tmp_path):
    """A 12 MB trace of 100,000 annotations each named apart took 867 MB and wrote 85 MB (ten
    rows a region): the first 20,000 regions are rows, the rest said; under a 2 GiB cap."""
    events = [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 0,
               "dur": 5, "args": {}}]
    events += [{"ph": "X", "cat": "user_annotation", "name": f"batch {i}", "pid": 1, "tid": 1,
                "ts": 10 + 2 * i, "dur": 1} for i in range(100_000)]
    trace = tmp_path / "names.json"
    trace.write_text(json.dumps({"traceEvents": events}))
    report = _long_paths_said(trace, tmp_path / "run", "80,000 annotations left out past the "
                              "first 20,000 regions")
    regions = report.frame.query("scope == 'region' and metric == 'calls'")
    assert len(regions) == 20_000


def _capped_ingest_said(trace, events: list[dict], doubt: str) -> pa.Report:
    """`events` written to `trace` and ingested by the command under a 2 GiB cap: its
    report, whose doubts say `doubt` once, of that file, and whose folder stays small."""
    trace.write_text(json.dumps({"traceEvents": events}))
    out = trace.parent / "run"
    done = subprocess.run(["prlimit", f"--as={2 * 2**30}", sys.executable, "-m", "profile_all",
                           "ingest", str(trace), "-o", str(out)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr[-2000:]
    report = pa.load(out)
    said = [line for line in report.meta.doubts if doubt in line]
    assert len(said) == 1 and said[0].startswith(f"{trace}: "), report.meta.doubts
    assert sum(f.stat().st_size for f in out.rglob("*") if f.is_file()) < 40 * 2**20
    return report


def test_call_stacks_under_long_named_frames_are_bounded(tmp_path):
    """A torch 2 with_stack trace of 2,000 operators, each in a Python call of its own inside
    62 of 1,000-character names (a 0.4 MB trace): 124 MB of stacks unbounded; their text is
    held to 1 MiB, the operators beyond it have none, and that is said."""
    def frame(name, ts, dur):
        return {"ph": "X", "cat": "python_function", "name": name, "pid": 1, "tid": 1,
                "ts": ts, "dur": dur}
    events = [frame(f"train.py({depth}): " + "f" * 1000, 1000 + depth, 9000 - 2 * depth)
              for depth in range(62)]
    for i in range(2000):
        events += [frame(f"model.py({i}): forward", 1100 + i * 3, 2),
                   {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1,
                    "ts": 1100.5 + i * 3, "dur": 1, "args": {}}]
    report = _capped_ingest_said(tmp_path / "stacks.json", events, "have no call stack")
    stacks = report.operators(by="stack")
    assert 0 < len(stacks) < 2000 and stacks["call_stack"].str.len().sum() <= 2**20
    assert stacks["call_stack"].str.startswith("model.py(").all()


def test_the_operator_tree_under_long_named_operators_is_bounded(tmp_path):
    """2,000 operators of distinct names inside 62 nested ones of 1,000-character names
    (a 0.4 MB trace): 124 MB of tree paths unbounded; the tree holds 1 MiB of names and
    paths, the nodes beyond are left out and said."""
    def op(name, ts, dur):
        return {"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 1, "ts": ts,
                "dur": dur, "args": {}}
    events = [op(f"{depth:02d}" + "o" * 1000, 1000 + depth, 9000 - 2 * depth)
              for depth in range(62)]
    events += [op(f"aten::leaf{i}", 1100 + i * 3, 1) for i in range(2000)]
    report = _capped_ingest_said(tmp_path / "tree.json", events,
                                 "nodes of the operator tree left out")
    tree = report.operator_tree()
    # (the outer levels' own paths, 1,000 characters a level more each, fill it by level 45)
    assert 0 < len(tree) < 62 and (tree["path"].str.len() + tree["name"].str.len()
                                   ).sum() <= 2**20
