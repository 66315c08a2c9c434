"""Traces parsed while the command imports pandas (runs/parse_ahead.py): what is taken is
what the reader would have parsed, only from the same file under the same limits, and the
process and its folder never outlive the ingest."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from conftest import processes_with, profile_all, write_torch_trace
from profile_all.readers import chrome_trace, limits
from profile_all.readers.detect import read_any
from profile_all.runs import parse_ahead
from profile_all.runs.parse_ahead import Parsed


def _parsed_here(paths, folder) -> Parsed:
    """What the forked process does, done in this process: each trace parsed into
    `folder`; the files it finished."""
    read_end, write_end = os.pipe()
    parse_ahead._parse_each(paths, folder, write_end, os.getppid())
    os.close(write_end)
    with os.fdopen(read_end, "rb") as pipe:
        finished = [int(number) for number in pipe.read().split()]
    return Parsed({str(paths[number]): folder / f"{number}.pickle" for number in finished},
                  limits.current())


def test_a_trace_parsed_ahead_is_read_as_the_file_itself(tmp_path, own_trace):
    config = tmp_path / "config.json"
    config.write_text('{"lr": 0.1}')
    junk = tmp_path / "other.json"
    junk.write_bytes(b"\x00\x01")
    folder = tmp_path / "parsed"
    folder.mkdir()
    parsed = _parsed_here([config, own_trace, junk], folder)
    assert list(parsed.files) == [str(own_trace)]  # neither the config nor the bytes
    taken = parsed.taken(own_trace)
    assert taken.columns == chrome_trace.load(own_trace).columns
    assert not any(folder.iterdir())  # taken once, then gone
    assert read_any(own_trace, taken).rows == read_any(own_trace).rows


def test_nothing_is_taken_from_a_changed_file_or_under_other_limits(tmp_path):
    trace = write_torch_trace(tmp_path / "trace.json")
    folder = tmp_path / "parsed"
    folder.mkdir()
    parsed = _parsed_here([trace], folder)
    with limits.applied(max_field=4096):
        assert parsed.taken(trace) is None
    parsed = _parsed_here([trace], folder)
    trace.write_text(trace.read_text().replace('"ts"', ' "ts"'))  # other bytes, same events
    assert parsed.taken(trace) is None


def test_a_file_beyond_the_limits_is_left_to_the_reader_to_refuse(tmp_path):
    trace = tmp_path / "trace.json"
    trace.write_text(json.dumps({"traceEvents": [
        {"ph": "X", "cat": "cpu_op", "name": "x" * 5000, "pid": 1, "tid": 1, "ts": 0,
         "dur": 1}]}))
    folder = tmp_path / "parsed"
    folder.mkdir()
    with limits.applied(max_field=1000):
        assert _parsed_here([trace], folder).files == {}
    result = profile_all("ingest", trace, "--max-field", "1000", "-o", tmp_path / "out")
    assert result.returncode == 2
    assert "over the 1,000 characters a field may hold (--max-field)" in result.stderr


_LIFECYCLE = """
import json, os, sys, time
from pathlib import Path
from profile_all.runs import parse_ahead
paths = [Path(p) for p in sys.argv[1:]]
def parsing_ended(pid):  # (a zombie: its work done, not yet reaped)
    return open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0] == "Z"

with parse_ahead.started(paths, None, None) as parsing:
    import pandas  # what the command imports meanwhile
    deadline = time.monotonic() + 60
    while not parsing_ended(parsing._pid) and time.monotonic() < deadline:
        time.sleep(0.01)
    parsed = parsing.ready()
    folder = next(iter(parsed.files.values())).parent if parsed.files else None
    taken = {path: parsed.taken(Path(path)) is not None for path in parsed.files}
try:
    os.waitpid(-1, os.WNOHANG)
    child_left = True
except ChildProcessError:
    child_left = False
with parse_ahead.started(paths, None, None) as again:  # pandas is imported: nothing to gain
    pass
print(json.dumps({"taken": taken, "folder_left": folder is not None and folder.exists(),
                  "child_left": child_left, "again": again is not None}))
"""


def test_the_parsing_process_and_its_folder_end_with_the_ingest(tmp_path):
    traces = [write_torch_trace(tmp_path / f"rank{rank}.json", rank=rank) for rank in (0, 1)]
    ended = subprocess.run([sys.executable, "-c", _LIFECYCLE, *map(str, traces)],
                           capture_output=True, text=True, timeout=120)
    assert ended.returncode == 0, ended.stderr
    said = json.loads(ended.stdout)
    assert said["taken"] == {str(path): True for path in traces}
    assert not said["folder_left"] and not said["child_left"] and not said["again"]


def _ranks_and_scratch(tmp_path, ranks: int, suffix: str):
    """(a folder of `ranks` rank traces, an empty folder for TMPDIR)."""
    folder, scratch = tmp_path / "ranks", tmp_path / "tmp"
    folder.mkdir()
    scratch.mkdir()
    for rank in range(ranks):
        write_torch_trace(folder / f"rank{rank}{suffix}", rank=rank)
    return folder, scratch


def test_an_ingest_that_parsed_ahead_reports_what_one_that_did_not_reports(tmp_path):
    """The command (pandas not imported when it starts: traces parsed ahead) and the API
    in this process (pandas imported: nothing parsed ahead), on the same rank files."""
    import profile_all as pa

    folder, scratch = _ranks_and_scratch(tmp_path, 3, ".json.gz")
    result = profile_all("ingest", folder, "-o", tmp_path / "command",
                         env={"TMPDIR": str(scratch)})
    assert result.returncode == 0, result.stderr
    assert not any(scratch.iterdir())  # the parsed columns' folder is gone
    here = pa.ingest([folder], tmp_path / "api")
    command = pa.load(tmp_path / "command")
    assert command.frame.equals(here.frame)


_INTERRUPTED = """
import os, signal, sys
signal.signal(signal.SIGINT, signal.default_int_handler)  # as in a terminal
import profile_all.entry as entry
from profile_all.runs import parse_ahead
start = parse_ahead.Parsing.start
def started(self, given):
    running = start(self, given)
    os.killpg(os.getpgrp(), signal.SIGINT)  # Ctrl-C: the terminal's SIGINT to the group
    return running
parse_ahead.Parsing.start = started
sys.argv = ["profile-all", "ingest", *sys.argv[1:]]
entry.main()
"""


def test_ctrl_c_while_traces_are_parsed_ahead_leaves_nothing_behind(tmp_path):
    folder, scratch = _ranks_and_scratch(tmp_path, 2, ".json")
    done = subprocess.run([sys.executable, "-c", _INTERRUPTED, str(folder), "-o",
                           str(tmp_path / "out")], capture_output=True, text=True,
                          timeout=120, start_new_session=True,
                          env={**os.environ, "TMPDIR": str(scratch)})
    assert done.returncode == 130, done.stderr
    assert done.stderr.strip().splitlines() == ["profile-all: interrupted (Ctrl-C)"]
    assert not any(scratch.iterdir()) and not (tmp_path / "out").exists()
    assert processes_with(str(folder)) == []
