"""Bad input: one clear line on stderr, exit code 2, no traceback, nothing half-written."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import profile_all as pa
from conftest import TARGETS, profile_all, profile_all_here


def _refused(result, message: str) -> None:
    assert result.returncode == 2, (result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert lines == [lines[0]] and message in lines[0], result.stderr
    assert "Traceback" not in result.stderr


def _nothing_written(cwd: Path) -> None:
    assert not (cwd / "reports").exists() or not any((cwd / "reports").iterdir())


@pytest.mark.parametrize("make_script, message", [
    (lambda d: d / "missing.py", "script not found"),
    (lambda d: d, "is a directory"),
    (lambda d: _write(d / "broken.py", "def broken(:\n    pass\n"), "broken.py:1: syntax error"),
])
def test_bad_script(tmp_path, make_script, message):
    script = make_script(tmp_path)
    _refused(profile_all_here("run", script, cwd=tmp_path), message)
    _nothing_written(tmp_path)


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_unknown_backend_names_the_known_ones(tmp_path):
    result = profile_all_here("run", TARGETS / "contract.py", "-b", "wallclok", cwd=tmp_path)
    _refused(result, "unknown backend 'wallclok'; known backends: cprofile, cuda-events, "
                     "flop-counter, flops-profiler, memory, nsys, py-spy, thop, torch-memory, "
                     "torch-profiler, wallclock")
    _nothing_written(tmp_path)


def test_output_folder_that_cannot_be_written(tmp_path):
    (tmp_path / "a_file").write_text("")
    result = profile_all_here("run", TARGETS / "contract.py", "-o", tmp_path / "a_file" / "run",
                              cwd=tmp_path)
    _refused(result, "cannot write the output folder")
    assert (tmp_path / "a_file").read_text() == ""


def test_output_folder_that_is_not_empty_is_left_alone(tmp_path):
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "mine.txt").write_text("keep me")
    result = profile_all_here("run", TARGETS / "contract.py", "-o", tmp_path / "run")
    _refused(result, "exists and is not empty")
    assert [p.name for p in (tmp_path / "run").iterdir()] == ["mine.txt"]


def test_negative_timeout(tmp_path):
    result = profile_all_here("run", TARGETS / "contract.py", "--timeout", "-1", cwd=tmp_path)
    _refused(result, "timeout must be a positive, finite number of seconds, got -1.0")
    _nothing_written(tmp_path)


@pytest.fixture(scope="module")
def good_run(tmp_path_factory) -> Path:
    run_dir = tmp_path_factory.mktemp("good") / "run"
    result = profile_all_here("run", TARGETS / "contract.py", "-o", run_dir)
    assert result.returncode == 0, result.stderr
    return run_dir


def _damaged(good_run: Path, tmp_path: Path, damage) -> Path:
    copy = tmp_path / "damaged"
    shutil.copytree(good_run, copy)
    damage(copy)
    return copy


@pytest.mark.parametrize("damage, message", [
    (lambda d: (d / "meta.json").unlink(), "no meta.json"),
    (lambda d: (d / "meta.json").write_text("{not json"), "meta.json cannot be read"),
    (lambda d: (d / "report.parquet").unlink(), "report.parquet is missing"),
    (lambda d: (d / "report.parquet").write_bytes(b"PAR1 cut"), "report.parquet cannot be read"),
    (lambda d: (d / "meta.json").write_text(json.dumps({"format": 99})), "newer profile-all"),
])
@pytest.mark.parametrize("verb", ["show", "view"])
def test_unreadable_run_directory(good_run, tmp_path, damage, message, verb):
    run_dir = _damaged(good_run, tmp_path, damage)
    _refused(profile_all_here(verb, run_dir, "--no-browser") if verb == "view"
             else profile_all_here(verb, run_dir), message)
    with pytest.raises(pa.UsageError, match=message):
        pa.load(run_dir)


def _impossible_counts(run_dir: Path) -> None:
    frame = pd.read_parquet(run_dir / "report.parquet")
    calls = frame.index[(frame["metric"] == "calls") & (frame["stat"] == "total")]
    frame.loc[calls[0], "value"] = float("inf")  # `show` crashed: OverflowError
    frame.loc[calls[1], "value"] = -1.0  # shown as -1 calls, without a word
    frame.to_parquet(run_dir / "report.parquet")


def test_impossible_values_in_a_run_folder_are_left_out_and_said(good_run, tmp_path):
    run_dir = _damaged(good_run, tmp_path, _impossible_counts)
    shown = profile_all_here("show", run_dir)
    assert shown.returncode == 0, shown.stderr
    assert "Traceback" not in shown.stderr
    report = pa.load(run_dir)
    said = [d for d in report.meta.doubts if d.startswith("left out of report.parquet")]
    assert len(said) == 1 and said[0].startswith(
        "left out of report.parquet: 2 rows with a value no profile holds (first: ")
    assert "= inf count): a damaged or crafted run folder" in said[0]
    frame = report.frame
    counts = frame[frame["unit"] == "count"]["value"]
    assert np.isfinite(counts).all() and (counts >= 0).all()
    assert len(frame) == len(pd.read_parquet(good_run / "report.parquet")) - 2


def test_impossible_samples_are_left_out_and_said(good_run, tmp_path):
    """A region's calls of NaN and -5 s: compare called them "no change" and exit 0 under
    --fail-above; now those calls are left out before any view, and said."""
    def impossible_calls(run_dir: Path) -> None:
        pd.DataFrame({"backend": "wallclock", "pass": 1, "rank": 0, "scope": "region",
                      "name": "work", "parent": "", "metric": "wall_time",
                      "value": [0.01, np.nan, -5.0, 0.01, 0.01]}).to_parquet(
            run_dir / "samples.parquet", index=False)

    run_dir = _damaged(good_run, tmp_path, impossible_calls)
    report = pa.load(run_dir)
    assert [d for d in report.meta.doubts if d.startswith("left out of samples.parquet")] == [
        "left out of samples.parquet: 2 calls of an impossible time (first: region work = "
        "nan): a damaged or crafted run folder"]
    assert np.isfinite(report.samples["value"]).all() and (report.samples["value"] >= 0).all()


def test_a_record_of_many_doubts_gives_fifty_findings_and_a_count(good_run, tmp_path):
    """A meta.json of 11 million doubts made `show` raise MemoryError: each doubt is a
    finding once, the first 50, and the rest are counted."""
    def many_doubts(run_dir: Path) -> None:
        meta = json.loads((run_dir / "meta.json").read_text())
        meta["doubts"] = [f"doubt {number}" for number in range(200_000)] * 2
        (run_dir / "meta.json").write_text(json.dumps(meta))

    run_dir = _damaged(good_run, tmp_path, many_doubts)
    found = pa.load(run_dir).findings()
    trust = found[found["rule"] == "trust"]["finding"].tolist()
    assert "doubt 49" in trust and "doubt 50" not in trust
    assert "and 199,950 more doubts: meta.json holds every one" in trust


def test_show_and_view_of_a_missing_folder(tmp_path):
    _refused(profile_all_here("show", tmp_path / "nope"), "no such folder")
    _refused(profile_all_here("view", tmp_path / "nope", "--no-browser"), "no such folder")


def test_view_of_a_run_without_cprofile(tmp_path):
    result = profile_all_here("run", TARGETS / "contract.py", "-b", "wallclock", "-o",
                              tmp_path / "r")
    assert result.returncode == 0
    _refused(profile_all_here("view", tmp_path / "r", "--no-browser"), "has no cProfile file")


def test_view_of_an_ingested_folder(tmp_path):
    """`view` on an ingested run opens its copy of the pstats file it read (a file of the
    folder: the original may be gone, and meta.json's paths are not trusted); without one
    it says so (and does not tell the user to run a backend: nothing was run)."""
    import cProfile

    from profile_all.view import profile_file

    stats = tmp_path / "made_here.prof"
    cProfile.run("sum(range(1000))", str(stats))
    ingested = profile_all_here("ingest", stats, "-o", tmp_path / "from_pstats")
    assert ingested.returncode == 0, ingested.stderr
    assert "exit code 0, 1 file read" in ingested.stdout + ingested.stderr  # not "0 passes"
    kept = profile_file(tmp_path / "from_pstats")
    assert kept.parent == (tmp_path / "from_pstats" / "artifacts").resolve()
    assert kept.read_bytes() == stats.read_bytes()
    trace = tmp_path / "made_here.pt.trace.json"
    trace.write_text('{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", '
                     '"pid": 1, "tid": 1, "ts": 0, "dur": 5}]}')
    assert profile_all_here("ingest", trace, "-o", tmp_path / "from_trace").returncode == 0
    _refused(profile_all_here("view", tmp_path / "from_trace", "--no-browser"),
             "none of the files it was ingested from is a pstats file")


def test_show_into_a_reader_that_stops_reading_ends_as_sigpipe_would(good_run):
    """`profile-all show RUN | head -1`: Rich said SystemExit(1), a failure said by no one;
    now no word and 141, as a Unix tool killed by SIGPIPE."""
    shown = subprocess.Popen([sys.executable, "-m", "profile_all", "show", str(good_run)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    shown.stdout.close()  # the reader gone before the command's first line
    assert shown.wait(timeout=60) == 141
    assert shown.stderr.read() == b""
    shown.stderr.close()


def _a_name_of_20_mib(run_dir: Path) -> None:
    frame = pd.read_parquet(run_dir / "report.parquet")
    frame.loc[frame.index[0], "name"] = "x" * (20 * 2**20)
    frame.to_parquet(run_dir / "report.parquet", compression="zstd")  # a few KiB


def test_a_parquet_file_that_unpacks_beyond_the_bounds_is_refused_from_its_footer(
        good_run, tmp_path):
    """One name of 20 MiB, compressed to a few KiB: the footer's sizes refuse it before any
    page is read (a 1,000 MiB one took 3.2 GB), as unpacking to over 64 times the file and
    16 MiB (profile-all's own files unpack to at most about twice theirs)."""
    run_dir = _damaged(good_run, tmp_path, _a_name_of_20_mib)
    size = (run_dir / "report.parquet").stat().st_size
    assert size < 2**20
    refused = profile_all_here("show", run_dir)
    _refused(refused, "report.parquet: unpacks to ")
    assert f"over {64 * size + 16 * 2**20:,} (64 times its size and 16 MiB, at most " \
        "PROFILE_ALL_MAX_UNPACKED): a damaged or crafted run folder, not read" in refused.stderr


def _one_name_many_times(run_dir: Path) -> None:
    """20,000 rows naming one 100 KB text, dictionary encoded: a file of a few KiB whose
    footer says about 100 KB, expanding to 2 GB."""
    frame = pd.read_parquet(run_dir / "report.parquet")
    rows = pd.concat([frame.iloc[[0]]] * 20_000, ignore_index=True).assign(name="n" * 100_000)
    pd.concat([frame, rows]).to_parquet(run_dir / "report.parquet", compression="zstd",
                                        index=False)


def test_a_parquet_file_whose_dictionary_expands_beyond_the_bounds_is_refused(good_run,
                                                                             tmp_path):
    """The footer counts a dictionary column's encoded bytes: `show` took 1.75 GB, then an
    ArrowMemoryError. Its values' lengths are counted, unexpanded, before any expands;
    under a 2 GiB address-space cap."""
    run_dir = _damaged(good_run, tmp_path, _one_name_many_times)
    assert (run_dir / "report.parquet").stat().st_size < 2**20
    refused = subprocess.run(["prlimit", f"--as={2 * 2**30}", sys.executable, "-m",
                              "profile_all", "show", str(run_dir)], capture_output=True,
                             text=True, timeout=120)
    _refused(refused, "report.parquet: its text expands to 2,000,")


def test_a_fifo_in_a_run_folder_is_refused_not_waited_on(good_run, tmp_path):
    """A FIFO named meta.json or report.parquet held show, compare, merge and load for good."""
    for name in ("meta.json", "report.parquet"):
        run_dir = _damaged(good_run, tmp_path / name, lambda d, name=name: (
            (d / name).unlink(), os.mkfifo(d / name)))
        _refused(profile_all("show", run_dir, timeout=60), "is not a regular file")


def _passes_times(count: int):
    def damage(run_dir: Path) -> None:
        meta = json.loads((run_dir / "meta.json").read_text())
        extra = meta["passes"][-1]
        meta["passes"] += [dict(extra, number=number)
                           for number in range(len(meta["passes"]) + 1, count + 1)]
        (run_dir / "meta.json").write_text(json.dumps(meta))
    return damage


def test_a_record_of_many_passes_is_cut_to_top_and_one_too_big_refused(good_run, tmp_path):
    """A meta.json of 100,000 passes printed every one (8.5 MB, 56 s): the passes table is
    cut to --top as other long tables are; a meta.json over 64 MiB is not read."""
    many = _damaged(good_run, tmp_path, _passes_times(5000))
    shown = profile_all_here("show", many, "--top", "5")
    assert shown.returncode == 0, shown.stderr[-2000:]
    assert "4,995 more rows not shown (--top N to see more)" in shown.stdout
    assert len(shown.stdout) < 100_000
    huge = tmp_path / "huge"
    shutil.copytree(good_run, huge)
    with (huge / "meta.json").open("a") as meta:
        meta.write(" " * (64 * 2**20))  # still valid JSON
    _refused(profile_all_here("show", huge), "meta.json is 67,")


@pytest.mark.parametrize("where, said", [
    ("out", "holds a name of 300 bytes, over the 255 a file system allows"),
    ("deep out", "has 2,00"),
    ("file", "holds a name of 305 bytes, over the 255 a file system allows"),
])
def test_a_path_no_file_system_holds_is_one_line(tmp_path, where, said):
    """A name over the file system's limit, or 2,000 levels of `-o`: an OSError or a
    RecursionError traceback before; one line and exit 2, nothing written."""
    trace = tmp_path / "t.json"
    trace.write_text(json.dumps({"traceEvents": [
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 1,
         "dur": 2}]}))
    out = {"out": tmp_path / ("x" * 300), "deep out": tmp_path.joinpath(*["d"] * 2000)}
    files = [tmp_path / ("y" * 300 + ".json")] if where == "file" else [trace]
    _refused(profile_all_here("ingest", *files, "-o", out.get(where, tmp_path / "run")), said)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.json"]
