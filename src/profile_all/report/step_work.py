"""Each step of the clean timing pass beside the work the exact FLOP counter saw in it
(HTA-style: an analysis returns a DataFrame), so that a step unlike the others is said
with what ran in it: an evaluation inside the loop (more FLOPs, model calls without
gradients) is one step of different work, not noise and not warm-up.

The timer keeps every step's time but the first (the script's setup) and those that held
a torch.compile compilation (the pass's `compile_steps`) or overlapped another pass's
window of steps (`window_steps`); the counter keeps every step's FLOPs and outermost model
calls, in its own pass, which ran the same steps (the run checks say when passes did
different work), or in a window of the timing pass's steps (from its `window_from`). Steps
are matched by number; where the timer's steps cannot be numbered (thinned past
MAX_SAMPLES) they are not matched.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

if TYPE_CHECKING:
    from profile_all.report.run_data import RunData

COLUMNS = ["step", "time", "flops", "model_calls", "model_calls_without_grad"]
#: a step more than this many times the median step is unusual
UNUSUAL = 2.0
#: a step whose FLOPs are within this of the median step's did the same work
SAME_WORK = 0.2


def _timed(report: RunData, timer: str) -> pd.Series:
    """The timing pass's step times by step number (first rank); empty where unknown."""
    timing = [p for p in report.meta.passes if p.timing and p.steps]
    samples = report.samples
    if not timing:
        return _no_steps()
    record = timing[0]
    steps = samples[(samples["backend"] == timer) & (samples["scope"] == "step")
                    & (samples["metric"] == "wall_time") & (samples["pass"] == record.number)]
    steps = steps[steps["rank"] == steps["rank"].min()]["value"].to_numpy(float)
    left_out = {*record.compile_steps, *record.window_steps}
    numbers = [n for n in range(2, record.steps + 1) if n not in left_out]
    if len(numbers) != len(steps):
        return _no_steps()
    return pd.Series(steps, index=pd.Index(numbers, name="step"))


def _no_steps() -> pd.Series:
    return pd.Series(dtype="float64", index=pd.Index([], dtype="int64", name="step"))


def _work(report: RunData) -> pd.DataFrame:
    """Each step's FLOPs and model calls, by step number, from the counter that kept them."""
    samples = report.samples
    kept = samples[(samples["scope"] == "step") & samples["metric"].isin(COLUMNS[2:])]
    if kept.empty:
        return pd.DataFrame(columns=COLUMNS[2:])
    number = kept["pass"].min()
    first = kept[(kept["pass"] == number) & (kept["rank"] == kept["rank"].min())]
    columns = {metric: values["value"].to_numpy(float)
               for metric, values in first.groupby("metric", sort=False)}
    if len({len(v) for v in columns.values()}) != 1:
        return pd.DataFrame(columns=COLUMNS[2:])
    size = len(next(iter(columns.values())))
    # a window of steps inside the timing pass's process: its step 1 is the host's Nth
    record = next((p for p in report.meta.passes if p.number == number), None)
    first_step = record.window_from if record is not None and record.window_from else 1
    return pd.DataFrame(columns, index=pd.Index(range(first_step, first_step + size),
                                                name="step"))


def step_work(report: RunData, timer: str) -> pd.DataFrame:
    """A row per timed step: its time (`timer`'s), FLOPs, outermost model calls and those
    made without gradients (NaN where no counter kept them)."""
    times = _timed(report, timer)
    table = pd.DataFrame({"time": times}).join(_work(report), how="left")
    return table.reindex(columns=COLUMNS[1:]).reset_index()[COLUMNS]


def unusual(table: pd.DataFrame) -> pd.DataFrame:
    """The steps over UNUSUAL x the median step, with `x_median` and `flops_x_median`
    (their FLOPs against the median step's; NaN where not counted) and `different_work`."""
    if len(table) < 3:
        return table.iloc[0:0].assign(x_median=[], flops_x_median=[], different_work=[])
    median = float(table["time"].median())
    flops = table["flops"].astype(float)
    median_flops = float(flops.median()) if flops.notna().any() else np.nan
    out = table.assign(
        x_median=table["time"] / median,
        flops_x_median=flops / median_flops if median_flops > 0 else np.nan)
    out["different_work"] = different_work(table)
    return out[out["x_median"] > UNUSUAL]


def different_work(table: pd.DataFrame) -> pd.Series:
    """Steps whose FLOPs are not within SAME_WORK of the median step's, or that made more
    model calls without gradients than it (an evaluation); False where not counted."""
    flops = table["flops"].astype(float)
    median = float(flops.median()) if flops.notna().any() else np.nan
    more_flops = ((flops / median - 1).abs() > SAME_WORK) if median > 0 else \
        pd.Series(False, index=table.index)
    without_grad = table["model_calls_without_grad"].astype(float)
    evaluating = without_grad > float(without_grad.median()) if without_grad.notna().any() \
        else pd.Series(False, index=table.index)
    return (more_flops.fillna(False) | evaluating.fillna(False)).astype(bool)
