"""Steps unlike the others: warm-up (the first steps, slower), and a step that did other work
(an evaluation inside the loop) or paused, said with what ran in it."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import pandas as pd

from profile_all import units as fmt
from profile_all.report import start_up as start_up_view
from profile_all.report import step_work
from profile_all.report.findings.finding import Finding, step_samples, timer

if TYPE_CHECKING:
    from profile_all.report.run_data import RunData

#: leading steps slower than this many times the steady median are warm-up
WARM_UP_FACTOR = 2.0
#: an unusual step's excess over the median step, as a share of all step time, worth a
#: word: where it did other work (an evaluation), and where it did the same (a pause)
OTHER_WORK_WORTH = 0.01
PAUSE_WORTH = 0.05


def _warm_up(report: RunData, timer_name: str) -> tuple[pd.Series, pd.Series, int]:
    """(the steps' times, their numbers, how many lead slower than WARM_UP_FACTOR x the
    steady ones doing the same work): the per-step times leave step 1 out (it holds the
    script's setup), so the first is step 2 where the numbers are not known."""
    steps = step_samples(report, timer_name)
    table = step_work.step_work(report, timer_name)
    aligned = len(table) == len(steps)
    other_work = step_work.different_work(table).to_numpy() if aligned \
        else [False] * len(steps)
    numbers = table["step"] if aligned else pd.Series(range(2, len(steps) + 2))
    if len(steps) < 6:
        return steps, numbers, 0
    steady = float(steps.iloc[len(steps) // 2:].median())
    slow = 0
    while slow < len(steps) // 2 and steps.iloc[slow] > WARM_UP_FACTOR * steady \
            and not other_work[slow]:
        slow += 1
    return steps, numbers, slow


def warm_up(report: RunData) -> list[Finding]:
    """The first steps much slower than the steady ones (compilation, autotuning, caches);
    a step that did different work (an evaluation at the first iteration) is not warm-up:
    `unusual_steps` says what it did."""
    clock = timer(report)
    if not clock:
        return []
    steps, numbers, slow = _warm_up(report, clock[0])
    if not slow:
        return []
    steady = float(steps.iloc[len(steps) // 2:].median())
    excess = float(steps.iloc[:slow].sum() - slow * steady)
    share = excess / float(steps.sum())
    if share < 0.05:
        return []
    first = f"step {numbers.iloc[0]}" if slow == 1 else \
        f"steps {numbers.iloc[0]}-{numbers.iloc[slow - 1]}"
    return [Finding(
        "warm-up", f"warm-up: {first} took {fmt.seconds(float(steps.iloc[:slow].sum()))}, "
        f"{steps.iloc[0] / steady:.0f}x a steady step ({fmt.seconds(steady)}; step 1, the "
        "script's setup, apart)",
        weight=share * 0.5, share=share, amount=excess, unit="s",
        evidence=f"{clock[0]} step times: {fmt.share(share)} of all step time is the "
                 "warm-up's excess",
        suggestion="expected with torch.compile, cudnn.benchmark and lazy init: per-step "
                   "medians leave it out; profile more steps, or mark steps after it")]


def _what_ran(step: pd.Series, table: pd.DataFrame) -> str:
    """What an unusual step did, from the counts kept of each step."""
    if pd.isna(step["flops_x_median"]):
        return ("what ran in it was not counted (-b flop-counter counts each step's work; "
                "pa.region names a part of it)")
    if not step["different_work"]:
        return ("the same FLOPs as a median step: a pause (data, I/O, the garbage "
                "collector, another process), not more work")
    said = f"it did {step['flops_x_median']:.1f}x the FLOPs of a median step"
    without_grad = int(step["model_calls_without_grad"])
    if without_grad > table["model_calls_without_grad"].median():
        said += (f", {without_grad} of its {int(step['model_calls'])} model calls without "
                 "gradients (an evaluation inside the loop?)")
    return said + ": different work, not noise"


def unusual_steps(report: RunData) -> list[Finding]:
    """Steps far slower than the median step, each with what ran in it (step_work)."""
    clock = timer(report)
    if not clock:
        return []
    table = step_work.step_work(report, clock[0])
    _steps, numbers, slow = _warm_up(report, clock[0])
    odd = step_work.unusual(table)
    odd = odd[~odd["step"].isin(numbers.iloc[:slow])]  # the warm-up's, said there
    odd = odd.sort_values("time", ascending=False)
    median, total = float(table["time"].median()), float(table["time"].sum())
    found = []
    for _, step in odd.head(3).iterrows():
        excess = float(step["time"]) - median
        share = excess / total if total > 0 else math.nan
        if not share >= (OTHER_WORK_WORTH if step["different_work"] else PAUSE_WORTH):
            continue  # a jitter of a few hundred µs in 300 steps: not worth a word
        found.append(Finding(
            "unusual-step", f"step {int(step['step'])} took {fmt.seconds(float(step['time']))}, "
            f"{step['x_median']:.1f}x the median step ({fmt.seconds(median)}): "
            f"{_what_ran(step, table)}",
            weight=share * 0.5, share=share, amount=excess, unit="s",
            evidence=f"{clock[0]} step times of the timing pass; each step's FLOPs and "
                     "model calls where counted",
            suggestion="mark it with pa.region (\"eval\") to time it apart from the steps "
                       "like the others (their median leaves it out, their mean does not)"
                       if step["different_work"] else ""))
    return found


#: importing this share of the run or more is said apart
IMPORTS_WORTH_SAYING = 0.2


def start_up(report: RunData) -> list[Finding]:
    """Importing, said apart from where the steps' time goes (the function findings leave
    the import machinery out), as a share of the run the same profile saw."""
    functions = report.scoped("function")
    seconds, run, backend = start_up_view.import_time(functions[functions["parent"] == ""])
    if not seconds or not run > 0:
        return []
    share = min(1.0, seconds / run)
    if share < IMPORTS_WORTH_SAYING:
        return []
    return [Finding(
        "start-up", f"start-up: importing took {fmt.seconds(seconds)} under {backend}, "
        f"{fmt.share(share)} of the {fmt.seconds(run)} it profiled (left out of where the "
        "steps' time goes)", weight=share * 0.2, share=share,
        amount=seconds, unit="s",
        evidence=f"{backend} functions: the import machinery's (_find_and_load) cumulative "
                 f"time of the {fmt.seconds(run)} it profiled",
        suggestion="import what the run uses (a package's submodule, not the package); "
                   "a long job pays it once")]
