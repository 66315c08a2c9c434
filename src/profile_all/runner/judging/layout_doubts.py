"""What the run's layout means for its figures, said in the run's doubts: passes that ran
a window of the script's steps (in a process of their own, or inside the timing pass's),
passes that counted on the meta device."""

from __future__ import annotations

import statistics

from profile_all.pass_record import PassRecord
from profile_all.runner.inside.windows import GAP_STEPS
from profile_all.runner.planning.setup import WINDOW_FEWEST, WINDOW_STEPS, WINDOWS_AFTER


def on_meta(passes: list[PassRecord]) -> list[str]:
    """One sentence on the passes that counted on the meta device (--count-on meta)."""
    counted = [p for p in passes if p.ran_on == "meta"]
    if not counted:
        return []
    numbers = ", ".join(f"{p.number} ({'+'.join(p.backends)})" for p in counted)
    return [f"pass{'es' if len(counted) > 1 else ''} {numbers} counted on the meta device "
            "(--count-on meta): nothing was computed, and operators dispatch as on no real "
            "device, so per-operator names and attention's FLOPs can differ from a run on "
            "the device (nn.MultiheadAttention: the math path's bmm, not the fused kernel)"]


def _steps_held(window: PassRecord) -> str:
    """`steps 6-11`, `step 6`, or a window cut short before a step of it ended (a
    timeout: it read `steps 6-5`)."""
    first, count = window.window_from or 0, window.steps or 0
    if count <= 0:
        return f"from step {first}, stopped before a step of it ended"
    return f"step {first}" if count == 1 else f"steps {first}-{first + count - 1}"


def _hosted(passes: list[PassRecord]) -> list[str]:
    """One sentence on the passes that ran in windows of steps inside another's process:
    which steps each held, and what the host's figures hold of them."""
    hosted = [p for p in passes if p.host is not None]
    if not hosted:
        return []
    held = ", ".join(f"{p.number} ({'+'.join(p.backends)}) {_steps_held(p)}" for p in hosted)
    host = hosted[0].host
    return [f"the script ran once: pass{'es' if len(hosted) > 1 else ''} {held} ran in "
            f"windows of steps inside pass {host}'s process; their totals (functions, "
            f"operators, FLOPs, memory) cover those steps, per-step and per-call figures "
            f"compare; pass {host}'s run time holds the windows, its per-step and region "
            "figures leave them out"]


def windows(passes: list[PassRecord]) -> list[str]:
    """One sentence on the passes that ran a window of the target's steps: their totals
    cover those steps only (per-step figures and per-call figures still compare)."""
    windowed = [p for p in passes if p.window and p.host is None]
    if not windowed:
        return _hosted(passes)
    whole = max((p.steps or 0 for p in passes if not p.window), default=0)
    numbers = ", ".join(str(p.number) for p in windowed)
    steps = sorted({p.window for p in windowed})
    of_whole = f" of the {whole} the timing pass ran" if whole else ""
    return [f"pass{'es' if len(windowed) > 1 else ''} {numbers} ended the target after "
            f"{', '.join(map(str, steps))} steps{of_whole} (a window; --pass-steps all runs "
            "them whole): their totals (functions, operators, FLOPs, memory) cover those "
            "steps; per-step and per-call figures compare", *_hosted(passes)]


def unusual_in_windows(passes: list[PassRecord], step_times: dict[int, list[float]],
                       unusual: float) -> list[str]:
    """A sentence a window that held a step over `unusual` x its median step (an evaluation
    inside the loop): the host's clean steps leave windows out, so that step is in no
    unusual-step finding, and it is in the window's totals."""
    found = []
    for summary in passes:
        times = step_times.get(summary.number, [])
        if summary.host is None or not summary.window_from or len(times) < 3:
            continue
        median = statistics.median(times)
        # the window's kept steps: not its first, nor those that held a compilation
        numbers = [n for n in range(2, (summary.steps or 0) + 1)
                   if n not in summary.compile_steps]
        odd = [(number if len(numbers) == len(times) else None, time)
               for number, time in zip(numbers or [None] * len(times), times, strict=False)
               if time > unusual * median]
        if odd:
            listing = ", ".join(
                (f"step {summary.window_from + number - 1} " if number else "a step ")
                + f"took {time / median:.1f}x" for number, time in odd)
            found.append(
                f"pass {summary.number} ({'+'.join(summary.backends)}) held a step unlike "
                f"the others of its window: {listing} its median step; different work (an "
                "evaluation inside the loop), or a pause of the machine, is in its totals")
    return found


def again(numbers: list[int], passes: list[PassRecord]) -> list[str]:
    """The passes planned in windows of the timing pass's steps that ran the script again,
    each in a process of its own (its side effects, a checkpoint or a plot, again), and why:
    the script's steps left no room for their windows."""
    if not numbers:
        return []
    steps = next((p.steps for p in passes if p.timing and p.steps is not None), 0)
    which = ", ".join(str(number) for number in numbers)
    plural = len(numbers) > 1
    return [f"pass{'es' if plural else ''} {which} ran the script again, "
            f"{'each ' if plural else ''}in a process of {'their' if plural else 'its'} "
            f"own: the {steps} step"
            f"{'' if steps == 1 else 's'} the script has left no room for "
            f"{'their windows' if plural else 'its window'} in the clean timing pass's "
            f"process ({WINDOWS_AFTER} clean steps, then a window of {WINDOW_STEPS} steps a "
            f"pass ({WINDOW_FEWEST} where steps are long, or --pass-steps), {GAP_STEPS} "
            "clean steps between)"]
