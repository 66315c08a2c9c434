"""torch.compile: how long it compiled and in which steps, each recompile and each graph
break with its reason and the user's line, and what to try for each."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from profile_all import units as fmt
from profile_all.report import compilation
from profile_all.report.findings.finding import Finding

if TYPE_CHECKING:
    from profile_all.report.run_data import RunData

_WARM_START = ("keep Inductor's caches for warm starts (on by default in "
               "/tmp/torchinductor_$USER; TORCHINDUCTOR_CACHE_DIR on a disk that persists), "
               "or carry them to a fresh machine with torch.compiler.save_cache_artifacts() "
               "and load_cache_artifacts()")
_DYNAMIC = ("mark the dimension that changes as dynamic before the first call "
            "(torch._dynamo.mark_dynamic(x, 0)), or torch.compile(..., dynamic=True): one "
            "graph for every size instead of a compile per size")
#: what to try by the guard that failed (its reason's first line), the first that matches;
#: none matched: no advice (a grad-mode change got shape advice)
_BY_GUARD = (
    (re.compile(r"size mismatch|stride mismatch|dimensionality|dim mismatch|ndim"), _DYNAMIC),
    (re.compile(r"grad_mode|GLOBAL_STATE"),
     "the grad mode changed (an evaluation under no_grad, then training): one graph a "
     "mode, compiled once each; expected, and no more after both ran; compile the "
     "evaluation as a function of its own to keep it apart"),
    (re.compile(r"\.training\b"),
     "the module switched between train() and eval(): one graph a mode, compiled once "
     "each; expected, and no more after both ran"),
    (re.compile(r"dtype mismatch|dtype"),
     "an input's dtype changed: cast inputs to one dtype before the compiled call"),
    (re.compile(r"requires_grad"),
     "an input's requires_grad changed: make inputs alike (detach() what needs no grad)"),
    (re.compile(r"device mismatch|device"),
     "an input's device changed: move inputs to the model's device before the call"),
    (re.compile(r"cache_size_limit|recompile_limit"),
     "the frame hit the recompile limit and runs eagerly from then on: find what changes "
     "between calls (TORCH_LOGS=recompiles) and keep it fixed, or mark it dynamic"),
)


def _try_for(reason: str) -> str:
    return next((said for guard, said in _BY_GUARD if guard.search(reason)),
                "TORCH_LOGS=recompiles shows each guard that failed and why")


_FULLGRAPH = ("torch.compile(..., fullgraph=True) raises at each break, so each can be found "
              "and removed; torch._dynamo.explain(fn)(*args) lists them all")


def _steps(numbers: list[int]) -> str:
    shown = ", ".join(map(str, numbers[:8])) + (", ..." if len(numbers) > 8 else "")
    return f"step{'s' if len(numbers) > 1 else ''} {shown}"


def compile_time(report: RunData) -> list[Finding]:
    """The time compiling, as a share of the pass's run, and the steps it fell in."""
    chosen = compilation.compiled_pass(report.meta)
    seconds = compilation.total_seconds(report.meta)
    if chosen is None or not seconds:
        return []
    run = chosen.target_wall_time or 0.0
    share = seconds / run if run else float("nan")
    steps = compilation.compile_steps(report.meta)
    held = (f"; it fell in {_steps(steps)}, left out of per-step statistics" if steps else "")
    graphs = chosen.compilation.get("graphs", 0)
    return [Finding(
        "compile", f"torch.compile compiled for {fmt.seconds(seconds)} "
        f"({fmt.share(share)} of the run), {fmt.count(graphs)} graph"
        f"{'s' if graphs != 1 else ''}{held}", weight=share if run else 0.1, share=share,
        amount=seconds, unit="s",
        evidence=f"pass {chosen.number}: torch's compile records (Dynamo and its backend)",
        suggestion=_WARM_START)]


def recompiles_and_breaks(report: RunData) -> list[Finding]:
    """Each recompile (the guard that failed, where) and each graph break (why, where)."""
    events = report.compilation()
    if events.empty:
        return []
    cwd = report.meta.cwd
    out = []
    for event in events.to_dict("records"):
        where = fmt.code_path(event['where'], cwd)
        reason = event['reason'].splitlines()[0] if event['reason'] else ""
        if event["event"] == "recompile":
            out.append(Finding(
                "compile", f"recompiled {where}: {reason}", weight=0.3, amount=event['seconds'],
                unit="s", evidence=f"pass {event['pass']}: torch's compile records, "
                f"{fmt.seconds(event['seconds'])} to recompile", suggestion=_try_for(reason)))
        elif event['event'] == "graph break":
            out.append(Finding(
                "compile", f"graph break at {where}: {reason}", weight=0.25,
                amount=event['count'], unit="graphs", evidence=f"pass {event['pass']}: torch's "
                f"graph break records ({fmt.count(event['count'])} graph"
                f"{'s' if event['count'] != 1 else ''} broken there)", suggestion=_FULLGRAPH))
    return out
