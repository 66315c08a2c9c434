"""thop (counter): MACs and parameters of each root module and of its layers, by
ultralytics-thop, counted once per root module on its first call (forward only)."""

from __future__ import annotations

import contextlib
import io
from typing import Any

from profile_all.backends.roots import RootCounter
from profile_all.rows import Facts, row


def _layer_rows(prefix: str, layers: dict[str, Any], named: set[str]) -> list[list[Any]]:
    """A module's rows under its path in `named`; thop lists a module reached by several
    paths under each (with all its calls), named_modules() by the first one only."""
    rows = []
    for name, (macs, params, children) in layers.items():
        path = f"{prefix}.{name}"
        if path in named:
            rows += [row("module", path, "macs", macs, unit="MAC"),
                     row("module", path, "flops", 2 * macs, unit="FLOP"),
                     row("module", path, "params", params, unit="count")]
        rows += _layer_rows(path, children, named)
    return rows


class Thop(RootCounter):
    name = "thop"
    facts = Facts(counts_flops=True, forward_only=True, unplaced_at_root=True)
    measures = "MACs and parameters per root module and per layer (forward)"
    requires = (("thop", "ultralytics-thop"),)
    counts_on_meta = True

    def count(self, name: str, copy: Any, args: tuple) -> list[list[Any]]:
        import thop
        import torch

        with contextlib.redirect_stdout(io.StringIO()), torch.no_grad():  # thop prints
            macs, params, layers = thop.profile(copy, inputs=args,
                                                verbose=False, ret_layer_info=True)
        return [row("module", name, "macs", macs, unit="MAC"),
                row("module", name, "flops", 2 * macs, unit="FLOP"),
                row("module", name, "params", params, unit="count"),
                *_layer_rows(name, layers, {f"{name}.{path}" for path, _ in copy.named_modules()})]
