"""Where `pa.step()` goes while no profile-all pass listens."""

from __future__ import annotations

from collections.abc import Callable


class OutsideAPass:
    """Outside a pass, steps go to on_demand.py: a script's first `step()` makes it listen
    for the torch.profiler windows `profile-all attach` may ask of it, and each marks a
    step of a window that is open. A pass's listeners replace this before its target
    runs."""

    def __init__(self) -> None:
        self._stepped: Callable[[], None] | None = None

    def step(self) -> None:
        if self._stepped is None:
            from profile_all import on_demand

            self._stepped = on_demand.stepped
        self._stepped()
