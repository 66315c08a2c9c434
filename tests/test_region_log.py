"""The region log: enters paired with exits per thread, across journal records, and what
is left open; checked on journals written by hand and on real regions in real threads."""

from __future__ import annotations

import json
import threading
import time
from array import array

import pytest

import profile_all as pa
from profile_all import regions
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
