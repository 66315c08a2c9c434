"""The region log: enters paired with exits per thread, across journal records, and what
is left open; checked on journals written by hand and on real regions in real threads."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from array import array
from pathlib import Path

import pytest

import profile_all as pa
from profile_all import region_log, regions
from profile_all.region_log import RegionLog, read


def _record(thread: int, values: list[float], names: list[str] = ()) -> bytes:
    return json.dumps([thread, len(values), list(names)]).encode() + b"\n" + \
        array("d", values).tobytes()


def _as_lists(samples):
    return {key: list(values) for key, values in samples.items()}


def test_a_hand_written_journal_is_paired_per_thread(tmp_path):
    journal = tmp_path / "regions.journal"
    # thread 0: outer(1.0) { inner(2.0 .. 3.5) } .. 5.0, then an enter of inner whose
    # time is in the next record; thread 1: an exit it never entered, then inner alone
    journal.write_bytes(
        _record(0, [-1, 1.0, -2, 2.0, 3.5, 5.0, -2], ["outer", "inner"])
        + _record(1, [0.5, -2, 10.0, 10.25])
        + _record(0, [6.0, 6.5]))
    assert _as_lists(read(journal)) == {("outer", ""): [4.0], ("inner", "outer"): [1.5],
                                        ("inner", ""): [0.25, 0.5]}


def test_what_is_left_open_counts_to_the_end_or_not_at_all(tmp_path):
    journal = tmp_path / "regions.journal"
    journal.write_bytes(_record(0, [-1, 1.0, -2, 2.0], ["outer", "inner"])
                        + b'[0, 4, []]\n' + array("d", [3.0]).tobytes())  # cut short
    assert read(journal) == {}  # killed: when it died is not known
    assert _as_lists(read(journal, ended_at=4.0)) == {("inner", "outer"): [2.0],
                                                      ("outer", ""): [3.0]}
    assert read(tmp_path / "absent.journal") == {}


def _nest(depth_names, pause):
    with pa.region(depth_names[0]):
        if depth_names[1:]:
            _nest(depth_names[1:], pause)
        else:
            time.sleep(pause)


@pytest.mark.parametrize("with_hooks", [False, True], ids=["log-only", "log-and-hooks"])
def test_real_regions_in_two_threads(tmp_path, with_hooks):
    class Hooks:
        def __init__(self):
            self.exits = []

        def enter(self, name, parent):
            return None

        def exit(self, name, parent, token):
            self.exits.append((name, parent))

        def step(self):
            pass

    hooks = Hooks()
    log = RegionLog(tmp_path / "regions.journal")
    regions.listen([hooks] if with_hooks else [], log=log)
    try:
        worker = threading.Thread(target=_nest, args=(["load", "decode"], 0.03))
        with pa.region("step"):
            worker.start()
            _nest(["forward", "attention"], 0.25)  # past a flush: the journal is used
            worker.join()
        with pa.region("step"):
            pass
    finally:
        regions.listen(())
    samples = log.samples()
    assert set(samples) == {("step", ""), ("forward", "step"), ("attention", "step/forward"),
                            ("load", ""), ("decode", "load")}
    assert len(samples[("step", "")]) == 2
    assert samples[("attention", "step/forward")][0] >= 0.25
    assert samples[("forward", "step")][0] >= samples[("attention", "step/forward")][0]
    assert samples[("decode", "load")][0] >= 0.03
    assert not log.journal.exists()
    if with_hooks:
        assert sorted(hooks.exits) == sorted([("decode", "load"), ("load", ""), ("step", ""),
                                              ("attention", "step/forward"),
                                              ("forward", "step"), ("step", "")])


def test_regions_left_open_are_timed_to_the_end(tmp_path):
    log = RegionLog(tmp_path / "regions.journal")
    regions.listen([], log=log)
    try:
        region = pa.region("never_left")
        region.__enter__()
        time.sleep(0.01)
        regions.close_open()
    finally:
        regions.listen(())
    assert log.samples()[("never_left", "")][0] >= 0.01


def test_an_unnamed_region_needs_a_name_under_the_log(tmp_path):
    regions.listen([], log=RegionLog(tmp_path / "regions.journal"))
    try:
        with pytest.raises(ValueError, match="needs a name"), pa.region():
            pass
    finally:
        regions.listen(())


def test_the_c_extension_is_used_where_it_was_built():
    """Built by the install where a compiler is found (setup.py): then regions use it."""
    package = Path(pa.__file__).parent
    if not list(package.glob("_region_fast*.so")):
        pytest.skip("the C extension is not built in this tree (no compiler at install, or "
                    "src/ run without `pip install -e .`): the Python path was tested")
    if os.environ.get("PROFILE_ALL_NO_EXTENSION"):
        assert region_log.native is None
        assert "PROFILE_ALL_NO_EXTENSION" in region_log.MARKS_IN
    else:
        assert region_log.native is not None, region_log.MARKS_IN
        assert region_log.MARKS_IN == "C extension"
        assert type(pa.region("x")).__mro__[1] is region_log.native.Marks


def test_the_python_path_behaves_as_the_c_path():
    """This module's and test_regions.py's tests again, with the extension switched off
    (or on, where this run has it off): both paths keep the same behaviour."""
    env = dict(os.environ)
    if env.pop("PROFILE_ALL_NO_EXTENSION", None) is None:
        env["PROFILE_ALL_NO_EXTENSION"] = "1"
    tests = Path(__file__).parent
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-n", "0", "-p", "no:cacheprovider",
         str(tests / "test_region_log.py"), str(tests / "test_regions.py"),
         "-k", "not python_path_behaves"],
        env=env, capture_output=True, text=True, timeout=240, cwd=tests.parent)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert " passed" in done.stdout and " failed" not in done.stdout


def test_regions_nested_deeper_than_the_cap_are_left_out_of_the_log(tmp_path):
    """Pairing a journal of 100 nested regions: the 64 outer ones are samples, keyed by
    their parents' paths, the 36 inside them counted."""
    depth = 100
    names = [f"level{d}" for d in range(depth)]
    values = [v for d in range(depth) for v in (-(d + 1.0), float(d))] + \
        [200.0 + d for d in range(depth)]
    journal = tmp_path / "regions.journal"
    journal.write_bytes(_record(0, values, names))
    deep: list[int] = []
    samples = read(journal, too_deep=deep)
    assert deep == [36]
    assert len(samples) == 64
    assert ("level63", "/".join(names[:63])) in samples
    assert list(samples[("level0", "")]) == [299.0]
