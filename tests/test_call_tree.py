"""The call tree unfolded from pstats: on a profile of known sleeps made here, on
recursion, and on other projects' pstats files with call cycles."""

from __future__ import annotations

import cProfile
import time

import pytest

from profile_all.readers.pstats_reader import read_pstats
from profile_all.rows import call_path


def inner():
    time.sleep(0.06)


def outer():
    time.sleep(0.03)
    inner()
    inner()


def countdown(n):
    if n:
        time.sleep(0.002)
        countdown(n - 1)


def _tree(tmp_path, body):
    profile = cProfile.Profile()
    profile.runcall(body)
    profile.dump_stats(tmp_path / "p.prof")
    rows = [r for r in read_pstats(tmp_path / "p.prof") if r[0] == "call"]
    return {call_path(parent, name): value for _scope, name, parent, _m, _s, value, _u in rows}


def _find(tree, *ends):
    """The node whose path ends with these functions (by their `(name)`)."""
    def matches(path):
        tail = path.split(" ▸ ")[-len(ends):]
        return len(tail) == len(ends) and all(
            node.endswith(f"({end})") or f" {end}" in node
            for node, end in zip(tail, ends, strict=True))

    found = [path for path in tree if matches(path)]
    assert len(found) == 1, (ends, list(tree))
    return tree[found[0]]


def test_known_sleeps_land_where_they_were_slept(tmp_path):
    tree = _tree(tmp_path, outer)
    assert _find(tree, "outer") == pytest.approx(0.15, abs=0.03)
    assert _find(tree, "outer", "inner") == pytest.approx(0.12, abs=0.03)
    assert _find(tree, "outer", "inner", "time.sleep") == pytest.approx(0.12, abs=0.03)
    assert _find(tree, "outer", "time.sleep") == pytest.approx(0.03, abs=0.02)
    for path, value in tree.items():  # no node holds more than its caller
        parent = path.rpartition(" ▸ ")[0]
        if parent:
            assert value <= tree[parent] * 1.0001


def test_recursion_is_not_unfolded_again(tmp_path):
    tree = _tree(tmp_path, lambda: countdown(20))
    assert sum("countdown" in path.split(" ▸ ")[-1] for path in tree) == 1
    assert _find(tree, "countdown") == pytest.approx(0.04, abs=0.03)


def test_other_projects_pstats_with_cycles(fixtures):
    rows = read_pstats(fixtures / "pstats" / "cprofile-cycle.pstats")
    calls = [r for r in rows if r[0] == "call"]
    assert calls, "no call tree"
    paths = [call_path(r[2], r[1]) for r in calls]
    assert len(paths) == len(set(paths))
    for r in calls:  # a function appears at most once on its own path
        chain = [*r[2].split(" ▸ "), r[1]] if r[2] else [r[1]]
        assert len(chain) == len(set(chain))
