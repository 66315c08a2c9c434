"""Regions and steps reach the listening backends with the right names and parents."""

from __future__ import annotations

import threading

import pytest

import profile_all as pa
from profile_all import regions


class Recorder:
    def __init__(self):
        self.events = []

    def enter(self, name, parent):
        self.events.append(("enter", name, parent))
        return len(self.events)

    def exit(self, name, parent, token):
        self.events.append(("exit", name, parent, token))

    def step(self):
        self.events.append(("step",))


@pytest.fixture
def recorder():
    listener = Recorder()
    regions.listen([listener])
    yield listener
    regions.listen(())


def test_nesting_gives_parent_paths_and_tokens_back(recorder):
    with pa.region("a"), pa.region("b"), pa.region("c"):
        pass
    pa.step()
    assert recorder.events == [
        ("enter", "a", ""), ("enter", "b", "a"), ("enter", "c", "a/b"),
        ("exit", "c", "a/b", 3), ("exit", "b", "a", 2), ("exit", "a", "", 1), ("step",)]


def test_decorator_forms(recorder):
    @pa.region
    def bare():
        return 1

    @pa.region()
    def empty_call():
        return 2

    @pa.region("named")
    def named():
        return 3

    assert (bare(), empty_call(), named()) == (1, 2, 3)
    entered = [e[1] for e in recorder.events if e[0] == "enter"]
    assert entered == [
        "test_decorator_forms.<locals>.bare", "test_decorator_forms.<locals>.empty_call", "named"]
    assert named.__name__ == "named"


def test_decorated_before_listening_is_heard_later():
    @pa.region("late")
    def work():
        return "done"

    listener = Recorder()
    regions.listen([listener])
    try:
        assert work() == "done"
    finally:
        regions.listen(())
    assert ("enter", "late", "") in listener.events


def test_exception_still_closes_the_region(recorder):
    with pytest.raises(ValueError), pa.region("fails"):
        raise ValueError
    assert recorder.events[-1][:2] == ("exit", "fails")


def test_threads_have_their_own_stacks(recorder):
    def worker():
        with pa.region("in_thread"):
            pass

    with pa.region("main"):
        thread = threading.Thread(target=worker)
        thread.start()
        thread.join()
    assert ("enter", "in_thread", "") in recorder.events


def test_unnamed_region_as_context_manager_is_an_error(recorder):
    with pytest.raises(ValueError, match="needs a name"), pa.region():
        pass


def test_outside_profile_all_regions_do_nothing():
    with pa.region("nobody listens"):
        pa.step()
    assert pa.region("x") is pa.region("x")  # one cached object per name


def _nested(depth: int) -> None:
    if depth:
        with pa.region(f"level{depth}"):
            _nested(depth - 1)


def test_regions_nested_deeper_than_the_cap_are_not_heard(recorder):
    """A region inside 64 others reaches no backend (its path would repeat every name around
    it); its exit neither, the count is kept, and the 64 outer ones pair as ever."""
    before = regions.too_deep_calls()
    _nested(100)
    enters = [e for e in recorder.events if e[0] == "enter"]
    exits = [e for e in recorder.events if e[0] == "exit"]
    assert [e[1] for e in enters] == [f"level{d}" for d in range(100, 36, -1)]
    assert [e[1:3] for e in exits] == [e[1:] for e in reversed(enters)]
    assert regions.too_deep_calls() - before == 36
    with pa.region("after"):  # the stack is whole again
        pass
    assert recorder.events[-1] == ("exit", "after", "", len(recorder.events) - 1)
