"""The views of a sampling profiler's rows (Facts.sampled), and of the two kinds of
function profile side by side.

A sampled time is a count of samples times the mean interval between them (py-spy
samples at random intervals, against aliasing: a count is a Poisson count), so its 95%
error is about 1.96 x sqrt(count) samples; a share's is the Wilson score interval's. A
traced time (cProfile: every call and return) is measured, but the tracing slows each
call, so functions that call most look heavier than they are. Where both ran,
`traced_vs_sampled` puts each function's share of the run side by side, by cumulative
time: a function's self time is not comparable (cProfile counts a C function's time as
that built-in's own, a sample as its Python caller's).
"""

from __future__ import annotations

import math

import pandas as pd

from profile_all.rows import Facts

#: the 95% normal quantile
Z95 = 1.96
#: fewer samples than this give shares too rough (±10 points at 50%) to compare
MIN_SAMPLES = 100
SAMPLED_COLUMNS = ["name", "process", "samples", "self_samples", "self_time", "self_error",
                   "cumulative_time", "share", "share_error"]
THREAD_COLUMNS = ["thread", "samples", "active_time", "sampled_time", "idle_time"]
SIDE_BY_SIDE_COLUMNS = ["name", "traced_share", "sampled_share", "difference",
                        "sampled_share_error", "traced_time", "sampled_time", "samples",
                        "traced_by", "sampled_by"]


def share_error(share: pd.Series, samples: float | pd.Series) -> pd.Series:
    """The 95% error of a share of `samples`: the wider side of its Wilson score interval
    (which, unlike the normal approximation, is not zero at a share of 0 or 1)."""
    spread = Z95 ** 2 / samples
    centre = (share + spread / 2) / (1 + spread)
    half = Z95 * (share * (1 - share) / samples + spread / (4 * samples)).pow(0.5) \
        / (1 + spread)
    return pd.concat([(share - (centre - half)).abs(), (centre + half - share).abs()],
                     axis=1).max(axis=1)


def sampled_backends(facts: dict[str, Facts]) -> list[str]:
    return [name for name, said in facts.items() if said.sampled]


def function_backends(frame: pd.DataFrame, facts: dict[str, Facts]) -> list[str]:
    """The backends whose function rows say where a run's time goes, one view only: a
    sampler's where it took MIN_SAMPLES or more (it did not slow what it saw), else the
    tracers' (two views side by side said two different things first)."""
    functions = frame[frame["scope"] == "function"]
    present = list(dict.fromkeys(functions["backend"]))
    samplers = [name for name in present if name in sampled_backends(facts)]
    taken = frame[frame["backend"].isin(samplers[:1]) & (frame["scope"] == "run")
                  & (frame["metric"] == "samples")]["value"].sum()
    if samplers and taken >= MIN_SAMPLES:
        return samplers[:1]
    return [name for name in present if name not in samplers] or samplers[:1]


def _interval(frame: pd.DataFrame, backend: str) -> float:
    said = frame[(frame["backend"] == backend) & (frame["scope"] == "run")
                 & (frame["metric"] == "sample_interval")]["value"]
    return float(said.median()) if len(said) else math.nan


def sampled_functions(frame: pd.DataFrame, facts: dict[str, Facts]) -> pd.DataFrame:
    """A row per function and process a sampling backend saw (the first of them), most
    self time first: its samples, its time estimated from them with a 95% error, and its
    share of the samples of its process, all its threads' (cumulative)."""
    backends = sampled_backends(facts)
    rows = frame[(frame["scope"] == "function") & frame["backend"].isin(backends[:1])]
    if rows.empty:
        return pd.DataFrame(columns=SAMPLED_COLUMNS)
    table = rows.pivot_table(index=["name", "parent"], columns="metric", values="value",
                             aggfunc="sum", sort=False).reset_index()
    table.columns.name = None
    table = table.rename(columns={"parent": "process"}).reindex(columns=SAMPLED_COLUMNS)
    interval = _interval(frame, backends[0])
    table["self_error"] = Z95 * table["self_samples"].pow(0.5) * interval
    totals = table.groupby("process")["samples"].transform("max").combine(
        table["process"].map(_process_samples(frame, backends[0])).fillna(0), max)
    table["share"] = table["samples"] / totals
    table["share_error"] = share_error(table["share"], totals)
    return table.sort_values(["self_time", "self_samples"], ascending=False,
                             ignore_index=True)


def _process_samples(frame: pd.DataFrame, backend: str) -> dict[str, float]:
    """Each process's samples, over all its threads (thread rows `process PID NAME`, the
    sampled process's without a prefix): a share is of them, not of one thread's root (a
    DataLoader's feeder thread, sampled beside the main one, made shares over 100%)."""
    threads = frame[(frame["backend"] == backend) & (frame["scope"] == "thread")
                    & (frame["metric"] == "samples")]
    totals: dict[str, float] = {}
    for label, samples in zip(threads["name"], threads["value"], strict=True):
        words = str(label).split(" ")
        process = " ".join(words[:2]) if words[0] == "process" and len(words) > 2 else ""
        totals[process] = totals.get(process, 0.0) + float(samples)
    return totals


def traced_vs_sampled(frame: pd.DataFrame, facts: dict[str, Facts]) -> pd.DataFrame:
    """A row per function both a tracer and a sampler saw in the target's process: each
    one's share of the run (the function's cumulative time over the largest, the root's),
    the difference in points, the sampled share's 95% error; the differences that most
    pass that error first. Empty where the sampler took fewer than MIN_SAMPLES."""
    sampled = sampled_backends(facts)
    functions = frame[(frame["scope"] == "function") & (frame["metric"] == "cumulative_time")
                      & (frame["parent"] == "")]
    tracers = [name for name in dict.fromkeys(functions["backend"]) if name not in sampled]
    samplers = [name for name in dict.fromkeys(functions["backend"]) if name in sampled]
    if not tracers or not samplers:
        return pd.DataFrame(columns=SIDE_BY_SIDE_COLUMNS)
    traced = _cumulative(functions, tracers[0])
    sampled_time = _cumulative(functions, samplers[0])
    counts = frame[(frame["backend"] == samplers[0]) & (frame["scope"] == "function")
                   & (frame["metric"] == "samples") & (frame["parent"] == "")]
    counts = counts.groupby("name")["value"].sum()
    if counts.max() < MIN_SAMPLES:  # shares too rough to set beside measured ones
        return pd.DataFrame(columns=SIDE_BY_SIDE_COLUMNS)
    table = pd.DataFrame({"traced_time": traced, "sampled_time": sampled_time}).dropna()
    table["samples"] = counts.reindex(table.index)
    table["traced_share"] = table["traced_time"] / traced.max()
    table["sampled_share"] = table["sampled_time"] / sampled_time.max()
    table["difference"] = table["traced_share"] - table["sampled_share"]
    total = counts.max()
    table["sampled_share_error"] = share_error(table["sampled_share"], total)
    table["traced_by"], table["sampled_by"] = tracers[0], samplers[0]
    table = table.reset_index(names="name")
    # the differences beyond the sampling error first
    beyond = table["difference"].abs() - table["sampled_share_error"]
    order = beyond.sort_values(ascending=False, kind="stable").index
    return table.loc[order, SIDE_BY_SIDE_COLUMNS].reset_index(drop=True)


def _cumulative(functions: pd.DataFrame, backend: str) -> pd.Series:
    """A backend's cumulative time per function, summed over its passes and ranks."""
    return functions[functions["backend"] == backend].groupby("name")["value"].sum()


def threads(frame: pd.DataFrame, facts: dict[str, Facts]) -> pd.DataFrame:
    """A row per thread (and child process's thread) a sampling backend saw: its samples,
    its time on the CPU (`active_time`, where only running threads were sampled; else
    `sampled_time`, the time its samples stand for) and, for the target's thread, its
    time off the CPU."""
    rows = frame[(frame["scope"] == "thread") & frame["backend"].isin(sampled_backends(facts))]
    if rows.empty:
        return pd.DataFrame(columns=THREAD_COLUMNS)
    table = rows.pivot_table(index="name", columns="metric", values="value", aggfunc="sum",
                             sort=False).reset_index().rename(columns={"name": "thread"})
    table.columns.name = None
    return table.reindex(columns=THREAD_COLUMNS) \
        .sort_values("samples", ascending=False, ignore_index=True)
