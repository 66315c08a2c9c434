"""What a backend said of its measurement (notes, losses, a tracer that recorded nothing),
as a pass's failures: the same for a pass, a window of steps and what is collected
after a pass's process ended."""

from __future__ import annotations

from typing import Any


def said_by(backend: Any, collected: Any) -> list[dict[str, str]]:
    """A backend's notes (once each) and losses, and a tracer that recorded nothing beyond
    the run's totals, as the pass's failures."""
    said = [{"backend": backend.name, "phase": "note", "error": note}
            for note in dict.fromkeys(backend.notes)]
    said += [{"backend": backend.name, "phase": "lost", "error": loss}
             for loss in backend.losses]
    if backend.kind == "tracer" and not backend.losses and all(
            r[0] == "run" for r in collected.rows):
        said.append({"backend": backend.name, "phase": "collect",
                     "error": "recorded nothing beyond the run's totals (no function, "
                              "operator, kernel or region): does the target run any of it?"})
    return said
