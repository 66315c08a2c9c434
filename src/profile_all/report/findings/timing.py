"""Where the time goes, and a slow input."""

from __future__ import annotations

import math
import re
from typing import TYPE_CHECKING

import pandas as pd

from profile_all import units as fmt
from profile_all.report import compilation, sampling, start_up
from profile_all.report.findings.finding import Finding, base_time, few_samples, timer, totals
from profile_all.rows import UNATTRIBUTED, region_path

if TYPE_CHECKING:
    from profile_all.report.run_data import RunData

#: a share of step (or run) time above which data loading makes a training loop input-bound
INPUT_BOUND = 0.2
#: a region holding more than this of its parent is looked into (its children are named)
HOLDS_ALL = 0.8
#: regions, operators and functions below this share of the time are not named
WORTH_NAMING = 0.1

#: user regions that load data, by name; a batch only as what is fetched (`get_batch`,
#: `next_batch`): Lightning's `run_training_batch` trains on one
_DATA_REGION = re.compile(r"(?:^|[_\W])(?:data|load|loader|loading|input|inputs|fetch|"
                          r"prefetch|dataloader|(?:get|next|load|fetch)_?batch(?:es)?)"
                          r"(?:$|[_\W])", re.IGNORECASE)
#: torch.utils.data's own range around each batch, in a torch.profiler trace
_DATALOADER_RANGE = "enumerate(DataLoader)#"
#: the DataLoader iterator's `__next__`, as cProfile names it
_DATALOADER_NEXT = re.compile(r"dataloader\.py:\d+\(__next__\)")


#: the regions of a training step's own work, by name; the rest of a step is outside it
_STEP_WORK = re.compile(r"(?:^|[_\W])(?:forward|fwd|backward|bwd|optim\w*|step)(?:$|[_\W])",
                        re.IGNORECASE)
#: ... but for evaluation's (`validation_step`) and set-up's (`configure_optimizers`)
_NOT_STEP_WORK = re.compile(r"valid|eval|test|predict|configure|sanity", re.IGNORECASE)


def _outside_step_work(report: RunData, backend: str) -> tuple[float, str, str, str] | None:
    """(share of step time outside the forward, backward and optimizer regions, ...) where
    the step's own regions are marked: data loading, logging, host work."""
    base, what = base_time(report, backend)
    regions = totals(report, backend, "region")
    if regions.empty or what != "step time":
        return None
    level = regions[regions["parent"] == ""]
    # one region wraps the steps (train_step, Lightning's run_training_epoch): look inside
    while len(level) and (len(level) == 1 or level["value"].max() >= HOLDS_ALL * base):
        holder = level.loc[level["value"].idxmax()]
        inner = regions[regions["parent"] == region_path(holder["parent"], holder["name"])]
        if inner.empty:
            break
        level = inner
    work = level[level["name"].str.contains(_STEP_WORK)
                 & ~level["name"].str.contains(_NOT_STEP_WORK)]
    if len(work) < 2:
        return None
    outside = base - float(work["value"].sum())
    names = ", ".join(work["name"])
    return (outside / base, what, f"{backend}: {fmt.seconds(outside)} of {fmt.seconds(base)} "
            f"step time outside {names}", "the step outside its forward, backward and "
            "optimizer (loading data, logging, host work)")


_LOADING = "loading data"


def _input_sources(report: RunData) -> list[tuple[float, str, str, str]]:
    """(share of time in loading data, of what time, evidence, what it is) from every
    backend that saw it."""
    found = []
    clock = timer(report)
    outside = _outside_step_work(report, clock[0]) if clock else None
    if outside is not None:
        found.append(outside)
    if clock:
        base, what = base_time(report, clock[0])
        regions = totals(report, clock[0], "region")
        loading = regions[regions["name"].str.contains(_DATA_REGION)
                          & ~regions["parent"].str.contains(_DATA_REGION)]  # outermost only
        if not loading.empty and base > 0:
            names = ", ".join(region_path(p, n) for n, p in zip(loading["name"],
                                                                loading["parent"], strict=True))
            found.append((loading["value"].sum() / base, what,
                          f"{clock[0]} regions {names}: {fmt.seconds(loading['value'].sum())} "
                          f"of {fmt.seconds(base)} {what}", _LOADING))
    frame = report.scoped("region")
    ranges = frame[frame["name"].str.startswith(_DATALOADER_RANGE)
                   & (frame["metric"] == "wall_time") & (frame["stat"] == "total")]
    for backend, rows in ranges.groupby("backend"):
        base, what = base_time(report, backend)
        if base > 0:
            loading = rows["value"].sum()
            found.append((loading / base, what, f"{backend} ranges {_DATALOADER_RANGE}…: "
                          f"{fmt.seconds(loading)} of {fmt.seconds(base)} {what}", _LOADING))
    steps = report.step_time()  # a trace's breakdown: the DataLoader's ranges or operators
    if not steps.empty and steps["step_time"].sum() > 0 and steps["data_loader"].sum() > 0:
        found.append((steps["data_loader"].sum() / steps["step_time"].sum(), "steps' time",
                      f"step time breakdown: data loader {fmt.seconds(steps['data_loader'].sum())}"
                      f" of {fmt.seconds(steps['step_time'].sum())} of steps", _LOADING))
    functions = report.functions()
    if not functions.empty:
        nexts = functions[functions["name"].str.contains(_DATALOADER_NEXT)]
        profiled = functions["self_time"].sum()
        if not nexts.empty and profiled > 0:
            loading = nexts["cumulative_time"].max()
            found.append((loading / profiled, "profiled time",
                          f"functions: DataLoader __next__ {fmt.seconds(loading)} cumulative "
                          f"of {fmt.seconds(profiled)} profiled", _LOADING))
    return found


#: names only a DataLoader with workers (num_workers > 0) runs in the main process: its
#: iterator's class in torch.profiler's range, the queue read in cProfile's functions
_WITH_WORKERS = re.compile(r"_MultiProcessingDataLoaderIter|dataloader\.py:\d+\(_try_get_data\)")
#: any sign of a torch DataLoader: its iterator's range, its functions, its frames
_ANY_DATALOADER = re.compile(r"DataLoader|dataloader\.py")
#: and only one without: the samples are fetched in the main process
_WITHOUT_WORKERS = re.compile(r"_SingleProcessDataLoaderIter|fetch\.py:\d+\(fetch\)")


def _input_suggestion(report: RunData) -> str:
    """What to try, by whether the DataLoader already had workers (when the names say)."""
    names = pd.Series(report.frame["name"].unique(), dtype=str)
    if names.str.contains(_WITH_WORKERS).any():
        return ("the DataLoader's workers do not keep up: more of them (num_workers), less "
                "work per sample in them (decode and augment on the device, cache what is "
                "preprocessed), pin_memory=True, persistent_workers=True, prefetch_factor=2+")
    if names.str.contains(_WITHOUT_WORKERS).any():
        return ("the DataLoader loads in the main process (num_workers=0): DataLoader("
                "num_workers=N, pin_memory=True, persistent_workers=True, prefetch_factor=2+)")
    if not names.str.contains(_ANY_DATALOADER).any():
        return ("no DataLoader was seen: the batches are made in the main process, in the "
                "step; make them on the device, or ahead of the step (a thread, or a "
                "DataLoader with workers); the functions and operators inside say what takes "
                "the time")
    return ("DataLoader(num_workers=N, pin_memory=True, persistent_workers=True, "
            "prefetch_factor=2+); decode and augment in the workers or on the device; "
            "cache what is preprocessed")


def input_bound(report: RunData) -> list[Finding]:
    sources = _input_sources(report)
    if not sources:
        return []
    share, what, _, label = max(sources)
    if share < INPUT_BOUND:
        return []
    return [Finding(
        "input", f"input-bound: {label} takes {fmt.share(share)} of the {what}",
        weight=0.5 + share / 2, share=share,
        evidence="; ".join(text for _, _, text, _ in sources),
        suggestion=_input_suggestion(report))]


def _where_in_regions(report: RunData, backend: str) -> list[Finding]:
    regions = totals(report, backend, "region")
    base, what = base_time(report, backend, regions["value"].max() if len(regions) else 0.0)
    if regions.empty or not base > 0:
        return []
    parent, level = "", regions[regions["parent"] == ""]
    while len(level) and level["value"].max() >= HOLDS_ALL * base:
        holder = level.loc[level["value"].idxmax()]
        inner = regions[regions["parent"] == region_path(holder["parent"], holder["name"])]
        if inner.empty:
            break
        parent, level = region_path(holder["parent"], holder["name"]), inner
    out = []
    for _, region in level.sort_values("value", ascending=False).head(3).iterrows():
        share = region["value"] / base
        if share < WORTH_NAMING or (share >= INPUT_BOUND and _DATA_REGION.search(region["name"])):
            continue  # loading data that takes this much is the input finding's
        path = region_path(region["parent"], region["name"])
        inner = regions[regions["parent"] == path].sort_values("value", ascending=False)
        inside = "" if inner.empty else (f"; inside, {inner['name'].iloc[0]} "
                                         f"{fmt.share(inner['value'].iloc[0] / region['value'])}")
        out.append(Finding(
            "time", f"{path} takes {fmt.share(share)} of the {what}{inside}",
            weight=share, share=share, amount=region["value"], unit="s",
            evidence=f"{backend} region {path}: {fmt.seconds(region['value'])} of "
                     f"{fmt.seconds(base)}" + (f" (inside {parent})" if parent else "")
                     + _on_device(report, region["name"], region["parent"])))
    return out


def _on_device(report: RunData, name: str, parent: str) -> str:
    """What a tracer saw of the same region on the device, for the evidence."""
    frame = report.scoped("region")
    seen = frame[(frame["name"] == name) & (frame["parent"] == parent)
                 & (frame["metric"] == "gpu_time") & (frame["stat"] == "total")]
    return "".join(f"; {backend} device time {fmt.seconds(value)}"
                   for backend, value in seen.groupby("backend")["value"].median().items())


#: functions whose self time is a wait for work done elsewhere (other threads, processes
#: such as DataLoader workers, the device), as cProfile names them
_WAITS = re.compile(r"\{(?:method '(?:poll|select|acquire|wait|recv\w*|get)' of '"
                    r"(?:select\.\w+|_thread\.\w+|_queue\.\w+|_socket\.socket|"
                    r"_multiprocessing\.\w+)' objects|built-in method (?:time\.sleep|"
                    r"select\.select|posix\.(?:read|waitpid)))\}")


def _where_in_rows(report: RunData, scope: str, kind: str) -> list[Finding]:
    """Without regions: the operators (or functions) with most self time, as a share of
    their own pass's step time (else of all their self time); an operator's, of its
    trace's time (operators are counted over the whole trace: an evaluation loop after
    the last step is in them, and in no step). A function that only waits
    (`select.poll`, a lock, `time.sleep`) is said to wait, not to be where work is done."""
    frame = report.scoped(scope)
    rows = start_up.without_imports(compilation.without_machinery(
        frame[(frame["metric"] == "self_time") & (frame["stat"] == "total")
              & (frame["name"] != UNATTRIBUTED)]), start_up.script_name(report.meta.target))
    if scope == "function":  # one view of the target's own process: sampled, else traced
        rows = rows[rows["backend"].isin(sampling.function_backends(
            report.scoped("function", "run"), report.facts))
                    & (rows["parent"] == "")]
    out = []
    for backend, own in rows.groupby("backend"):
        self_times = own.groupby("name")["value"].median()
        base, what = _traced_time(report, backend) if scope == "operator" \
            else base_time(report, backend)
        if not base > 0:
            base, what = float(self_times.sum()), f"{kind}s' self time"
        rough, trust = few_samples(report, backend)
        ranks = own["rank"].nunique()  # each figure a typical rank's, whatever the others
        rough += f" (the median of {ranks} ranks)" if ranks > 1 else ""
        for name, seconds in self_times.sort_values(ascending=False).head(3).items():
            share = seconds / base if base > 0 else 0.0
            if share >= WORTH_NAMING:
                waits = kind == "function" and _WAITS.search(name) is not None
                out.append(Finding(
                    "time", f"{kind} {fmt.code_path(name, report.meta.cwd)}: "
                    f"{fmt.share(share)} of the {what}"
                    + ("" if "self" in what else ", in itself")
                    + (", blocked, not computing (waiting on other threads or processes "
                       "such as DataLoader workers, on the device, or sleeping)"
                       if waits else "") + rough,
                    weight=share * (0.3 if waits else 0.9) * trust, share=share,
                    amount=seconds, unit="s",
                    evidence=f"{backend} {kind}s: {fmt.seconds(seconds)} self of "
                             f"{fmt.seconds(base)} {what}"))
    return out


def _traced_time(report: RunData, backend: str) -> tuple[float, str]:
    """A trace's host time from its first operator or range to its last, the median over
    its passes and ranks."""
    frame = report.scoped("run")
    traced = frame[(frame["backend"] == backend) & (frame["name"] == "trace")
                   & (frame["metric"] == "wall_time")]
    return (float(traced["value"].median()), "traced time") if not traced.empty \
        else (math.nan, "")


def where_time_goes(report: RunData) -> list[Finding]:
    """The regions that hold most of a step (looking inside one that holds it all), else
    the operators, else the functions, with most self time."""
    clock = timer(report)
    found = _where_in_regions(report, clock[0]) if clock else []
    if not found:
        found = _where_in_rows(report, "operator", "operator")
    if not found:
        found = _where_in_rows(report, "function", "function")
    return found
