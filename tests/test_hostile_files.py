"""Files made to hurt the reader (readers/limits.py): a gzip that unpacks to far more than
it weighs, a name megabytes long, a CSV field, a pstats file that is not what pstats
writes, an sqlite string, an mprofile line, and events whose fields have the wrong type.
Each is refused in one line (exit 2, no traceback, nothing written), or its events left
out and said; the limits are settable (--max-unpacked, --max-field, the environment)."""

from __future__ import annotations

import gzip
import json
import lzma
import marshal
import sqlite3
import subprocess
import sys

import pytest

import profile_all as pa
from conftest import profile_all_here

MIB = 2**20
GOOD = [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1,
         "ts": 1000 * i, "dur": 100, "args": {}} for i in range(20)]


def _refused(result, out, said: str) -> None:
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    assert said in lines[0], lines[0]
    assert not out.exists() and not list(out.parent.glob(f".{out.name}*"))


def _bomb(path, name_bytes: int) -> None:
    """A gzip trace of one event whose name is `name_bytes` long: kilobytes on disk."""
    with gzip.open(path, "wb", compresslevel=9) as stream:
        stream.write(b'{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "')
        for _ in range(name_bytes // MIB):
            stream.write(b"A" * MIB)
        stream.write(b'", "pid": 1, "tid": 1, "ts": 0, "dur": 10, "args": {}}]}')


def test_a_gzip_bomb_is_refused_by_its_name_and_by_its_size(tmp_path):
    bomb = tmp_path / "bomb.json.gz"
    _bomb(bomb, 48 * MIB)
    assert bomb.stat().st_size < MIB
    out = tmp_path / "out"
    # the event is refused before it is parsed: longer than 4 x --max-field
    _refused(profile_all_here("ingest", bomb, "-o", out),
             out, "an event is at least 44 MiB long, over the 4 x --max-field an event may "
                  "hold: refused, not read")
    # and its name, once the event may be that long
    _refused(profile_all_here("ingest", bomb, "--max-field", "20M", "-o", out),
             out, "an event's name is 48 Mi characters long, over the 20 Mi characters a "
                  "field may hold (--max-field): refused, not read")
    # the size bound stops the unpacking itself, as it passes it
    _refused(profile_all_here("ingest", bomb, "--max-unpacked", "8M", "-o", out),
             out, "unpacks to more than 8 MiB (--max-unpacked): refused, not read")
    _refused(profile_all_here("ingest", bomb, "-o", out, env={"PROFILE_ALL_MAX_UNPACKED": "8M"}),
             out, "unpacks to more than 8 MiB")
    # a bomb in a directory is refused, not left out as "not a trace"
    folder = tmp_path / "traces"
    folder.mkdir()
    (folder / "good.json").write_text(json.dumps({"traceEvents": GOOD}))
    bomb.rename(folder / "bomb.json.gz")
    _refused(profile_all_here("ingest", folder, "-o", out), out, "an event is at least 44 MiB")


def test_the_limits_are_the_users_to_raise(tmp_path):
    trace = tmp_path / "long.json"
    events = [*GOOD, {**GOOD[0], "name": "x" * (2 * MIB), "ts": 30_000}]
    trace.write_text(json.dumps({"traceEvents": events}))
    out = tmp_path / "out"
    _refused(profile_all_here("ingest", trace, "-o", out), out, "2 Mi characters long")
    done = profile_all_here("ingest", trace, "--max-field", "4M", "-o", out)
    assert done.returncode == 0, done.stderr
    _refused(profile_all_here("ingest", trace, "--max-field", "lots", "-o", tmp_path / "o2"),
             tmp_path / "o2", "max_field wants bytes like 8G or 512M, got 'lots'")


@pytest.mark.parametrize("bad, said", [
    ({"name": {"a": 1}}, "an event whose name is not text"),
    ({"name": [1, 2]}, "an event whose name is not text"),
    ({"name": None}, "an event whose name is not text"),
    ({"ts": "zero"}, "ts = 'zero': not a number"),
    ({"dur": [1]}, "dur = [1]: not a number"),
])
def test_events_whose_fields_have_the_wrong_type_are_left_out_and_said(tmp_path, bad, said):
    trace = tmp_path / "trace.json"
    trace.write_text(json.dumps({"traceEvents": [*GOOD, {**GOOD[0], "ts": 30_000, **bad}]}))
    done = profile_all_here("ingest", trace, "-o", tmp_path / "out")
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    meta = pa.load(tmp_path / "out").meta
    assert meta.status == "partial"
    [doubt] = [d for d in meta.doubts if "impossible" in d]
    assert "1 of 21 events hold an impossible value" in doubt and said in doubt, doubt


@pytest.mark.parametrize("bad", [{"args": "a string"}, {"cat": {"an": "object"}},
                                 {"pid": {"an": "object"}}])
def test_fields_of_no_consequence_with_the_wrong_type_are_no_traceback(tmp_path, bad):
    trace = tmp_path / "trace.json"
    trace.write_text(json.dumps({"traceEvents": [*GOOD, {**GOOD[0], "ts": 30_000, **bad}]}))
    done = profile_all_here("ingest", trace, "-o", tmp_path / "out")
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr


@pytest.mark.parametrize("content, said", [
    (marshal.dumps([1, 2, 3]), "not a file profile-all reads"),
    (marshal.dumps({1: 2}), "not a file profile-all reads"),
    (marshal.dumps({("f.py", 1, "g"): (1, 1, 0.1, 0.1, {"caller": 1})}),
     "entry 0 is not what pstats writes"),
    (marshal.dumps({("f.py", 1, "g" * (2 * MIB)): (1, 1, 0.1, 0.1, {})}),
     "entry 0's name is 2 Mi characters long"),
])
def test_pstats_files_are_checked_before_and_after_marshal(tmp_path, content, said):
    path = tmp_path / "p.prof"
    path.write_bytes(content)
    out = tmp_path / "out"
    _refused(profile_all_here("ingest", path, "-o", out), out, said)


def test_an_nsys_csv_with_a_field_too_long_and_one_too_large(tmp_path):
    header = (b"Start (ns),End (ns),Duration (ns),DurChild (ns),DurNonChild (ns),Name,PID,"
              b"TID,Lvl,NumChild,RangeId,ParentId,RangeStack,NameTree\n")
    path = tmp_path / "nvtx_pushpop_trace.csv.xz"
    with lzma.open(path, "wb") as stream:
        stream.write(header)
        for index in range(12):
            name = b"n" * (2 * MIB) if index == 11 else b"range"
            stream.write(b"%d,%d,10,0,10,%s,1,1,0,0,%d,,:%d,x\n"
                         % (index * 100, index * 100 + 10, name, index, index))
    out = tmp_path / "out"
    _refused(profile_all_here("ingest", path, "-o", out), out, "a field of column 'Name' is 2 Mi")
    _refused(profile_all_here("ingest", path, "--max-unpacked", "1M", "-o", out), out,
             "unpacks to more than 1 MiB")


def test_an_nsys_sqlite_string_too_long(tmp_path):
    path = tmp_path / "export.sqlite"
    db = sqlite3.connect(path)
    db.execute("create table StringIds (id integer primary key, value text)")
    db.execute("create table NVTX_EVENTS (start integer, end integer, text text, "
               "textId integer, eventType integer, globalTid integer)")
    db.execute("insert into StringIds values (1, ?)", ("s" * (2 * MIB),))
    db.commit()
    db.close()
    out = tmp_path / "out"
    _refused(profile_all_here("ingest", path, "-o", out), out,
             "a string of StringIds.value is 2 Mi")


def test_an_mprofile_line_too_long(tmp_path):
    path = tmp_path / "mprofile.dat"
    path.write_text("CMDLINE python x.py\nMEM 10.0 1.0\nFUNC " + "f" * (2 * MIB)
                    + " 1 1 1 2 0\nMEM 11.0 2.0\n")
    out = tmp_path / "out"
    _refused(profile_all_here("ingest", path, "-o", out), out, "line 3 is 2 Mi characters long")


def test_a_file_whose_reading_would_not_fit_the_free_memory_is_refused():
    import psutil

    from profile_all.readers import chrome_trace, limits

    free = psutil.virtual_memory().available
    bound = limits.current()
    with pytest.raises(limits.BeyondLimits, match=r"to read needs about .* more and .* is "
                                                  r"free: refused, not read"):
        bound.fits_memory("big.json", int(free * 2), chrome_trace.PEAK_PER_BYTE - 1)
    bound.fits_memory("small.json", 100 * MIB, chrome_trace.PEAK_PER_BYTE - 1)


def test_an_event_too_long_is_refused_when_another_follows_it(tmp_path):
    """The event across a chunk's edge is measured to the next event's start: a 12 MiB
    args value followed by an event was once parsed whole, and accepted."""
    path = tmp_path / "bigargs.json"
    with open(path, "wb") as stream:
        stream.write(b'{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", '
                     b'"pid": 1, "tid": 1, "ts": 0, "dur": 10, "args": {"x": "')
        for _ in range(12):
            stream.write(b"b" * MIB)
        stream.write(b'"}}, ' + json.dumps(GOOD[1]).encode() + b"]}")
    out = tmp_path / "out"
    _refused(profile_all_here("ingest", path, "-o", out), out, "an event is at least 8 MiB long")


def test_an_nsys_csv_line_too_long_is_refused_before_it_is_held(tmp_path):
    header = (b"Time (%),Total Time (ns),Instances,Avg (ns),Med (ns),Min (ns),Max (ns),"
              b"StdDev (ns),Style,Range\n")
    path = tmp_path / "nvtx_sum.csv.xz"
    with lzma.open(path, "wb", preset=1) as stream:
        stream.write(header)
        stream.write(b"100.0,10,1,10,10,10,10,0,PushPop,")
        for _ in range(40):
            stream.write(b"r" * MIB)
        stream.write(b"\n")
    out = tmp_path / "out"
    _refused(profile_all_here("ingest", path, "-o", out), out, "a line is over ")


def test_pstats_of_the_wrong_values_is_one_line_and_nothing_on_stdout(tmp_path):
    path = tmp_path / "c.prof"
    path.write_bytes(marshal.dumps({("f", 1, "g"): (1, 1, 0.1, 0.2, {}),
                                    ("x", 1, "y"): compile("1", "a", "eval")}))
    out = tmp_path / "out"
    done = profile_all_here("ingest", path, "-o", out)
    _refused(done, out, str(path))
    assert done.stdout == ""


@pytest.mark.parametrize("rank, said", [("9" * 5000, "not a rank"),
                                        ("1" + "0" * 30, "not a rank"), (2**40, "not a rank")])
def test_a_rank_beyond_any_job_is_one_line(tmp_path, rank, said):
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"distributedInfo": {"rank": rank}, "traceEvents": GOOD}))
    out = tmp_path / "out"
    _refused(profile_all_here("ingest", path, "-o", out), out, said)


def test_a_trace_with_kernels_but_no_runtime_calls_is_read(tmp_path):
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": [
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 10,
         "dur": 5},
        {"ph": "X", "cat": "user_annotation", "name": "region", "pid": 1, "tid": 1, "ts": 0,
         "dur": 60},
        {"ph": "X", "cat": "kernel", "name": "kern", "pid": 0, "tid": 7, "ts": 3, "dur": 2,
         "args": {"correlation": 1}}]}))
    done = profile_all_here("ingest", path, "-o", tmp_path / "out")
    assert done.returncode == 0, done.stderr
    frame = pa.load(tmp_path / "out").frame
    assert (frame["name"] == "kern").any() and (frame["name"] == "region").any()


@pytest.mark.parametrize("table, column", [("NVTX_EVENTS", "globalTid"),
                                           ("CUPTI_ACTIVITY_KIND_KERNEL", "globalPid"),
                                           ("ENUM_NSYS_EVENT_CLASS", "id")])
def test_an_nsys_sqlite_whose_ids_hold_text_is_no_traceback(tmp_path, table, column):
    path = tmp_path / "export.sqlite"
    db = sqlite3.connect(path)
    db.execute("create table StringIds (id integer primary key, value text)")
    db.execute("create table NVTX_EVENTS (start integer, end integer, text text, "
               "textId integer, eventType integer, globalTid integer, domainId integer)")
    db.execute("create table CUPTI_ACTIVITY_KIND_KERNEL (start integer, end integer, "
               "shortName integer, demangledName integer, correlationId integer, "
               "globalPid integer, deviceId integer, streamId integer)")
    db.execute("create table ENUM_NSYS_EVENT_CLASS (id integer, name text)")
    db.execute("insert into StringIds values (1, 'kern')")
    db.executemany("insert into NVTX_EVENTS values (?, ?, 'r', NULL, 59, ?, 0)",
                   [(i * 100, i * 100 + 50, (1 << 24) + 1) for i in range(3)])
    db.executemany("insert into CUPTI_ACTIVITY_KIND_KERNEL values (?, ?, 1, 1, ?, ?, 0, 7)",
                   [(i * 100 + 10, i * 100 + 20, i, 1 << 24) for i in range(3)])
    db.execute("insert into ENUM_NSYS_EVENT_CLASS values "
               "(67, 'TRACE_PROCESS_EVENT_CUDABACKTRACE')")
    db.execute(f'update "{table}" set "{column}" = \'text\' where rowid = 1')
    db.commit()
    db.close()
    done = profile_all_here("ingest", path, "-o", tmp_path / "out")
    assert "Traceback" not in done.stderr and done.returncode in (0, 2), done.stderr
    if done.returncode == 0:
        assert "left out: an identifier that is not a number" in \
            (tmp_path / "out" / "summary.md").read_text()


def test_annotations_nested_deeper_than_the_cap_are_left_out_and_said(tmp_path):
    """5,000 nested record_function ranges (a 0.5 MB trace: 25 s and 2.65 GB before the
    cap), ingested under a 1 GiB address-space limit: the 64 outermost are rows."""
    depth = 5000
    events = [{"ph": "X", "cat": "user_annotation", "name": f"level{level}", "pid": 1,
               "tid": 1, "ts": 1000 + level, "dur": 2 * (depth - level) + 10}
              for level in range(depth)] + GOOD
    trace = tmp_path / "deep.json"
    trace.write_text(json.dumps({"traceEvents": events}))
    done = subprocess.run(["prlimit", f"--as={3 * 2**30}", sys.executable, "-m", "profile_all",
                           "ingest", str(trace), "-o", str(tmp_path / "run")],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    report = pa.load(tmp_path / "run")
    assert f"{trace}: {depth - 64:,} annotations nested deeper than 64 levels left out " \
        "(their time is in the ranges around them)" in report.meta.doubts
    regions = report.frame[(report.frame["scope"] == "region")
                           & (report.frame["metric"] == "calls")]
    assert len(regions) == 64


def test_repeated_events_and_ranges_that_do_not_nest_are_left_out_and_said(tmp_path):
    """A kernel and a step written twice (a GPU total twice the busy time, two steps), and a
    range that starts inside another and ends after it (a child longer than its parent):
    each left out, said, the report partial; the figures are those of the events once."""
    step = {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1,
            "ts": 80, "dur": 100}
    kernel = {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 130,
              "dur": 5}
    events = [step, dict(step), kernel, dict(kernel),
              {"ph": "X", "cat": "user_annotation", "name": "outer", "pid": 1, "tid": 1,
               "ts": 90, "dur": 30},
              {"ph": "X", "cat": "user_annotation", "name": "overlapping", "pid": 1,
               "tid": 1, "ts": 95, "dur": 40}, *GOOD]
    trace = tmp_path / "twice.json"
    trace.write_text(json.dumps({"traceEvents": events}))
    done = profile_all_here("ingest", trace, "-o", tmp_path / "run")
    assert done.returncode == 0, done.stderr[-2000:]
    report = pa.load(tmp_path / "run")
    assert report.meta.status == "partial"
    assert f"{trace}: 2 events repeating an earlier one (the same name, thread or stream, " \
        "start and duration) left out: counted once" in report.meta.doubts
    assert f"{trace}: 1 annotation starting inside another of the same thread and ending " \
        "after it left out (not nested: as a child it was longer than its parent)" in \
        report.meta.doubts
    frame = report.frame
    kernels = frame[(frame["scope"] == "kernel") & (frame["metric"] == "calls")]
    assert kernels["value"].tolist() == [1]
    steps = frame[(frame["scope"] == "step") & (frame["metric"] == "calls")]
    assert steps["value"].tolist() == [1]
    assert "overlapping" not in set(frame[frame["scope"] == "region"]["name"])


def test_a_deep_call_chain_of_one_long_file_name_is_cut_and_fits(tmp_path):
    """A 30 KB pstats file: a 500-deep chain of functions sharing one 5,000-character file
    name, stored once by marshal, derives call paths of 600 MB (20,000 characters: a
    MemoryError): the call tree stops at 64 levels, under a 3 GiB address-space limit."""
    name = "/" + "f" * 5_000 + ".py"
    depth = 500
    stats = {(name, level + 1, f"f{level}"): (
        1, 1, 0.001, (depth - level) * 0.002,
        {(name, level, f"f{level - 1}"): (1, 1, 0.001, (depth - level) * 0.002)} if level
        else {}) for level in range(depth)}
    profile = tmp_path / "deep.prof"
    profile.write_bytes(marshal.dumps(stats))
    assert profile.stat().st_size < 100_000
    done = subprocess.run(["prlimit", f"--as={3 * 2**30}", sys.executable, "-m", "profile_all",
                           "ingest", str(profile), "-o", str(tmp_path / "run")],
                          capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-2000:]
    calls = pa.load(tmp_path / "run").frame.query("scope == 'call'")
    assert 0 < len(calls) <= 66
    assert calls["parent"].map(lambda path: path.count(" ▸ ") + 1 if path else 0).max() <= 65


def test_functions_sharing_one_long_name_are_refused_by_what_they_derive(tmp_path):
    """An 889 KB pstats file of 20,000 functions sharing one 20,000-character file name
    (marshal stores it once) derives 400 MB of names: 34 s, 6 GB and a 2 GB folder before
    the bound; now one line, exit 2, nothing written, under a 1 GiB address-space limit."""
    name = "/" + "f" * 20_000 + ".py"
    profile = tmp_path / "wide.prof"
    profile.write_bytes(marshal.dumps(
        {(name, line, f"f{line}"): (1, 1, 0.001, 0.002, {}) for line in range(20_000)}))
    assert profile.stat().st_size < 1_000_000
    out = tmp_path / "run"
    done = subprocess.run(["prlimit", f"--as={2**30}", sys.executable, "-m", "profile_all",
                           "ingest", str(profile), "-o", str(out)],
                          capture_output=True, text=True, timeout=60)
    _refused(done, out, f"{profile}: its 20,000 functions' names hold 400,388,890 characters, "
             "more than the 18,416,768 a pstats file of 888,904 bytes may derive")


def test_deep_sampled_stacks_of_long_names_fit(tmp_path):
    """A 6 MB speedscope file: 300 samples of stacks up to 1,000 frames of 5,000-character
    names (15 s and 1.46 GB before the call tree's paths were bounded in characters): read
    under a 3 GiB address-space limit."""
    frames = [{"name": f"fn{i}_" + "n" * 5000, "file": "/x/a.py", "line": i}
              for i in range(1000)]
    samples = [list(range(1000 - k % 300)) for k in range(300)]
    document = {"$schema": "https://www.speedscope.app/file-format-schema.json",
                "shared": {"frames": frames}, "exporter": "py-spy@0.4.0", "name": "deep",
                "profiles": [{"type": "sampled", "name": "MainThread", "unit": "none",
                              "startValue": 0, "endValue": 300, "samples": samples,
                              "weights": [1] * 300}]}
    path = tmp_path / "deep.speedscope.json"
    path.write_text(json.dumps(document))
    done = subprocess.run(["prlimit", f"--as={3 * 2**30}", sys.executable, "-m", "profile_all",
                           "ingest", str(path), "-o", str(tmp_path / "run")],
                          capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-2000:]
    calls = pa.load(tmp_path / "run").frame.query("scope == 'call'")
    assert len(calls) > 0 and calls["parent"].str.len().sum() <= 32 * 2**20 + 256 * 5100


def test_events_of_categories_no_reader_reads_are_said(tmp_path):
    """Another accelerator's kernels (MTIA) and CUPTI's profiler ranges were dropped without
    a word: left out and counted by category; the profiler's own span is no loss."""
    events = [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1,
               "ts": 10 * i, "dur": 5, "args": {}} for i in range(10)]
    events += [{"ph": "X", "cat": "mtia_kernel", "name": "k", "pid": 2, "tid": 3, "ts": 10 * i,
                "dur": 3} for i in range(7)]
    events += [{"ph": "X", "cat": "cuda_profiler_range", "name": "r", "pid": 2, "tid": 3,
                "ts": 0, "dur": 100},
               {"ph": "X", "cat": "Trace", "name": "PyTorch Profiler (0)", "pid": 1, "tid": 1,
                "ts": 0, "dur": 100}]
    trace = tmp_path / "mtia.json"
    trace.write_text(json.dumps({"traceEvents": events}))
    report = pa.ingest([trace], tmp_path / "run")
    assert report.meta.status == "partial"
    assert f"{trace}: 8 events of categories profile-all does not read are left out of every " \
        "total: mtia_kernel (7), cuda_profiler_range (1)" in report.meta.doubts


@pytest.mark.parametrize("extra, said", [
    ("," + ",".join(f"x{i}" for i in range(100_000)), "a header of 100,021 columns, over the 256"),
    (",Name", "its header names 'Name' twice")])
def test_an_nsys_csv_header_of_too_many_or_repeated_columns(tmp_path, extra, said):
    """100,000 extra columns took a minute and 2.4 GB for 100 rows; a name twice was a
    pandas ValueError traceback: one line each."""
    from test_nsys_csv import GPU_ROWS, GPU_TRACE

    path = tmp_path / "odd_cuda_gpu_trace.csv"
    path.write_text("\n".join([GPU_TRACE + extra, *GPU_ROWS]) + "\n")
    out = tmp_path / "out"
    _refused(profile_all_here("ingest", path, "-o", out), out, said)


def test_input_dims_of_the_wrong_types_give_no_flops_and_no_cost(tmp_path):
    """`Input Dims` of [[1000, 1000], "x"]: Python repeated the text a million times (a 471-
    byte trace ran past 120 s at 5000 x 4000); shapes of text, floats or objects give no
    FLOPs, in well under the time bound."""
    from profile_all.readers.matmul_flops import matmul_flops

    assert matmul_flops("aten::mm", [[2, 3], [3, 4]]) == 48
    for dims in ([[5000, 4000], "x"], [["abc", 1000, 1000], [1, 1, 1000]],
                 [[1e5, 1e5], [[0]]], {"a": 1}, [[True, 2], [2, 3]]):
        assert matmul_flops("aten::mm", dims) == 0
    trace = tmp_path / "dims.json"
    trace.write_text(json.dumps({"traceEvents": [
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 0,
         "dur": 5, "args": {"Input Dims": [[5000, 4000], "x"]}}, *GOOD]}))
    done = subprocess.run(["prlimit", f"--as={2 * 2**30}", sys.executable, "-m", "profile_all",
                           "ingest", str(trace), "-o", str(tmp_path / "run")],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    written = sum(f.stat().st_size for f in (tmp_path / "run").rglob("*") if f.is_file())
    assert written < 8 * 2**20  # (report.html inlines its charting library: 4.5 MB)
