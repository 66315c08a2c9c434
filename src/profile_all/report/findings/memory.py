"""Memory that grows step after step, and a peak near what the machine has."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from profile_all import units as fmt
from profile_all.report.findings.finding import Finding, latency_doubt

if TYPE_CHECKING:
    from profile_all.report.run_data import RunData

#: growth over the measured window worth saying: this share of the RSS, and this many bytes
GROWTH_SHARE = 0.1
GROWTH_BYTES = 32 * 2**20
#: how straight the growth must be (Pearson r of RSS on time): a leak grows steadily
GROWTH_R = 0.9
#: what it takes to tell a leak from start-up allocations: samples and seconds measured
#: after the first quarter of the pass, and growth in each third of them
GROWTH_SAMPLES = 20
GROWTH_SECONDS = 1.0
#: CUDA memory is read once a step: this many steps after the first quarter
GROWTH_STEPS = 12
#: a peak above this share of the machine's (or device's) memory is near capacity
NEAR_CAPACITY = 0.85


def _steady_rise(values: pd.Series) -> bool:
    """Each third's median above the one before by at least a quarter of the whole rise:
    a leak grows all along; start-up allocations rise once and level off."""
    thirds = [float(np.median(part)) for part in np.array_split(values.to_numpy(), 3)]
    rise = thirds[2] - thirds[0]
    return rise > 0 and min(thirds[1] - thirds[0], thirds[2] - thirds[1]) >= rise / 4


#: the series that can grow: (series, name, what, fewest samples, fewest seconds):
#: RSS sampled every few ms from outside; CUDA memory allocated, read at each step's end
_GROWING = (("rss", "process", "RSS", GROWTH_SAMPLES, GROWTH_SECONDS),
            ("cuda", "allocated", "CUDA memory allocated", GROWTH_STEPS, 0.0))


def _in_steps(samples: pd.DataFrame, timeline: pd.DataFrame, key: tuple) -> pd.DataFrame:
    """The samples from the end of the pass's first step to the end of its last (imports
    and the model's building before: 'memory grows steadily' on a script that keeps
    nothing); where its steps are not on the timeline, after its first quarter."""
    backend, run_pass, rank = key
    ends = timeline[(timeline["series"] == "step") & (timeline["backend"] == backend)
                    & (timeline["pass"] == run_pass) & (timeline["rank"] == rank)]["start"]
    samples = samples.sort_values("start")
    if len(ends) < 3:
        return samples.iloc[len(samples) // 4:]
    return samples[samples["start"].between(float(ends.min()), float(ends.max()))]


def growth(report: RunData) -> list[Finding]:
    """RSS, or CUDA memory step after step, rising steadily across a pass's steps (after
    the first, which holds the start-up), torch.compile's compilations left out."""
    timeline = report.timeline
    out = []
    for series, name, what, fewest, seconds in _GROWING:
        picked = timeline[(timeline["series"] == series) & (timeline["name"] == name)]
        for key, samples in picked.groupby(["backend", "pass", "rank"]):
            backend, run_pass, rank = key
            samples = _outside_compilation(samples, report, run_pass)
            found = _grown(_in_steps(samples, timeline, key), fewest, seconds)
            if found is None:
                continue
            grown, span, (slope, r), count = found
            regions = timeline[(timeline["series"] == "region") & (timeline["pass"] == run_pass)
                               & (timeline["rank"] == rank)
                               & timeline["start"].between(*span)]
            per = f", {fmt.size(grown / len(regions))} per top-level region call" \
                if len(regions) > 1 else ""
            out.append(Finding(
                "memory", f"memory grows steadily: {what} +{fmt.size(grown)} over "
                f"{fmt.seconds(span[1] - span[0])}{per} (a leak?)", weight=0.6, amount=grown,
                unit="B", evidence=f"{backend} pass {run_pass} rank {rank}: {count} {what} "
                f"samples, {fmt.size(slope)}/s, r = {r:.2f}",
                suggestion="tensors kept across steps (append loss.item(), not loss; detach() "
                           "what is stored), growing lists or caches; `-b memory "
                           "--memory-lines MODULE:FUNCTION` shows which lines allocate"))
    return out


def _outside_compilation(samples: pd.DataFrame, report: RunData, run_pass: int
                         ) -> pd.DataFrame:
    """The samples taken while torch.compile was not compiling in the pass: compiling
    takes memory for seconds (46.9 MiB over 1.35 s of a recompile), which is no leak."""
    summary = next((p for p in report.meta.passes if p.number == run_pass), None)
    intervals = summary.compilation.get("intervals", []) if summary else []
    if not intervals:
        return samples
    times = samples["start"].to_numpy(float)
    inside = np.zeros(len(samples), dtype=bool)
    for start, end in intervals:
        inside |= (times >= start) & (times <= end)
    return samples[~inside]


def _grown(samples: pd.DataFrame, fewest: int, seconds: float) -> tuple | None:
    """(bytes grown, (first, last) time, the fit, samples) where the samples rise steadily
    and enough; else None."""
    if len(samples) < fewest:
        return None
    span = (float(samples["start"].iloc[0]), float(samples["start"].iloc[-1]))
    if span[1] - span[0] < max(seconds, 1e-9) or not _steady_rise(samples["value"]):
        return None
    times, values = samples["start"].to_numpy(float), samples["value"].to_numpy(float)
    slope = float(np.polyfit(times, values, 1)[0])  # least squares (scipy.stats costs 1.4 s
    r = float(np.corrcoef(times, values)[0, 1])     # to import; a report write, 0.3 s)
    grown = slope * (span[1] - span[0])
    level = float(np.median(values))
    if grown < max(GROWTH_BYTES, GROWTH_SHARE * level) or not r >= GROWTH_R:
        return None
    return grown, span, (slope, r), len(samples)


def near_capacity(report: RunData) -> list[Finding]:
    """A peak above NEAR_CAPACITY of the host's memory or the device's."""
    environment = report.meta.environment
    out = []
    frame = report.scoped("run")
    for metric, capacity_key, where in (("peak_rss", "memory_total", "the machine's memory"),
                                        ("gpu_mem_peak", "gpu_memory_total",
                                         "the device's memory")):
        capacity = environment.get(capacity_key)
        peaks = frame[frame["metric"] == metric]
        if not capacity or peaks.empty:
            continue
        peak = float(peaks["value"].max())
        if peak >= NEAR_CAPACITY * capacity:
            out.append(Finding(
                "memory", f"peak memory near capacity: {fmt.size(peak)} of {where} "
                f"({fmt.size(capacity)}, {fmt.share(peak / capacity)})", weight=0.8,
                share=peak / capacity, amount=peak, unit="B",
                evidence=f"{peaks.loc[peaks['value'].idxmax(), 'backend']} {metric}",
                suggestion="a smaller batch, activation checkpointing, mixed precision, or "
                           "freeing what the loop keeps"))
    return out


#: a model's latency this much above its latency with the heap held is said
ALLOCATOR_SHARE = 0.05
#: the comparison is hedged where the machine's speed changed this much around its two
#: blocks, or where the difference is over this many times what the faults can cost
#: (a fault's own time, measured; glibc's trims and the cold pages add to it: small_cnn's
#: 670 faults an iteration cost 1.8 us each against 3.5 us measured for a bare fault)
DRIFT, FAULT_SLACK = 0.10, 3.0


def allocator(report: RunData) -> list[Finding]:
    """A model's CPU latency that holds the allocator's page faults: its iterations
    faulted pages in, and ran over ALLOCATOR_SHARE faster with the heap held (the two
    blocks timed one after the other; the timing pass's median for runs before them), or
    faulted no more in the block timed after the timing (glibc's thresholds settled)."""
    out = []
    for (run_pass, name), rows in report.latency().groupby(["pass", "name"], sort=False):
        value = dict(zip(zip(rows["metric"], rows["stat"], strict=True), rows["value"],
                         strict=True))
        compared = _allocator_blocks(value)
        if compared is None:
            continue
        faults, slow, fast, how = compared
        doubt, trust = _allocator_doubt(value, faults, slow - fast)
        out.append(Finding(
            "memory", f"the allocator's page faults {'may ' if trust < 1 else ''}hold "
            f"{fmt.share(1 - fast / slow)} of the latency: each iteration faulted in "
            f"{faults:,.0f} pages as glibc gave freed memory back to the OS and took it "
            f"again; {how}, {fmt.seconds(fast)} instead of {fmt.seconds(slow)} "
            f"({slow / fast:.2f}x){doubt}. Fresh processes of one program differ in this "
            "(glibc's thresholds move with what was freed before), so yours may see either",
            weight=(1 - fast / slow) * trust, share=1 - fast / slow, amount=slow - fast,
            unit="s",
            evidence=f"pass {run_pass} {name}: {faults:,.0f} page faults an iteration; the "
                     "same iterations timed again after the timing" + (
                         ", as they were, then with the heap held, one block after the other"
                         if how == _HELD else ", as they were") + latency_doubt(report),
            suggestion="MALLOC_TRIM_THRESHOLD_=1073741824 MALLOC_MMAP_THRESHOLD_=33554432 in "
                       "the environment (glibc keeps what the process frees), or jemalloc "
                       "or tcmalloc by LD_PRELOAD"))
    return out


_HELD = "with its heap held"
_SETTLED = "once they faulted no more (glibc's thresholds settled as the process went on)"


def _allocator_blocks(value: dict) -> tuple[float, float, float, str] | None:
    """(faults an iteration, the latency with them, without them, how it was had without
    them) where the faults hold over ALLOCATOR_SHARE of the latency; None elsewhere."""
    median, faults = value.get(("latency", "median")), value.get(("page_faults", "mean"))
    kept = value.get(("latency_memory_kept", "median"))
    after = value.get(("latency_memory_given_back", "median"))
    after_faults = value.get(("page_faults_given_back", "mean"))
    if kept is not None:  # the heap held, against the block just before it (or the timing)
        slow = after if after is not None else median
        faults = after_faults if after_faults is not None else faults
        compared = (faults, slow, kept, _HELD)
    elif after is not None and faults is not None:  # the block after faulted no more: the
        compared = (faults, median, after, _SETTLED)  # probe holds nothing then
    else:
        return None
    if compared[0] is None or compared[1] is None \
            or not compared[1] > compared[2] * (1 + ALLOCATOR_SHARE):
        return None
    return compared


def _allocator_doubt(value: dict, faults: float, difference: float) -> tuple[str, float]:
    """(what makes the comparison uncertain, said after it; how much to trust it)."""
    drift = value.get(("timing_drift", "value"))
    cost = value.get(("page_fault_cost", "value"))
    if drift is not None and drift > DRIFT:
        return (f", uncertain: the machine's speed changed by {drift:.0%} between the two "
                "timings (a pure-Python loop timed around them)"), 0.5
    if cost and difference > FAULT_SLACK * faults * cost:
        return (f", more than {faults:,.0f} faults can cost ({fmt.seconds(faults * cost)} "
                f"at {fmt.seconds(cost)} each, measured here): the rest is something else, "
                "the machine's load perhaps"), 0.5
    if cost:
        return (f"; {faults:,.0f} faults cost about {fmt.seconds(faults * cost)} at "
                f"{fmt.seconds(cost)} each, measured here"), 1.0
    return "", 1.0
