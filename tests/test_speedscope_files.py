"""speedscope files made by others (or made to hurt): a good one read into the sampled
views, and each bad one refused in one line, exit 2, nothing written."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

import profile_all as pa
from conftest import profile_all, profile_all_here

SCHEMA = "https://www.speedscope.app/file-format-schema.json"


def _file(frames: list, profiles: list) -> dict:
    return {"$schema": SCHEMA, "shared": {"frames": frames}, "profiles": profiles,
            "exporter": "py-spy@0.4.3", "name": "py-spy profile"}


def _sampled(samples: list, weights: list, name: str = 'Thread 7 "MainThread"') -> dict:
    return {"type": "sampled", "name": name, "unit": "seconds", "startValue": 0,
            "endValue": len(samples), "samples": samples, "weights": weights}


FRAMES = [{"name": "<module>", "file": "/nowhere/job.py", "line": 3},
          {"name": "train", "file": "/nowhere/job.py", "line": 9},
          {"name": "Linear.forward", "file": "/nowhere/torch/nn/modules/linear.py",
           "line": 130},
          {"name": "at::mm (libtorch_cpu.so)", "file": "/usr/lib/libtorch_cpu.so", "line": 0}]


def _write(path, document, packed: bool = False) -> None:
    data = json.dumps(document).encode()
    path.write_bytes(gzip.compress(data) if packed else data)


def test_a_speedscope_file_of_another_machine_is_read(tmp_path):
    """Its sources are not on this machine: functions keep their names with an unknown
    first line; counts, times and shares as the samples say (independently: 30 samples
    of forward and 10 of the native mm under it, 0.01 s each)."""
    stacks = [[0, 1, 2]] * 30 + [[0, 1, 2, 3]] * 10 + [[0, 1]] * 60
    path = tmp_path / "job.speedscope.json.gz"
    _write(path, _file(FRAMES, [_sampled(stacks, [0.01] * len(stacks))]), packed=True)
    done = profile_all_here("ingest", path, "-o", tmp_path / "run")
    assert done.returncode == 0, done.stderr
    table = pa.load(tmp_path / "run").sampled_functions().set_index("name")
    forward = table.loc["/nowhere/torch/nn/modules/linear.py:?(forward)"]
    assert (forward["samples"], forward["self_samples"]) == (40, 30)
    assert forward["cumulative_time"] == pytest.approx(0.40)
    assert forward["share"] == pytest.approx(0.40)
    assert table.loc["at::mm (libtorch_cpu.so)", "self_time"] == pytest.approx(0.10)
    assert table.loc["/nowhere/job.py:1(<module>)", "share"] == pytest.approx(1.0)


def test_shares_are_of_every_thread_s_samples(tmp_path):
    """A DataLoader's feeder thread sampled beside the main one (60 and 40 samples): each
    share is of the process's 100 samples, not of the main thread's root (the feeder's
    wait showed 66.7%, and the shares added up to more than the whole)."""
    feeder = [{"name": "wait", "file": "/lib/python3.11/threading.py", "line": 295}]
    stacks = [[0, 1]] * 60
    path = tmp_path / "two.speedscope.json"
    _write(path, _file(FRAMES + feeder, [
        _sampled(stacks, [0.01] * 60),
        _sampled([[4]] * 40, [0.01] * 40, name='Thread 8 "QueueFeederThread"')]))
    done = profile_all_here("ingest", path, "-o", tmp_path / "run")
    assert done.returncode == 0, done.stderr
    table = pa.load(tmp_path / "run").sampled_functions().set_index("name")
    assert table.loc["/nowhere/job.py:1(<module>)", "share"] == pytest.approx(0.6)
    assert table["share"].max() <= 1
    waits = [name for name in table.index if name.endswith("(wait)")]
    assert table.loc[waits[0], "share"] == pytest.approx(0.4)


@pytest.mark.parametrize("document, said", [
    (_file(FRAMES, [{"type": "evented", "name": "x", "unit": "seconds", "startValue": 0,
                     "endValue": 1, "events": []}]),
     "profile 0 is 'evented', not 'sampled': only sampled profiles (py-spy's) are read"),
    (_file(FRAMES, [_sampled([[0, 9]], [0.01])]),
     "profile 0 has a sample that is not a list of frame indices below 4"),
    (_file(FRAMES, [_sampled([[0, -1]], [0.01])]),
     "profile 0 has a sample that is not a list of frame indices below 4"),
    (_file(FRAMES, [_sampled([[0]], [-0.01])]),
     "profile 0 has a weight that is not a number from 0 to 3600 (-0.01): not a sample's"),
    (_file(FRAMES, [_sampled([[0]], [1e308])]),
     "profile 0 has a weight that is not a number from 0 to 3600 (1e+308)"),
    (_file(FRAMES, [_sampled([[0]], [float("nan")])]), "not valid JSON"),
    (_file(FRAMES, [_sampled([[0], [1]], [0.01])]),
     "profile 0 has no samples with a weight each"),
    (_file([{"name": 7, "file": "x.py", "line": 1}], [_sampled([[0]], [0.01])]),
     "frame 0 is not a speedscope frame"),
    (_file(FRAMES, [{**_sampled([[0]], [1]), "unit": "furlongs"}]),
     "profiles in units ['furlongs']"),
    ({"$schema": SCHEMA, "profiles": []}, "not a speedscope file (no shared.frames)"),
])
def test_bad_speedscope_files_are_refused_in_one_line(tmp_path, document, said):
    path = tmp_path / "bad.json"
    _write(path, document)
    out = tmp_path / "run"
    done = profile_all_here("ingest", path, "-o", out)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and said in lines[0], done.stderr
    assert not out.exists() and not list(tmp_path.glob(".run*"))


def test_a_name_beyond_max_field_is_refused(tmp_path):
    frames = [{"name": "f" * 5000, "file": "a.py", "line": 1}]
    path = tmp_path / "long.json"
    _write(path, _file(frames, [_sampled([[0]], [0.01])]))
    done = profile_all_here("ingest", path, "--max-field", "1K", "-o", tmp_path / "run")
    assert done.returncode == 2
    assert "frame 0's name is 4.88 Ki characters long, over the 1 Ki characters a field " \
           "may hold (--max-field)" in done.stderr


def test_a_stack_deep_enough_to_hurt_is_read_in_bounded_memory(tmp_path):
    """One sample 200,000 frames deep (600 KB): every prefix of it held took 23 GB; the
    call tree now keeps 256 levels, a node each."""
    frames = [{"name": "f", "file": "a.py", "line": 1}, {"name": "g", "file": "a.py",
                                                         "line": 2}]
    path = tmp_path / "deep.json"
    _write(path, _file(frames, [_sampled([[i % 2 for i in range(200_000)]], [0.01])]))
    done = profile_all("ingest", path, "-o", tmp_path / "run")
    assert done.returncode == 0, done.stderr
    calls = pa.load(tmp_path / "run").frame.query("scope == 'call'")
    assert len(calls) == 256  # 256 levels: the thread, then 255 frames


def test_a_child_process_s_threads_and_exec_d_code_are_named_plainly(tmp_path):
    """py-spy names a child process's threads `Process N Thread N ""`: the thread table
    said `process 17394 Process 17394 Thread 17394 ""`; code run by exec (nanoGPT's
    configurator) gave a line row `<string>:1`."""
    frames = [*FRAMES, {"name": "<module>", "file": "<string>", "line": 1}]
    parent = _sampled([[0, 1, 4]] * 50 + [[0, 1]] * 50, [0.01] * 100,
                      name='Process 100 Thread 100 "MainThread"')
    child = _sampled([[0, 1]] * 20, [0.01] * 20, name='Process 101 Thread 101 ""')
    worker = _sampled([[0, 1]] * 10, [0.01] * 10, name='Process 101 Thread 102 ""')
    path = tmp_path / "job.speedscope.json"
    _write(path, _file(frames, [parent, child, worker]))
    done = profile_all_here("ingest", path, "-o", tmp_path / "run")
    assert done.returncode == 0, done.stderr
    report = pa.load(tmp_path / "run")
    assert set(report.threads()["thread"]) == {
        "MainThread", "process 101 MainThread", "process 101 thread 102"}
    lines = report.frame[report.frame["scope"] == "line"]
    assert not lines["name"].str.startswith("<string>").any()


def test_frames_of_many_sources_on_this_machine_are_named_within_a_budget(tmp_path):
    """20,000 frames over 2,000 of this machine's larger sources, every one sampled: each
    was compiled to find its first line (past 120 s with a 1,024-file cache thrashing); the
    sources compiled are bounded (16 MiB), beyond which a first line is `?`. The bound is
    a profile's: the next profile read in the same process names its functions again (it
    once lasted the process's life, and a notebook's later profiles were all `?`)."""
    import site

    sources = sorted(path for root in site.getsitepackages()
                     for path in Path(root).rglob("*.py") if path.stat().st_size > 20_000)[:2000]
    frames = [{"name": "f", "file": str(sources[i % len(sources)]), "line": 1}
              for i in range(20_000)]
    path = tmp_path / "many.speedscope.json"
    _write(path, _file(frames, [_sampled([[i] for i in range(20_000)], [0.01] * 20_000)]))
    done = profile_all_here("ingest", path, "-o", tmp_path / "run")
    assert done.returncode == 0, done.stderr
    names = pa.load(tmp_path / "run").sampled_functions()["name"]
    assert names.str.endswith(":?(f)").any() and len(names) == len(set(map(str, sources)))
    source = tmp_path / "later.py"  # 1 MiB: more than the first profile left of the bound
    source.write_text("# padding\n" * 2**17 + "def first():\n    return 1\n")
    later = tmp_path / "later.speedscope.json"
    _write(later, _file([{"name": "first", "file": str(source), "line": 2**17 + 2}],
                        [_sampled([[0]], [0.01])]))
    named = pa.ingest([later], tmp_path / "later").sampled_functions()["name"]
    assert list(named) == [f"{source}:{2**17 + 1}(first)"]


def test_a_profile_named_with_a_process_id_of_5000_digits(tmp_path):
    """int() refused the 5,000 digits with a ValueError traceback: such a name is not
    py-spy's `Process N Thread M`, and is kept as the thread's name."""
    path = tmp_path / "odd.speedscope.json"
    _write(path, _file(FRAMES, [_sampled([[0, 1]] * 3, [0.01] * 3,
                                         name=f"Process {'9' * 5000} Thread 7")]))
    done = profile_all_here("ingest", path, "-o", tmp_path / "run")
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
