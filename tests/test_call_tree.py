"""The call tree unfolded from pstats: on a profile of known sleeps made here, on
recursion, and on other projects' pstats files with call cycles."""

from __future__ import annotations

import cProfile
import math
import pstats
import time
from pathlib import Path

import pytest

import profile_all as pa
from conftest import EXAMPLES, TARGETS, profile_all_here
from profile_all.readers.call_tree import call_rows, own_frames
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


def work(n):
    return sum(range(n))


def even(n):  # even -> odd -> even ...: each calls work, odd most
    if n == 0:
        return work(200_000)
    work(2_000)
    return odd(n - 1)


def odd(n):
    if n == 0:
        return work(200_000)
    work(20_000)
    return even(n - 1)


def _profile(tmp_path, body):
    profile = cProfile.Profile()
    profile.runcall(body)
    profile.dump_stats(tmp_path / "p.prof")
    return tmp_path / "p.prof"


def _tree(tmp_path, body):
    rows = [r for r in read_pstats(_profile(tmp_path, body)) if r[0] == "call"]
    return {call_path(parent, name): value for _scope, name, parent, _m, _s, value, _u in rows}


def _edge(stats, caller, callee):
    """pstats' cumulative time of `callee` in its calls from `caller` (by function name)."""
    [edge] = [edge for function, (*_, callers) in stats.items() if function[2] == callee
              for function_of_caller, edge in callers.items()
              if function_of_caller[2] == caller]
    return edge[3]


def assert_children_fit(calls):
    """Every node holds at least its children together (plotly's branchvalues="total")."""
    children = {}
    for _scope, _name, parent, *_, value, _unit in calls:
        children.setdefault(parent, []).append(value)
    for _scope, name, parent, *_, value, _unit in calls:
        held = math.fsum(children.get(call_path(parent, name), []))
        assert held <= value, (call_path(parent, name), value, held)


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
    path = _profile(tmp_path, lambda: countdown(20))
    stats = pstats.Stats(str(path)).stats
    rows = [r for r in read_pstats(path) if r[0] == "call"]
    tree = {call_path(r[2], r[1]): r[5] for r in rows}
    assert sum("countdown" in path.split(" ▸ ")[-1] for path in tree) == 1
    assert_children_fit(rows)
    # all 20 sleeps, from every level of the recursion, under the one countdown node, as
    # pstats measured them; they are most of its time
    sleeps = _find(tree, "countdown", "time.sleep")
    assert sleeps == pytest.approx(_edge(stats, "countdown", "<built-in method time.sleep>"),
                                   rel=1e-9)
    assert sleeps > 0.5 * _find(tree, "countdown")


def test_mutual_recursion_children_never_claim_more_than_their_node(tmp_path):
    """cProfile counts an edge's time in the outermost of nested calls only: even's edge
    to odd holds the whole recursion, and its edge to work every even's work again. The
    tree keeps each node at least its children, and each work where it was done."""
    path = _profile(tmp_path, lambda: even(31))
    stats = pstats.Stats(str(path)).stats
    [even_key] = [f for f in stats if f[2] == "even"]
    claimed = _edge(stats, "even", "odd") + _edge(stats, "even", "work")
    assert claimed > stats[even_key][3]  # what broke the icicle: more than even's time
    rows = [r for r in read_pstats(path) if r[0] == "call"]
    assert_children_fit(rows)
    tree = {call_path(r[2], r[1]): r[5] for r in rows}
    assert _find(tree, "even", "odd", "work") == pytest.approx(_edge(stats, "odd", "work"),
                                                              rel=1e-9)
    assert _find(tree, "even", "work") == pytest.approx(_edge(stats, "even", "work"), rel=1e-9)
    assert _find(tree, "even", "odd") < _find(tree, "even")


def test_children_claiming_more_are_scaled_to_their_parent():
    """pstats numbers made up: two callees claim 1.4 s of a 1 s root; each keeps its share."""
    root, first, second = ("r.py", 1, "root"), ("a.py", 1, "first"), ("b.py", 1, "second")
    entries = {root: (1, 1, 0.0, 1.0, {}),
               first: (1, 1, 0.8, 0.8, {root: (1, 1, 0.8, 0.8)}),
               second: (1, 1, 0.6, 0.6, {root: (1, 1, 0.6, 0.6)})}
    rows = call_rows(entries, lambda function: function[2])
    values = {name: value for _scope, name, _parent, _m, _s, value, _u in rows}
    assert values["root"] == 1.0
    assert values["first"] / values["second"] == pytest.approx(0.8 / 0.6, rel=1e-9)
    assert values["first"] + values["second"] == pytest.approx(1.0, rel=1e-9)
    assert_children_fit(rows)


def test_other_projects_pstats_with_cycles(fixtures):
    path = fixtures / "pstats" / "cprofile-cycle.pstats"
    assert own_frames(pstats.Stats(str(path)).stats) is None  # not profile-all's: as it is
    rows = read_pstats(path)
    calls = [r for r in rows if r[0] == "call"]
    assert calls, "no call tree"
    assert_children_fit(calls)
    paths = [call_path(r[2], r[1]) for r in calls]
    assert len(paths) == len(set(paths))
    for r in calls:  # a function appears at most once on its own path
        chain = [*r[2].split(" ▸ "), r[1]] if r[2] else [r[1]]
        assert len(chain) == len(set(chain))


def test_a_profile_profile_all_did_not_make_keeps_its_frames(tmp_path):
    """Regions and steps in a script profiled by cProfile itself: profile-all's frames are
    that profile's and stay, in the functions and in the tree."""
    def marked():
        for _ in range(3):
            with pa.region("r"):
                time.sleep(0.001)
            pa.step()

    rows = read_pstats(_profile(tmp_path, marked))
    names = {r[1] for r in rows if r[0] == "function"}
    assert any("profile_all/regions.py" in name for name in names), names
    assert [r[1] for r in rows if r[0] == "call" and not r[2]] == [
        f"{__file__}:{marked.__code__.co_firstlineno}(marked)"]


# real runs: a recursive target (regions, pa.step(), a decorated function recursing
# through the decorator) and an example training script, under profile-all's cprofile

PACKAGE = str(Path(pa.__file__).parent)


@pytest.fixture(scope="module")
def real_runs(tmp_path_factory):
    runs = {}
    for script, args in ((TARGETS / "recursive.py", ["2"]),
                         (EXAMPLES / "train_mlp.py", ["--steps", "4"])):
        out = tmp_path_factory.mktemp("calls") / script.stem
        done = profile_all_here("run", script, "-b", "cprofile", "-o", out, "--", *args)
        assert done.returncode == 0, done.stderr
        runs[script] = out
    return runs


def _rows(run_dir, scope):
    frame = pa.load(run_dir).frame
    picked = frame[(frame["backend"] == "cprofile") & (frame["scope"] == scope)]
    return picked[["scope", "name", "parent", "metric", "stat", "value", "unit"]] \
        .values.tolist()


def _ours(name):
    return PACKAGE in name or "runpy" in name or "profile_all." in name


def test_real_runs_trees_hold_their_children(real_runs):
    for run_dir in real_runs.values():
        calls = _rows(run_dir, "call")
        assert len(calls) > 5, calls
        assert_children_fit(calls)


def test_real_runs_hold_the_users_code_only(real_runs):
    for script, run_dir in real_runs.items():
        calls, functions = _rows(run_dir, "call"), _rows(run_dir, "function")
        assert [r[1] for r in calls if not r[2]] == [f"{script}:1(<module>)"]  # the root
        assert not [r for r in calls + functions if _ours(r[1]) or _ours(r[2])]
        # the .prof keeps everything, profile-all's frames too
        kept = pstats.Stats(str(run_dir / "artifacts" / "cprofile.prof")).stats
        assert any(f[0].startswith(PACKAGE) and f[2] == "run_target" for f in kept)
        assert any("runpy" in f[0] for f in kept)
    recursive = real_runs[TARGETS / "recursive.py"]
    names = {r[1] for r in _rows(recursive, "function")}
    tree = {call_path(r[2], r[1]): r[5] for r in _rows(recursive, "call")}
    for function in ("countdown", "even", "odd", "tower", "work"):
        assert any(name.endswith(f"({function})") for name in names), function
    # tower, decorated with pa.region, hangs from the module, profile-all's wrapper gone
    assert _find(tree, "<module>", "tower") > 0
    assert _find(tree, "<module>", "tower", "work") <= _find(tree, "<module>", "tower")
    # what profile-all's wrapper called for itself (functools) is not the user's
    assert not [name for name in names if "functools" in name]


def test_ingest_of_the_runs_file_gives_the_runs_rows(real_runs):
    for run_dir in real_runs.values():
        again = read_pstats(run_dir / "artifacts" / "cprofile.prof")
        for scope in ("function", "call"):
            assert sorted(r[:6] for r in again if r[0] == scope) == \
                sorted(r[:6] for r in _rows(run_dir, scope))


def test_a_window_s_tree_holds_every_call_of_its_steps(tmp_path):
    """cProfile in a window of pa.step()s inside the timing pass's process: the roots are
    what the script called in those steps (the forward's module call, backward, the
    optimizer's step), not the heaviest of them alone (backward was)."""
    out = tmp_path / "run"
    done = profile_all_here("run", EXAMPLES / "train_mlp.py", "-b", "wallclock", "-b", "cprofile",
                            "-o", out, "--", "--steps", "20")
    assert done.returncode == 0, done.stderr
    assert pa.load(out).meta.passes[1].host == 1  # in a window of pass 1's steps
    calls = _rows(out, "call")
    roots = {r[1] for r in calls if not r[2]}
    for called in ("(backward)", "(_wrapped_call_impl)", "(wrapper)"):
        assert any(root.endswith(called) for root in roots), (called, roots)
    assert not [r for r in calls if _ours(r[1]) or _ours(r[2])]
    assert_children_fit(calls)
