"""thop (counter): MACs and parameters of each root module and of its layers, by
ultralytics-thop, counted once per root module on its first call (forward only)."""

from __future__ import annotations

import contextlib
import importlib.util
import io
from typing import Any

from profile_all.backends.base import Backend, Collected, PassContext
from profile_all.backends.roots import RootModules, counting_copy
from profile_all.report.schema import row


def _layer_rows(prefix: str, layers: dict[str, Any]) -> list[list[Any]]:
    rows = []
    for name, (macs, params, children) in layers.items():
        path = f"{prefix}.{name}"
        rows += [row("module", path, "macs", macs, unit="MAC"),
                 row("module", path, "flops", 2 * macs, unit="FLOP"),
                 row("module", path, "params", params, unit="count")]
        rows += _layer_rows(path, children)
    return rows


class Thop(Backend):
    name = "thop"
    kind = "counter"
    measures = "MACs and parameters per root module and per layer (forward)"
    imports = ("torch",)

    @classmethod
    def available(cls) -> tuple[bool, str]:
        if importlib.util.find_spec("thop") is None:
            return False, "ultralytics-thop is not installed (pip install ultralytics-thop)"
        return True, ""

    def start(self, ctx: PassContext) -> None:
        self._rows: list[list[Any]] = []
        self._roots = RootModules(self._count)
        self._roots.start()
        self.notes = self._roots.notes

    def _count(self, name: str, module: Any, args: tuple) -> None:
        import thop
        import torch

        with contextlib.redirect_stdout(io.StringIO()), torch.no_grad():  # thop prints
            macs, params, layers = thop.profile(counting_copy(module), inputs=args,
                                                verbose=False, ret_layer_info=True)
        self._rows += [row("module", name, "macs", macs, unit="MAC"),
                       row("module", name, "flops", 2 * macs, unit="FLOP"),
                       row("module", name, "params", params, unit="count")]
        self._rows += _layer_rows(name, layers)

    def stop(self, ctx: PassContext) -> None:
        self._roots.stop()

    def collect(self, ctx: PassContext) -> Collected:
        return Collected(self._rows)
