"""`profile-all ingest`: a report from existing files, and one line for a bad file."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import sys

import pytest

import profile_all as pa
from conftest import profile_all, profile_all_here, write_torch_trace
from test_nsys_csv import GPU_ROWS, GPU_TRACE
from test_nsys_rep import fake_nsys


def test_two_ranks_nsys_and_pstats_in_one_report(fixtures, tmp_path):
    files = [fixtures / "traces" / "sampled_rank-0.json.gz",
             fixtures / "traces" / "sampled_rank-1.json.gz",
             fixtures / "nsys" / "saxpy_mpi_cuda_2022.sqlite",
             fixtures / "pstats" / "cprofile-cycle.pstats"]
    result = profile_all_here("ingest", *files, "-o", tmp_path / "run")
    assert result.returncode == 0, result.stderr
    report = pa.load(tmp_path / "run")
    frame = report.frame
    per_source = frame.groupby(["pass", "backend"])["rank"].unique()
    assert {(p, b): list(r) for (p, b), r in per_source.items()} == {
        (1, "torch-profiler"): [0], (2, "torch-profiler"): [1], (3, "nsys"): [0],
        (4, "cprofile"): [0]}
    steps = frame[(frame["scope"] == "step") & (frame["metric"] == "calls")]
    assert list(steps["value"]) == [2, 2]
    assert [s.backend for s in report.meta.sources] == [
        "torch-profiler", "torch-profiler", "nsys", "cprofile"]
    assert report.meta.sources[1].facts["distributed"]["world_size"] == 128
    assert "saxpy" in set(report.kernels()["name"].str.split("(").str[0])
    assert "## Kernels by device time" in (tmp_path / "run" / "summary.md").read_text()


def test_two_ranks_traces_give_the_cross_rank_view(fixtures, tmp_path):
    traces = fixtures / "traces"
    result = profile_all_here("ingest", traces / "sampled_rank-0.json.gz",
                         traces / "sampled_rank-1.json.gz", "-o", tmp_path / "run")
    assert result.returncode == 0, result.stderr
    ranks = pa.load(tmp_path / "run").ranks()
    forward = ranks[(ranks["name"] == "## forward ##") & (ranks["metric"] == "wall_time")]
    assert forward["ranks"].item() == 2 and forward["slowest_rank"].item() in (0, 1)
    assert forward["min"].item() < forward["max"].item()
    assert "Across ranks" in result.stderr
    assert '<section id="ranks">' in (tmp_path / "run" / "report.html").read_text()


@pytest.mark.parametrize("name, content, message", [
    ("empty.json", b"", "empty file"),
    ("cut.json", b'{"traceEvents": [{"ph": "X"', "not valid JSON, corrupt or truncated"),
    ("fake.json.gz", b'{"traceEvents": []}', "named .gz but is not gzip"),
    ("other.json", b'{"rows": [1, 2]}', "not a torch.profiler chrome trace"),
    ("random.prof", b"\x00\x01\x02 not marshal", "not a file profile-all reads"),
    ("cut.csv.gz", b"\x1f\x8b\x08\x00garbage", "corrupt or truncated compressed data"),
])
def test_bad_files_are_refused_before_anything_is_written(own_trace, tmp_path, name, content,
                                                          message):
    bad = tmp_path / name
    bad.write_bytes(content)
    good = own_trace
    result = profile_all_here("ingest", good, bad, "-o", tmp_path / "run")
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip().splitlines() == [result.stderr.strip()]
    assert message in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / "run").exists()


def test_python2_pstats_and_a_sqlite_that_is_not_nsys(fixtures, tmp_path):
    copy = tmp_path / "py2.pstats"
    shutil.copy(fixtures / "pstats" / "cprofile-cycle-py2.pstats", copy)
    result = profile_all_here("ingest", copy, "-o", tmp_path / "run")
    assert result.returncode == 2
    assert "Python 2's cannot be read" in result.stderr
    import sqlite3

    with sqlite3.connect(tmp_path / "plain.sqlite") as db:
        db.execute("create table t (x)")
    result = profile_all_here("ingest", tmp_path / "plain.sqlite", "-o", tmp_path / "run")
    assert result.returncode == 2
    assert "not an Nsight Systems export" in result.stderr
    assert not (tmp_path / "run").exists()


def _refused(result, run_dir):
    """Exit 2, one line on stderr and no traceback, nothing written."""
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip().splitlines() == [result.stderr.strip()]
    assert "Traceback" not in result.stderr
    assert not run_dir.exists()
    return result.stderr


def _passes(run_dir):
    frame = pa.load(run_dir).frame
    return {(p, b): sorted(r) for (p, b), r in frame.groupby(["pass", "backend"])["rank"]
            .unique().items()}


def test_nsys_stats_csvs_one_per_process_become_ranks(fixtures, tmp_path):
    """The rank is the number in the name (proc0, rank-1) when every file of a report kind
    has one; files without are numbered in the order given."""
    for name in ("job_rank-1_gpu.csv", "job_rank-0_gpu.csv", "a_gpu.csv", "b_gpu.csv"):
        (tmp_path / name).write_text("\n".join([GPU_TRACE, *GPU_ROWS]) + "\n")
    pax = fixtures / "nsys" / "pax_fsdp4_proc0_nvtx_pushpop_trace.csv.xz"
    result = profile_all_here("ingest", pax, tmp_path / "job_rank-1_gpu.csv",
                         tmp_path / "job_rank-0_gpu.csv", "-o", tmp_path / "run")
    assert result.returncode == 0, result.stderr
    assert _passes(tmp_path / "run") == {(1, "nsys"): [0], (2, "nsys"): [1], (3, "nsys"): [0]}
    report = pa.load(tmp_path / "run")
    assert [s.facts["report"] for s in report.meta.sources] == [
        "nvtx_pushpop_trace", "cuda_gpu_trace", "cuda_gpu_trace"]
    regions = report.frame[(report.frame["scope"] == "region") & (report.frame["pass"] == 1)]
    assert regions.loc[regions["metric"] == "calls", "value"].sum() == 27891
    assert "Memcpy HtoD (Pinned -> Device)" in set(report.transfers()["name"])
    result = profile_all_here("ingest", tmp_path / "b_gpu.csv", tmp_path / "a_gpu.csv",
                         tmp_path / "job_rank-0_gpu.csv", "-o", tmp_path / "unnamed")
    assert result.returncode == 0, result.stderr
    assert _passes(tmp_path / "unnamed") == {(1, "nsys"): [0], (2, "nsys"): [1],
                                             (3, "nsys"): [2]}


def test_nsys_rep_through_nsys_on_path(fixtures, tmp_path, monkeypatch):
    report = fixtures / "nsys" / "pdl_2p2c.nsys-rep"
    fake_nsys(tmp_path / "bin", fixtures / "nsys" / "saxpy_mpi_cuda_2022.sqlite",
              tmp_path / "argv.json")
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    result = profile_all_here("ingest", report, "-o", tmp_path / "run")
    assert result.returncode == 0, result.stderr
    assert json.loads((tmp_path / "argv.json").read_text())[:3] == ["export", "--type", "sqlite"]
    loaded = pa.load(tmp_path / "run")
    assert {"region", "kernel", "memcpy", "api", "run"} <= set(loaded.frame["scope"])
    assert loaded.meta.sources[0].facts["report"] == "nsys-rep"


def test_nsys_rep_without_nsys_is_refused(fixtures, tmp_path, monkeypatch):
    (tmp_path / "bin").mkdir()
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    stderr = _refused(profile_all_here("ingest", fixtures / "nsys" / "pdl_2p2c.nsys-rep", "-o",
                                  tmp_path / "run"), tmp_path / "run")
    assert "Nsight Systems" in stderr and "nsys export --type sqlite" in stderr
    assert "pstats" not in stderr


def test_a_file_of_no_kind_read_is_refused_with_the_kinds_read(tmp_path):
    unknown = tmp_path / "numbers.csv"
    unknown.write_text("a,b\n1,2\n")
    stderr = _refused(profile_all_here("ingest", unknown, "-o", tmp_path / "run"), tmp_path / "run")
    assert "numbers.csv: not a file profile-all reads; it reads" in stderr
    for kind in ("chrome traces", "pstats", "sqlite", ".nsys-rep", "nvtx_pushpop_trace",
                 "cuda_gpu_trace", "mprof"):
        assert kind in stderr


def test_a_directory_is_read_as_the_traces_in_it(tmp_path):
    """As HTA and TensorBoard users point at one: every *.json and *.json.gz at any depth,
    each a pass, its rank from the trace; other files there are left alone."""
    (tmp_path / "logs" / "worker1").mkdir(parents=True)
    write_torch_trace(tmp_path / "logs" / "worker1" / "host_1.1700000000.pt.trace.json.gz",
                      rank=1)
    write_torch_trace(tmp_path / "logs" / "rank0.json", rank=0)
    (tmp_path / "logs" / "events.out.tfevents.1700000000.host").write_bytes(b"\x00\x01")
    result = profile_all_here("ingest", tmp_path / "logs", "-o", tmp_path / "run")
    assert result.returncode == 0, result.stderr
    assert _passes(tmp_path / "run") == {(1, "torch-profiler"): [0], (2, "torch-profiler"): [1]}
    (tmp_path / "empty" / "sub").mkdir(parents=True)
    stderr = _refused(profile_all_here("ingest", tmp_path / "empty", "-o", tmp_path / "run2"),
                      tmp_path / "run2")
    assert "a directory with no trace file in it (*.json, *.json.gz" in stderr


def test_files_read_side_by_side_keep_their_order_and_their_refusals(tmp_path):
    """Read by forked workers (one a core): the passes follow the files' names, a file
    of a directory that is not a trace (or not a whole one) is left out and said, and a
    broken file named on the command line stops the whole ingest, naming that file."""
    logs = tmp_path / "logs"
    logs.mkdir()
    for rank in (2, 0, 1):
        write_torch_trace(logs / f"r{rank}.json", rank=rank)
    (logs / "config.json").write_text('{"lr": 0.1}')
    result = profile_all("ingest", logs, "-o", tmp_path / "run")
    assert result.returncode == 0, result.stderr
    assert _passes(tmp_path / "run") == {(1, "torch-profiler"): [0], (2, "torch-profiler"): [1],
                                         (3, "torch-profiler"): [2]}
    assert any("config.json" in doubt for doubt in pa.load(tmp_path / "run").meta.doubts)
    whole = (logs / "r1.json").read_bytes()
    (logs / "r1.json").write_bytes(whole[: len(whole) // 2])
    result = profile_all("ingest", logs, "-o", tmp_path / "run2")
    assert result.returncode == 0, result.stderr
    assert _passes(tmp_path / "run2") == {(1, "torch-profiler"): [0],
                                          (2, "torch-profiler"): [2]}
    partial = pa.load(tmp_path / "run2")
    assert partial.meta.status == "partial"  # a rank is missing: said first
    assert partial.findings()["finding"].iloc[0].startswith(
        f"left out, broken (what it measured is missing from this report): {logs / 'r1.json'}")
    stderr = _refused(profile_all("ingest", logs / "r0.json", logs / "r1.json", "-o",
                                  tmp_path / "run3"), tmp_path / "run3")
    assert "r1.json" in stderr


def test_a_json_array_trace_goes_to_the_chrome_trace_reader(own_trace, tmp_path):
    with gzip.open(own_trace) as stream:
        events = json.load(stream)["traceEvents"]
    array = tmp_path / "events.json"
    array.write_text(json.dumps(events, indent=1))
    result = profile_all_here("ingest", array, "-o", tmp_path / "run")
    assert result.returncode == 0, result.stderr
    frame = pa.load(tmp_path / "run").frame
    assert set(frame["backend"]) == {"torch-profiler"}
    assert (frame[frame["scope"] == "operator"]["name"] == "aten::addmm").any()


def test_a_file_met_twice_is_read_once_and_said(tmp_path):
    """Named twice, under another name, and inside a directory named: one pass, its
    operators counted once (summed twice they were doubled), and a doubt a repeat."""
    logs = tmp_path / "logs"
    logs.mkdir()
    trace = write_torch_trace(logs / "r0.json", rank=0)
    once = profile_all_here("ingest", trace, "-o", tmp_path / "once")
    assert once.returncode == 0, once.stderr
    again = profile_all_here("ingest", trace, trace, logs / ".." / "logs" / "r0.json", logs, "-o",
                        tmp_path / "again")
    assert again.returncode == 0, again.stderr
    assert _passes(tmp_path / "again") == {(1, "torch-profiler"): [0]}
    report, single = pa.load(tmp_path / "again"), pa.load(tmp_path / "once")
    assert report.operators()["calls"].sum() == single.operators()["calls"].sum()
    assert [d for d in report.meta.doubts if d.startswith("read once")] == [
        f"read once: {trace} (named twice)",
        f"read once: {logs / '..' / 'logs' / 'r0.json'} ({trace} again)",
        f"read once: {trace} (met twice)"]
    assert report.meta.status == "complete"


def test_a_run_folder_inside_a_folder_ingested_is_left_out_whole(tmp_path):
    """A project folder holds the user's trace and profile-all's own earlier report (whose
    artifacts hold a trace of the same rank): the report is left out, named; summed with
    the user's trace, it doubled every operator."""
    project = tmp_path / "project"
    project.mkdir()
    trace = write_torch_trace(project / "rank0.json", rank=0)
    earlier = profile_all_here("ingest", trace, "-o", project / "reports" / "earlier")
    assert earlier.returncode == 0, earlier.stderr
    done = profile_all_here("ingest", project, "-o", tmp_path / "run")
    assert done.returncode == 0, done.stderr
    assert _passes(tmp_path / "run") == {(1, "torch-profiler"): [0]}
    run_folder = project / "reports" / "earlier"
    assert f"left out, a profile-all run folder: {run_folder} (`profile-all show {run_folder}` " \
        "reads it)" in pa.load(tmp_path / "run").meta.doubts
    alone = _refused(profile_all_here("ingest", project / "reports", "-o", tmp_path / "run2"),
                     tmp_path / "run2")
    assert "a directory with no trace file in it (*.json, *.json.gz, at any depth, outside " \
        "profile-all run folders)" in alone


def test_a_fifo_and_a_dangling_link_named_like_traces_are_said(tmp_path):
    """Neither is opened (a FIFO would block the read); each is named, not dropped."""
    import os

    logs = tmp_path / "logs"
    logs.mkdir()
    write_torch_trace(logs / "r0.json", rank=0)
    os.mkfifo(logs / "pipe.json")
    (logs / "gone.json").symlink_to(tmp_path / "nothing-here")
    done = profile_all_here("ingest", logs, "-o", tmp_path / "run")
    assert done.returncode == 0, done.stderr
    doubts = pa.load(tmp_path / "run").meta.doubts
    assert f"left out, not a file: {logs / 'gone.json'} (a link to nothing)" in doubts
    assert f"left out, not a file: {logs / 'pipe.json'} (a FIFO)" in doubts


def test_a_long_ingest_says_how_far_it_is(tmp_path):
    """Many small rank files took minutes without a line: the CLI says every 10 s (here
    PROFILE_ALL_HEARTBEAT_SECONDS's hundredth) how many it has read; the API tells its
    `progress` at each file."""
    logs = tmp_path / "logs"
    logs.mkdir()
    for rank in range(120):
        (logs / f"rank{rank:03}.json").write_text(json.dumps({
            "distributedInfo": {"rank": rank, "world_size": 120}, "traceEvents": [
                {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1,
                 "ts": 10, "dur": 5}]}))
    done = profile_all("ingest", logs, "-o", tmp_path / "run",  # its interval: read at import
                       env={"PROFILE_ALL_HEARTBEAT_SECONDS": "0.01"})
    assert done.returncode == 0, done.stderr[-2000:]
    said = [line for line in done.stderr.splitlines() if line.startswith("reading ")]
    assert said and all(line.endswith(" s so far") and " of 120 files, " in line
                        for line in said), done.stderr[-2000:]
    told = []
    pa.ingest([logs], tmp_path / "api", progress=lambda read, files: told.append((read, files)))
    assert told == [(read, 120) for read in range(1, 121)]
    with pytest.raises(pa.UsageError, match=r"progress must be a function of \(files read, "):
        pa.ingest([logs], tmp_path / "bad", progress="yes")


def test_files_of_other_kinds_are_named_for_what_they_are(tmp_path):
    """torch's execution trace and memory timeline (made here by torch itself), a memory
    snapshot pickle and a tar.gz of rank traces: each refused in one line that says what it
    is and what to give instead, never opened as a trace (nor unpickled)."""
    import pickle
    import tarfile

    import torch
    from torch.profiler import ExecutionTraceObserver, ProfilerActivity, profile

    model = torch.nn.Linear(16, 4)
    observer = ExecutionTraceObserver()
    observer.register_callback(str(tmp_path / "et.json"))
    observer.start()
    model(torch.randn(2, 16)).sum().backward()
    observer.stop()
    observer.unregister_callback()
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True, record_shapes=True,
                 with_stack=True) as profiled:
        model(torch.randn(2, 16)).sum().backward()
    profiled.export_memory_timeline(str(tmp_path / "timeline.json"))
    (tmp_path / "snapshot.pickle").write_bytes(pickle.dumps({"segments": []}))
    with tarfile.open(tmp_path / "ranks.tar.gz", "w:gz") as archive:
        archive.add(tmp_path / "et.json", arcname="rank0.json")
    for name, said in (("et.json", "an execution trace"), ("timeline.json", "a memory timeline"),
                       ("snapshot.pickle", "a pickle"), ("ranks.tar.gz", "an archive")):
        out = tmp_path / f"run-{name}"
        done = profile_all_here("ingest", tmp_path / name, "-o", out)
        assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(
            f"profile-all: error: {tmp_path / name}: {said}"), done.stderr
        assert not out.exists()


def _without_root_s_reading_rights() -> list[str]:
    """The command prefix under which root cannot read what its mode forbids (tests run as
    root here): setpriv drops the capabilities that let it."""
    return ["setpriv", "--bounding-set=-dac_override,-dac_read_search"] \
        if os.geteuid() == 0 else []


def test_an_unreadable_trace_and_folder_in_a_directory_are_lost_ranks(tmp_path):
    """A trace of mode 000 was a PermissionError traceback; a folder that cannot be listed
    was passed over without a word: each a rank lost, said, the report partial."""
    folder = tmp_path / "traces"
    (folder / "sub").mkdir(parents=True)
    write_torch_trace(folder / "rank0.json", rank=0)
    write_torch_trace(folder / "rank1.json", rank=1)
    write_torch_trace(folder / "sub" / "rank2.json", rank=2)
    (folder / "rank1.json").chmod(0)
    (folder / "sub").chmod(0)
    try:
        done = subprocess.run([*_without_root_s_reading_rights(), sys.executable, "-m",
                               "profile_all", "ingest", str(folder), "-o", str(tmp_path / "run")],
                              capture_output=True, text=True, timeout=240)
    finally:
        (folder / "sub").chmod(0o755)
        (folder / "rank1.json").chmod(0o644)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr[-2000:]
    meta = pa.load(tmp_path / "run").meta
    assert meta.status == "partial"
    doubts = " ".join(meta.doubts)
    assert f"{folder / 'rank1.json'}: cannot be read (Permission denied)" in doubts
    assert f"{folder / 'sub'}: a folder that cannot be read (Permission denied)" in doubts


def test_a_byte_order_mark_and_gzip_members_are_read(tmp_path):
    """A trace or CSV an editor saved with a UTF-8 byte order mark, and a gzip whose first
    member is empty (files joined with cat), were refused as no file profile-all reads."""
    from test_nsys_csv import GPU_ROWS, GPU_TRACE

    trace = write_torch_trace(tmp_path / "made.json")
    data = trace.read_bytes()
    (tmp_path / "bom.json").write_bytes(b"\xef\xbb\xbf" + data)
    (tmp_path / "joined.json.gz").write_bytes(
        gzip.compress(b"") + gzip.compress(data[:100]) + gzip.compress(data[100:]))
    (tmp_path / "bom_cuda_gpu_trace.csv").write_bytes(
        b"\xef\xbb\xbf" + "\n".join([GPU_TRACE, *GPU_ROWS]).encode() + b"\n")
    for name in ("bom.json", "joined.json.gz", "bom_cuda_gpu_trace.csv"):
        done = profile_all_here("ingest", tmp_path / name, "-o", tmp_path / f"run-{name}")
        assert done.returncode == 0, done.stderr
        assert pa.load(tmp_path / f"run-{name}").meta.status == "complete"


def test_quiet_ingest_says_one_line(own_trace, tmp_path):
    done = profile_all_here("ingest", own_trace, "-o", tmp_path / "run", "-q")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "" and done.stderr.splitlines() == [
        f"profile-all: complete, exit code 0: {tmp_path / 'run'}"], done.stderr
