"""Impossible values in other tools' files, through `profile-all ingest` as a user runs it: a
few impossible events among good ones are left out of every total and said as a doubt
(the run `partial`); a file most of whose events are impossible, and a pstats file with
any, is refused in one line (exit code 2, nothing written). The expected totals are
computed here from the hostile files themselves, with this module's own rule."""

from __future__ import annotations

import csv
import json
import marshal
import math
import sqlite3
import statistics

import pytest

import profile_all as pa
from conftest import profile_all_here

#: the bound the README states: about a year, in seconds
YEAR = 3.2e7
GOOD_OPS = 20


def _op(name, ts, dur, cat="cpu_op", **args):
    return {"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": dur,
            "args": args}


def _possible(event, median_ts) -> bool:
    """This test's own rule: numbers, finite, dur and FLOPs >= 0, dur at most a year,
    start and end within a year of the median start (µs in the file)."""
    ts, dur, flops = event["ts"], event["dur"], event["args"].get("FLOPs", 0)
    if any(type(v) not in (int, float) or not math.isfinite(v) for v in (ts, dur, flops)):
        return False
    if flops < 0:
        return False
    return 0 <= dur <= YEAR * 1e6 and abs(ts - median_ts) <= YEAR * 1e6 \
        and abs(ts + dur - median_ts) <= YEAR * 1e6


def _trace(tmp_path, bad: dict, name="trace.json"):
    """GOOD_OPS operators one after the other (no nesting: self time = dur), then `bad`."""
    events = [_op("aten::mm" if i % 2 else "aten::add", 1000 * i, 100 + i)
              for i in range(GOOD_OPS)] + [bad]
    path = tmp_path / name
    path.write_text(json.dumps({"traceEvents": events}))
    return path, events


def _refused(result, run_dir) -> str:
    """Exit 2, one line on stderr without traceback, no run folder; the line."""
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    assert not run_dir.exists()
    return lines[0]


def _kept(result, run_dir, doubt: str) -> pa.Report:
    """Exit 0, status partial, the doubt in meta.json and summary.md; the report."""
    assert result.returncode == 0, result.stderr
    report = pa.load(run_dir)
    assert report.meta.status == "partial"
    assert doubt in report.meta.doubts
    assert doubt in (run_dir / "summary.md").read_text()
    return report


def _totals(frame, scope, metric):
    picked = frame[(frame["scope"] == scope) & (frame["metric"] == metric)
                   & (frame["stat"] == "total")]
    return dict(zip(picked["name"], picked["value"], strict=True))


@pytest.mark.parametrize("bad, said", [
    (_op("aten::relu", 30000, -50), "dur = -50 µs: negative"),
    (_op("aten::relu", 1e300, 1e300), "dur = 1e+300 µs: over 3.2e+07 s, about a year"),
    (_op("aten::relu", 1e300, 10), "ts = 1e+300 µs: more than 3.2e+07 s (about a year) from "
                                   "the median start of the file's events"),
    (_op("aten::relu", 30000, "abc"), "dur = 'abc': not a number"),
    (_op("aten::relu", 30000, None), "dur = null: not a number"),
    (_op("aten::relu", 30000, "5"), "dur = '5': not a number"),
    (_op("aten::relu", 30000, 5, FLOPs=-1), "args.FLOPs = -1: negative"),
])
def test_a_stray_impossible_event_is_left_out_and_said(tmp_path, bad, said):
    path, events = _trace(tmp_path, bad)
    result = profile_all_here("ingest", path, "-o", tmp_path / "run")
    doubt = (f"{path}: 1 of {GOOD_OPS + 1} events hold an impossible value and are left out "
             f"of every total; e.g. event {GOOD_OPS} 'aten::relu' (operator), {said}")
    report = _kept(result, tmp_path / "run", doubt)
    median = statistics.median(e["ts"] for e in events
                               if type(e["ts"]) in (int, float) and math.isfinite(e["ts"]))
    expected: dict[str, float] = {}
    for event in events:
        if _possible(event, median):
            expected[event["name"]] = expected.get(event["name"], 0.0) + event["dur"] * 1e-6
    assert "aten::relu" not in expected
    for metric in ("cpu_time", "self_time"):
        assert _totals(report.frame, "operator", metric) == pytest.approx(expected)
    assert "aten::relu" not in set(report.operators()["name"])


def test_a_trace_of_impossible_events_is_refused(tmp_path):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps([_op("aten::relu", 0, -50), _op("aten::mm", 10, 5),
                                _op("aten::add", 20, float("1e300"))]))
    line = _refused(profile_all_here("ingest", path, "-o", tmp_path / "run"), tmp_path / "run")
    assert line == (f"profile-all: error: {path}: 2 of 3 events hold an impossible value, "
                    "over 50%: a broken file, refused; e.g. event 0 'aten::relu' (operator), "
                    "dur = -50 µs: negative")


def test_a_refused_file_stops_the_good_ones_too(tmp_path):
    good, _ = _trace(tmp_path, _op("aten::relu", 30000, 5), "good.json")
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"traceEvents": [_op("k", 0, -1, cat="kernel")]}))
    line = _refused(profile_all_here("ingest", good, bad, "-o", tmp_path / "run"), tmp_path / "run")
    assert line == (f"profile-all: error: {bad}: 1 of 1 events hold an impossible value, "
                    "over 50%: a broken file, refused; e.g. event 0 'k' (kernel), dur = -1 µs: "
                    "negative")


def test_a_broken_trace_in_a_directory_is_refused_not_left_out(tmp_path):
    """A directory's files that are not traces are left out; a broken trace is a trace."""
    (tmp_path / "traces").mkdir()
    _trace(tmp_path / "traces", _op("aten::relu", 30000, 5), "rank0.json")
    bad = tmp_path / "traces" / "rank1.json"
    bad.write_text(json.dumps([_op("aten::mm", 0, "abc")]))
    line = _refused(profile_all_here("ingest", tmp_path / "traces", "-o", tmp_path / "run"),
                    tmp_path / "run")
    assert line == (f"profile-all: error: {bad}: 1 of 1 events hold an impossible value, "
                    "over 50%: a broken file, refused; e.g. event 0 'aten::mm' (operator), "
                    "dur = 'abc': not a number")


F, G = ("a.py", 1, "f"), ("a.py", 2, "g")


@pytest.mark.parametrize("stats, said", [
    ({F: (1, 1, float("nan"), -5.0, {}), G: (2, 2, 0.5, 0.5, {F: (2, 2, 0.5, 0.5)})},
     "function a.py:1(f) (entry 0): tt (self time) = nan: not finite"),
    ({F: (1, 1, 0.1, 0.6, {}), G: (2, 2, 0.5, -5.0, {F: (2, 2, 0.5, 0.5)})},
     "function a.py:2(g) (entry 1): ct (cumulative time) = -5 s: negative"),
    ({F: (1, 1, 0.1, 0.6, {}), G: (2, 2, 0.5, 0.5, {F: (2, 2, 0.5, float("inf"))})},
     "the calls of a.py:2(g) (entry 1) from a.py:1(f): ct (cumulative time) = inf: "
     "not finite"),
    ({F: (1, 1, 0.1, 4e7, {})}, "function a.py:1(f) (entry 0): ct (cumulative time) = 4e+07 s: "
                                "over 3.2e+07 s, about a year"),
])
def test_a_pstats_file_with_an_impossible_number_is_refused(tmp_path, stats, said):
    path = tmp_path / "bad.prof"
    path.write_bytes(marshal.dumps(stats))
    line = _refused(profile_all_here("ingest", path, "-o", tmp_path / "run"), tmp_path / "run")
    assert line == (f"profile-all: error: {path}: {said}; a pstats file's times are totals "
                    "that depend on each other, none can be left out: refused")


GPU_TRACE = "Start (ns),Duration (ns),CorrId,GrdX,Bytes (MB),SrcMemKd,DstMemKd,Device,Name"


def _gpu_csv(tmp_path, durations):
    path = tmp_path / "gpu.csv"
    lines = [GPU_TRACE] + [f"{1000000 + 10000 * i},{dur},{i},64,,,,GPU (0),kern{i % 2}"
                           for i, dur in enumerate(durations)]
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize("bad, said", [
    ("abc", "Duration (ns) = 'abc': not a number"), ("", "Duration (ns) = '': empty"),
    ("-5000", "Duration (ns) = -5000: negative"), ("nan", "Duration (ns) = nan: not finite"),
])
def test_nsys_csv_rows_whose_duration_is_not_a_number(tmp_path, bad, said):
    durations = [500 + i for i in range(9)]
    durations.insert(3, bad)
    path = _gpu_csv(tmp_path, durations)
    result = profile_all_here("ingest", path, "-o", tmp_path / "run")
    doubt = (f"{path}: 1 of 10 rows hold an impossible value and are left out of every total;"
             f" e.g. line 5 'kern1', {said}")
    report = _kept(result, tmp_path / "run", doubt)
    expected: dict[str, float] = {}
    with open(path, newline="") as stream:
        for record in csv.DictReader(stream):
            try:
                ns = float(record["Duration (ns)"])
            except ValueError:
                continue
            if math.isfinite(ns) and ns >= 0:
                expected[record["Name"]] = expected.get(record["Name"], 0.0) + ns * 1e-9
    assert _totals(report.frame, "kernel", "gpu_time") == pytest.approx(expected)
    calls = _totals(report.frame, "kernel", "calls")
    assert sum(calls.values()) == 9
    run = report.frame[(report.frame["scope"] == "run") & (report.frame["metric"] == "gpu_time")]
    assert run["value"].item() == pytest.approx(sum(expected.values()))


def test_nsys_csv_of_impossible_rows_is_refused(tmp_path):
    path = _gpu_csv(tmp_path, ["abc", "-1", 500])
    line = _refused(profile_all_here("ingest", path, "-o", tmp_path / "run"), tmp_path / "run")
    assert line == (f"profile-all: error: {path}: 2 of 3 rows hold an impossible value, over "
                    "50%: a broken file, refused; e.g. line 2 'kern0', Duration (ns) = 'abc': "
                    "not a number")


def _export(path, kernels):
    """A minimal Nsight Systems sqlite export: kernels (start, end) named `saxpy`."""
    with sqlite3.connect(path) as db:
        db.execute("create table StringIds (id integer primary key, value text)")
        db.execute("insert into StringIds values (1, 'saxpy')")
        db.execute("create table CUPTI_ACTIVITY_KIND_KERNEL (start integer, end integer, "
                   "correlationId integer, globalPid integer, demangledName integer, "
                   "shortName integer)")
        db.executemany("insert into CUPTI_ACTIVITY_KIND_KERNEL values (?, ?, ?, 0, 1, 1)",
                       [(start, end, n) for n, (start, end) in enumerate(kernels)])
    return path


def test_nsys_sqlite_kernel_that_ends_before_it_starts(tmp_path):
    kernels = [(1000 * i, 1000 * i + 400 + i) for i in range(8)]
    kernels[2] = (2000, 1000)
    path = _export(tmp_path / "job.sqlite", kernels)
    result = profile_all_here("ingest", path, "-o", tmp_path / "run")
    doubt = (f"{path}: 1 of 8 events hold an impossible value and are left out of every "
             "total; e.g. CUPTI_ACTIVITY_KIND_KERNEL rowid 3 'saxpy', end - start = -1000 ns: "
             "negative")
    report = _kept(result, tmp_path / "run", doubt)
    with sqlite3.connect(path) as db:
        [(ns,)] = db.execute("select sum(end - start) from CUPTI_ACTIVITY_KIND_KERNEL "
                             "where end >= start").fetchall()
    assert _totals(report.frame, "kernel", "gpu_time") == {"saxpy": pytest.approx(ns * 1e-9)}
    assert _totals(report.frame, "kernel", "calls") == {"saxpy": 7}


def test_nsys_sqlite_of_impossible_kernels_is_refused(tmp_path):
    path = _export(tmp_path / "job.sqlite", [(0, -5), (10, 20)])
    _export(tmp_path / "other.sqlite", [(0, -5), (10, 5), (10, 20)])
    line = _refused(profile_all_here("ingest", tmp_path / "other.sqlite", "-o", tmp_path / "run"),
                    tmp_path / "run")
    assert line == (f"profile-all: error: {tmp_path / 'other.sqlite'}: 2 of 3 events hold an "
                    "impossible value, over 50%: a broken file, refused; e.g. "
                    "CUPTI_ACTIVITY_KIND_KERNEL rowid 1 'saxpy', end - start = -5 ns: negative")
    assert profile_all_here("ingest", path, "-o", tmp_path / "half").returncode == 0


def test_mprof_samples_that_are_impossible(tmp_path):
    lines = ["CMDLINE python train.py"] + [f"MEM {100 + i:.1f} {1700000000 + i / 10:.4f}"
                                            for i in range(10)]
    lines[4] = "MEM -5.0 1700000000.3000"
    lines[7] = "MEM nan 1700000000.6000"
    lines.append("MEM 999.0 1e300")
    path = tmp_path / "mprofile_1.dat"
    path.write_text("\n".join(lines) + "\n")
    result = profile_all_here("ingest", path, "-o", tmp_path / "run")
    doubt = (f"{path}: 3 of 11 samples hold an impossible value and are left out of every "
             "total; e.g. line 5 (MEM sample), MiB = -5 MiB: negative")
    report = _kept(result, tmp_path / "run", doubt)
    valid = []
    for line in path.read_text().splitlines()[1:]:
        mib, stamp = map(float, line.split()[1:])
        if math.isfinite(mib) and mib >= 0 and abs(stamp - 1700000000) <= YEAR:
            valid.append(mib * 2**20)
    frame = report.frame
    peak = frame[(frame["metric"] == "peak_rss") & (frame["scope"] == "run")]["value"].item()
    count = frame[frame["metric"] == "memory_samples"]["value"].item()
    assert (peak, count) == (max(valid), len(valid))


def test_mprof_samples_out_of_time_order_and_repeated_functions(tmp_path):
    """An mprof file written twice (its second CMDLINE, samples and FUNC lines again): the
    samples earlier than one before them and the FUNC lines repeated are left out, said;
    the samples kept those of the file once."""
    once = ["CMDLINE python train.py", *[f"MEM {100 + i:.1f} {1700000000 + i / 10:.4f}"
                                         for i in range(10)],
            "FUNC train.step 100.0 1700000000.1000 105.0 1700000000.5000 0"]
    path = tmp_path / "mprofile_1.dat"
    path.write_text("\n".join(once + once) + "\n")
    result = profile_all_here("ingest", path, "-o", tmp_path / "run")
    report = _kept(result, tmp_path / "run", f"{path}: 10 of 20 samples no later than a sample "
                   "before them (a file written twice, or joined to another) left out")
    assert f"{path}: 1 FUNC lines that repeat one before them counted once" in \
        report.meta.doubts
    frame = report.frame
    count = frame[frame["metric"] == "memory_samples"]["value"].item()
    peak = frame[(frame["metric"] == "peak_rss") & (frame["scope"] == "run")]["value"].item()
    assert (count, peak) == (10, 109.0 * 2**20)


def test_real_files_of_other_projects_raise_no_doubt(fixtures, tmp_path):
    files = [*sorted((fixtures / "traces").glob("*.json.gz")),
             fixtures / "nsys" / "saxpy_mpi_cuda_2022.sqlite",
             fixtures / "nsys" / "pax_fsdp4_proc0_nvtx_pushpop_trace.csv.xz",
             fixtures / "pstats" / "cprofile-cycle.pstats"]
    result = profile_all_here("ingest", *files, "-o", tmp_path / "run")
    assert result.returncode == 0, result.stderr
    meta = pa.load(tmp_path / "run").meta
    assert meta.status == "complete"
    assert not [doubt for doubt in meta.doubts if "impossible" in doubt]
