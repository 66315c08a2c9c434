"""What the backends of a pass (or of a window of its steps) give once its target ended:
their rows, samples, timeline and native files under the pass's number and rank, what they
left for `collect_after`, and what they said of their measurement (notes, losses, a tracer
that recorded nothing) as the pass's failures."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from profile_all import depth_cap


@dataclass
class Gathered:
    rows: list[list[Any]] = field(default_factory=list)
    samples: list[list[Any]] = field(default_factory=list)
    timeline: list[list[Any]] = field(default_factory=list)
    artifacts: list[dict[str, str]] = field(default_factory=list)
    later: list[dict[str, Any]] = field(default_factory=list)
    failures: list[dict[str, str]] = field(default_factory=list)


def gather(started: Sequence[Any], ctx: Any,
           saying: Callable[[str], None] = lambda text: None) -> Gathered:
    """Each started backend collected (`saying` what is being done), in order; one that
    fails to is said, and the others are kept."""
    prefix = (ctx.pass_index, ctx.rank)
    gathered = Gathered()
    for backend in started:
        saying(f"collecting {backend.name}'s rows")
        try:
            collected = backend.collect(ctx)
        except Exception as error:
            gathered.failures.append({"backend": backend.name, "phase": "collect",
                                      "error": f"{type(error).__name__}: {error}"})
            continue
        gathered.rows += [[backend.name, *prefix, *measured] for measured in collected.rows]
        gathered.samples += [[backend.name, *prefix, *kept] for kept in collected.samples]
        gathered.timeline += [[backend.name, *prefix, *entry] for entry in collected.timeline]
        gathered.artifacts += [artifact.to_dict() for artifact in collected.artifacts]
        if collected.later is None:
            gathered.failures += said_by(backend, collected)
        else:  # said once the rest is collected
            gathered.later.append({"backend": backend.name, "later": collected.later})
    hearing = [b.name for b in started if b.region_times or callable(getattr(b, "enter", None))]
    if hearing and (deep := ctx.too_deep()):
        gathered.failures.append({"backend": "+".join(hearing), "phase": "note",
                                  "error": depth_cap.said_of_regions(deep)})
    return gathered


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
