"""A function called once a module has been imported whole, wherever its import comes from
(`import torch._dynamo` inside the user's `torch.compile`, or anywhere else).

Python has no hook after an import: a finder first on `sys.meta_path` hands the import
the spec the other finders give, its loader told to call the function once the module's
code has run. The finder leaves `sys.meta_path` at that import, or when cancelled.
"""

from __future__ import annotations

import importlib.abc
import sys
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any


class AfterImport(importlib.abc.MetaPathFinder):
    def __init__(self, name: str, then: Callable[[], None]) -> None:
        self.name, self.then = name, then

    def find_spec(self, fullname: str, path: Sequence[str] | None,
                  target: ModuleType | None = None) -> Any:
        if fullname != self.name:
            return None
        self.cancel()
        spec = next((found for finder in list(sys.meta_path)
                     if (found := _spec(finder, fullname, path, target)) is not None), None)
        loader = getattr(spec, "loader", None)
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        executed, then = loader.exec_module, self.then

        def exec_module(module: ModuleType) -> None:
            executed(module)
            then()

        loader.exec_module = exec_module  # this spec's own loader
        return spec

    def cancel(self) -> None:
        if self in sys.meta_path:
            sys.meta_path.remove(self)


def _spec(finder: Any, fullname: str, path: Sequence[str] | None,
          target: ModuleType | None) -> Any:
    find = getattr(finder, "find_spec", None)
    return find(fullname, path, target) if find is not None else None


def call(name: str, then: Callable[[], None]) -> AfterImport:
    """`then()` once module `name` (not imported yet) has been imported whole."""
    finder = AfterImport(name, then)
    sys.meta_path.insert(0, finder)
    return finder
