"""`profile-all ingest`: a report from existing files, and one line for a bad file."""

from __future__ import annotations

import shutil

import pytest

import profile_all as pa
from conftest import profile_all


def test_two_ranks_nsys_and_pstats_in_one_report(fixtures, tmp_path):
    files = [fixtures / "traces" / "sampled_rank-0.json.gz",
             fixtures / "traces" / "sampled_rank-1.json.gz",
             fixtures / "nsys" / "saxpy_mpi_cuda_2022.sqlite",
             fixtures / "pstats" / "cprofile-cycle.pstats"]
    result = profile_all("ingest", *files, "-o", tmp_path / "run")
    assert result.returncode == 0, result.stderr
    report = pa.load(tmp_path / "run")
    frame = report.frame
    per_source = frame.groupby(["pass", "backend"])["rank"].unique()
    assert {(p, b): list(r) for (p, b), r in per_source.items()} == {
        (1, "torch-profiler"): [0], (2, "torch-profiler"): [1], (3, "nsys"): [0],
        (4, "cprofile"): [0]}
    steps = frame[(frame["scope"] == "step") & (frame["metric"] == "calls")]
    assert list(steps["value"]) == [2, 2]
    assert [s["backend"] for s in report.meta["sources"]] == [
        "torch-profiler", "torch-profiler", "nsys", "cprofile"]
    assert report.meta["sources"][1]["distributed"]["world_size"] == 128
    assert "saxpy" in set(report.kernels()["name"].str.split("(").str[0])
    assert "## Kernels by device time" in (tmp_path / "run" / "summary.md").read_text()


def test_two_ranks_traces_give_the_cross_rank_view(fixtures, tmp_path):
    traces = fixtures / "traces"
    result = profile_all("ingest", traces / "sampled_rank-0.json.gz",
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
def test_bad_files_are_refused_before_anything_is_written(fixtures, tmp_path, name, content,
                                                          message):
    bad = tmp_path / name
    bad.write_bytes(content)
    good = fixtures / "traces" / "cpu_only_gloo_rank34.json.gz"
    result = profile_all("ingest", good, bad, "-o", tmp_path / "run")
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip().splitlines() == [result.stderr.strip()]
    assert message in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / "run").exists()


def test_python2_pstats_and_a_sqlite_that_is_not_nsys(fixtures, tmp_path):
    copy = tmp_path / "py2.pstats"
    shutil.copy(fixtures / "pstats" / "cprofile-cycle-py2.pstats", copy)
    result = profile_all("ingest", copy, "-o", tmp_path / "run")
    assert result.returncode == 2
    assert "Python 2's cannot be read" in result.stderr
    import sqlite3

    with sqlite3.connect(tmp_path / "plain.sqlite") as db:
        db.execute("create table t (x)")
    result = profile_all("ingest", tmp_path / "plain.sqlite", "-o", tmp_path / "run")
    assert result.returncode == 2
    assert "not an Nsight Systems export" in result.stderr
    assert not (tmp_path / "run").exists()
