"""A report's files written by a forked process while the caller draws it (`meanwhile`), and
the command's own process allocating Arrow's buffers from the C library."""

from __future__ import annotations

import os
import subprocess
import sys
import threading

import psutil
import pytest

import profile_all as pa
from profile_all.runs import forked


def _no_child_left() -> bool:
    """No child of this process, ended or not, but the fork servers kept for its runs
    (conftest): an ended child not waited for is a zombie, its command line empty."""
    return not [child for child in psutil.Process().children()
                if "profile_all.runner.starting.forkserver" not in " ".join(child.cmdline())]


def test_the_work_runs_in_another_process_while_meanwhile_runs_here(tmp_path):
    marks = tmp_path / "marks"

    def work():
        (tmp_path / "work").write_text(str(os.getpid()))

    def meanwhile():
        marks.write_text(str(os.getpid()))

    forked.beside(work, meanwhile)
    assert (tmp_path / "work").exists()  # done once beside returns
    assert int(marks.read_text()) == os.getpid()
    assert int((tmp_path / "work").read_text()) != os.getpid()
    assert _no_child_left()


def test_what_the_work_returned_comes_back_here():
    import pandas as pd

    made = forked.beside(lambda: pd.DataFrame({"pid": [os.getpid()]}), lambda: None)
    assert made["pid"].item() != os.getpid()
    assert forked.beside(lambda: None, lambda: None) is None
    assert _no_child_left()


def test_the_pages_written_beside_the_drawing_are_those_written_alone(tmp_path):
    """With `meanwhile`, the findings are made in a child and the sections here, then the
    pages written in a child: the same summary.md and report.html as one process makes."""
    from conftest import write_torch_trace

    traces = [write_torch_trace(tmp_path / f"rank{rank}.json", rank=rank) for rank in (0, 1)]
    drawn = []
    beside = pa.ingest(traces, tmp_path / "beside", meanwhile=lambda r: drawn.append(
        r.findings()))
    alone = pa.ingest(traces, tmp_path / "alone")
    assert drawn[0].equals(beside.findings()) and not drawn[0].empty
    for name in ("summary.md", "report.html"):
        texts = [(tmp_path / way / name).read_text().replace(str(tmp_path / way), "RUN")
                 .replace(report.meta.run_id, "ID")
                 for way, report in (("beside", beside), ("alone", alone))]
        assert texts[0] == texts[1], name
    assert _no_child_left()


def test_with_a_thread_running_nothing_is_forked(tmp_path):
    """A lock another thread holds at a fork would stay held in the child: one after the
    other, here."""
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    try:
        order = []
        forked.beside(lambda: order.append(("work", os.getpid())),
                      lambda: order.append(("meanwhile", os.getpid())))
    finally:
        stop.set()
        other.join()
    assert order == [("work", os.getpid()), ("meanwhile", os.getpid())]


def test_what_the_work_raised_is_raised_here_after_meanwhile(tmp_path):
    ran = []

    def work():
        (tmp_path / "missing" / "report.html").write_text("x")

    with pytest.raises(FileNotFoundError) as raised:
        forked.beside(work, lambda: ran.append("meanwhile"))
    assert ran == ["meanwhile"]
    assert str(tmp_path / "missing" / "report.html") in str(raised.value)
    assert any("in the process that wrote it" in note for note in raised.value.__notes__)
    assert _no_child_left()


def test_the_api_calls_meanwhile_with_the_report_as_its_files_are_written(own_trace,
                                                                          tmp_path):
    seen = []

    def meanwhile(report):
        seen.append((report.run_dir, report.meta.run_id, len(report.frame)))

    out = tmp_path / "run"
    report = pa.ingest([own_trace], out, meanwhile=meanwhile)
    assert seen == [(out, report.meta.run_id, len(report.frame))]
    saved = pa.load(out)  # whole once ingest returned
    assert saved.meta.run_id == report.meta.run_id
    assert {"report.html", "summary.md", "report.parquet", "meta.json"} <= {
        path.name for path in out.iterdir()}
    assert _no_child_left()


def test_what_meanwhile_raised_is_raised_once_the_folder_is_in_place(own_trace, tmp_path):
    """A terminal that went away while the tables were drawn loses the tables, not the
    run's folder."""
    def meanwhile(report):
        raise BrokenPipeError("the terminal went away")

    out = tmp_path / "run"
    with pytest.raises(BrokenPipeError, match="the terminal went away"):
        pa.ingest([own_trace], out, meanwhile=meanwhile)
    assert pa.load(out).meta.status == "complete"
    assert [path.name for path in tmp_path.iterdir()] == ["run"]  # no work folder left


def test_meanwhile_that_is_not_a_function_is_refused_before_anything_runs(own_trace,
                                                                          tmp_path):
    with pytest.raises(TypeError, match="meanwhile must be a function of the Report, not int"):
        pa.ingest([own_trace], tmp_path / "run", meanwhile=3)
    assert not (tmp_path / "run").exists()


def test_the_command_s_process_takes_arrow_s_memory_from_the_c_library_the_api_s_does_not(
        own_trace, tmp_path):
    """mimalloc kept what the report's tables freed (a third of an 8-rank ingest's peak):
    the command's own process frees to the system; a program calling the API keeps its
    allocator."""
    command = ("import profile_all.cli as cli, profile_all.entry as entry\n"
               "def shown():\n"
               "    import pyarrow\n"
               "    print(pyarrow.default_memory_pool().backend_name)\n"
               "cli.main = shown\n"
               "entry.main()\n")
    for first in ("", "import pyarrow\n"):  # imported after the command starts, or before
        ran = subprocess.run([sys.executable, "-c", first + command], capture_output=True,
                             text=True, timeout=120)
        assert ran.returncode == 0, ran.stderr
        assert ran.stdout.strip() == "system"
    api = ("import sys, pyarrow, profile_all as pa\n"
           "before = pyarrow.default_memory_pool().backend_name\n"
           "pa.ingest([sys.argv[1]], sys.argv[2], meanwhile=lambda report: None)\n"
           "print(before, pyarrow.default_memory_pool().backend_name)\n")
    ran = subprocess.run([sys.executable, "-c", api, str(own_trace), str(tmp_path / "run")],
                         capture_output=True, text=True, timeout=120)
    assert ran.returncode == 0, ran.stderr
    before, after = ran.stdout.split()
    assert after == before != "system"


def test_where_the_fork_fails_both_run_here_and_nothing_stays_frozen(monkeypatch):
    import errno
    import gc

    def no_fork():
        raise OSError(errno.ENOMEM, "Cannot allocate memory")

    monkeypatch.setattr(forked.os, "fork", no_fork)
    order = []
    forked.beside(lambda: order.append("work"), lambda: order.append("meanwhile"))
    assert order == ["work", "meanwhile"]
    assert gc.get_freeze_count() == 0
