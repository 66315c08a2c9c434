"""A torch dispatch mode that imports no Dynamo the user's process would not (FlopCounterMode's
wrapper imports it at the first operator: 1 s on a small machine)."""

from __future__ import annotations

import sys
from typing import Any

#: where torch._disable_dynamo keeps the disabled function it made
_DISABLED = "__dynamo_disable"


def dynamo_disabled_when_imported(mode_class: Any) -> None:
    """torch wraps a dispatch mode's `__torch_dispatch__` in `torch._disable_dynamo`, which
    imports torch._dynamo at the first operator the mode sees (1 s on a small machine), so
    that Dynamo never traces the mode. Dynamo not imported traces nothing: until it is
    (imported whole), the wrapper is handed the plain function; then torch's wrapper makes
    its own disabled function, as it would have. A pass whose model does not compile then
    imports no Dynamo the user's process would not. Where torch wraps otherwise (another
    version), nothing is changed."""
    wrapper = mode_class.__dict__.get("__torch_dispatch__")
    plain = getattr(wrapper, "__wrapped__", None)
    if plain is None or getattr(plain, _DISABLED, None) is not None:
        return

    def until_dynamo(*args: Any, **kwargs: Any) -> Any:
        dynamo = sys.modules.get("torch._dynamo")
        if dynamo is None or getattr(dynamo.__spec__, "_initializing", False):
            return plain(*args, **kwargs)
        plain.__dict__.pop(_DISABLED, None)  # torch's wrapper makes and keeps the real one
        return wrapper(*args, **kwargs)

    setattr(plain, _DISABLED, until_dynamo)
