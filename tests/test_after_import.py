"""after_import: a function called once a module's code has run, however it is imported."""

from __future__ import annotations

import sys

from profile_all import after_import


def test_called_once_the_module_has_run_and_the_finder_leaves(tmp_path, monkeypatch):
    (tmp_path / "late_module.py").write_text("VALUE = 42\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    seen = []
    finder = after_import.call("late_module", lambda: seen.append(
        sys.modules["late_module"].VALUE))
    assert finder in sys.meta_path
    import late_module  # noqa: F401  (the import the function waits for)

    assert seen == [42]  # after the module's code ran, with its names defined
    assert finder not in sys.meta_path
    del sys.modules["late_module"]


def test_cancelled_it_is_never_called(tmp_path, monkeypatch):
    (tmp_path / "other_module.py").write_text("VALUE = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    seen = []
    finder = after_import.call("other_module", lambda: seen.append(True))
    finder.cancel()
    import other_module  # noqa: F401

    assert seen == [] and finder not in sys.meta_path
    del sys.modules["other_module"]
