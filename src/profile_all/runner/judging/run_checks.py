"""How far a run's numbers can be trusted: each pass's overhead over the clean timing
pass with an interval, and the doubts about the run said in words.

An overhead is the ratio of two measurements from two processes. On a shared machine one
sample of each is noise as often as it is a profiler's cost (profilers were shown faster
than the clean pass in 9 of 16 passes), so an overhead rests on per-step times where the
target marks steps (every pass records them, whatever its backends), or on the timing
pass's repeats (--repeat), and says which; one sample against one is shown untested. A
profiler cannot make the target faster: an overhead whose interval lies below 1 is
reported as noise or different work, never as a speed-up.
"""

from __future__ import annotations

import numpy as np

from profile_all import backends, noise
from profile_all.pass_record import PassRecord
from profile_all.report.step_work import UNUSUAL
from profile_all.rows import region_path
from profile_all.runner.judging import layout_doubts
from profile_all.runner.spec import PassResult
from profile_all.target_profilers import MEANS

#: per-step times a pass needs for a per-step overhead
MIN_STEPS = 3
#: the clean pass is called noisy above this coefficient of variation of its steps, or
#: this spread between its repeats
NOISY = 0.10
#: a pass faster than the clean one by less than this is within what a profiler can't
#: shave off by chance (timer ticks, cache luck): not worth a doubt
BELOW_ONE_TOLERANCE = 0.02
#: child processes' CPU time worth a word, absolute and as a share of the target's time
CHILD_CPU_SECONDS, CHILD_CPU_SHARE = 0.05, 0.02


def add_overheads(passes: list[PassRecord], step_times: dict[int, list[float]],
                  comparable: bool) -> None:
    """Each pass's `overhead` over the timing passes, with `overhead_low`/`overhead_high`
    (None when untested), `overhead_basis` and `overhead_verdict`; `step_times`: each
    pass's per-step times. Not `comparable` for a model, whose timing pass repeats the
    work while the others run it once."""
    timing = [p for p in passes if p.timing and p.ended_well] if comparable else []
    for summary in passes:
        summary.overhead = summary.overhead_low = summary.overhead_high = None
        summary.overhead_basis = summary.overhead_verdict = ""
        if not timing or not summary.ended_well:
            continue
        if summary.timing:
            summary.overhead_verdict = "reference"
            continue
        _overhead(summary, timing, step_times)


def _overhead(summary: PassRecord, timing: list[PassRecord],
              step_times: dict[int, list[float]]) -> None:
    own_steps = np.asarray(step_times.get(summary.number, []), float)
    # a pass that ran a window of steps is compared with the same steps of the timing pass
    # (the first ones, warm-up included), not with the steady state after them
    same = len(own_steps) if summary.window and summary.host is None else None
    stepped = [np.asarray(step_times.get(p.number, [])[:same], float) for p in timing]
    if len(own_steps) >= MIN_STEPS and all(len(s) >= MIN_STEPS for s in stepped):
        sampler = _samples(summary)
        ratio = noise.median_ratio(stepped, [own_steps],
                                   centre=np.mean if sampler else np.median)
        point, low, high = 1 + ratio.change, 1 + ratio.low, 1 + ratio.high
        basis = (f"{'mean ' if sampler else ''}per-step times against {len(timing)} timing "
                 f"pass{'es' if len(timing) > 1 else ''}"
                 + ("" if ratio.tested else
                    " (the drift between runs is not in the interval: --repeat 3)"))
    elif summary.window:  # part of the run against the whole of it: no ratio
        summary.overhead_basis = ("a window of steps without per-step times to compare: "
                                  "not compared")
        summary.overhead_verdict = "untested"
        return
    else:
        whole = _whole_run_overhead(summary, timing)
        if whole is None:
            return
        point, low, high, basis = whole
    summary.overhead, summary.overhead_low, summary.overhead_high = point, low, high
    summary.overhead_basis, summary.overhead_verdict = basis, _verdict(low, high)


def _samples(summary: PassRecord) -> bool:
    """A pass of sampling backends, which pause the target now and then: its overhead is
    taken on mean step times, which count the steps a pause fell on (a median leaves them
    out: 1.06x for a pass that took 2.2x at 1,000 samples a second)."""
    return bool(summary.backends) and all(
        backends.load(name).facts.sampled for name in summary.backends
        if name in backends.known_names())


def _whole_run_overhead(summary: PassRecord, timing: list[PassRecord]
                        ) -> tuple[float, float | None, float | None, str] | None:
    """(ratio, its interval's low and high, what it rests on) of a pass's whole-run time
    to the timing passes': an interval only where the timing pass ran twice or more; None
    without times."""
    times = [p.target_wall_time for p in timing if p.target_wall_time]
    own = summary.target_wall_time
    if not times or not own:
        return None
    if len(times) < 2:
        return (own / float(np.median(times)), None, None,
                "one sample each: not tested (mark steps with pa.step(), or --repeat 3)")
    # a prediction interval from the repeats' spread
    ratio = noise.median_ratio([np.array([t]) for t in times], [np.array([own])])
    return (1 + ratio.change, 1 + ratio.low, 1 + ratio.high,
            f"whole run against {len(times)} timing passes (no steps)")


def _verdict(low: float | None, high: float | None) -> str:
    if low is None or high is None:
        return "untested"
    if high < 1 - BELOW_ONE_TOLERANCE:
        return "below 1: noise or different work, not a speed-up"
    return "within noise" if low <= 1 else "above noise"


def doubts(passes: list[PassRecord], results: list[PassResult],
           step_times: dict[int, list[float]], in_process: list[str],
           comparable: bool) -> list[str]:
    """What makes this run's numbers doubtful, a sentence each. `in_process`: the
    backends that measure inside the target's process (blind to its children).
    `comparable`: False for a model, whose passes do unlike work by design."""
    found = _noisy_clean_pass(passes, step_times) + _different_work(passes, results) \
        if comparable else []
    for summary in passes:
        if summary.overhead_verdict.startswith("below 1"):
            found.append(
                f"pass {summary.number} ({'+'.join(summary.backends)}) ran faster than "
                f"the clean pass ({summary.overhead:.2f}x, interval "
                f"{summary.overhead_low:.2f}-{summary.overhead_high:.2f}): that is "
                "noise or different work, not a speed-up")
    return [*found, *layout_doubts.windows(passes),
            *layout_doubts.unusual_in_windows(passes, step_times, UNUSUAL),
            *layout_doubts.on_meta(passes),
            *_model_timing(results), *_children(results, in_process),
            *_target_profilers(passes)]


def _target_profilers(passes: list[PassRecord]) -> list[str]:
    """A sentence per profiler the target runs itself: where it called it (file:line),
    in which passes, and what that does to profile-all's figures."""
    places: dict[str, dict[str, list[int]]] = {}
    for summary in passes:
        for use in summary.target_profilers:
            at = f"{use['where']} ({use['call']})"
            places.setdefault(use["tool"], {}).setdefault(at, []).append(summary.number)
    found = []
    for tool, where in places.items():
        said = "; ".join(f"{at}, pass{'es' if len(numbers) > 1 else ''} "
                         f"{', '.join(map(str, numbers))}" for at, numbers in where.items())
        found.append(f"the target runs {tool} itself, at {said}: {MEANS[tool]}")
    return found


def _model_timing(results: list[PassResult]) -> list[str]:
    """A model benchmark whose blocks, or whose repeated timing passes, disagree beyond
    the median's interval: the machine drifted, and the interval understates it."""
    timed = [(r.number, r.target_facts) for r in results if r.target_facts.get("median")]
    found = [f"the latency's blocks disagree in pass {number}: block medians "
             f"{facts['block_min'] * 1e3:.4g} to {facts['block_max'] * 1e3:.4g} ms while the "
             f"median's 95% interval is {facts['ci95_low'] * 1e3:.4g} to "
             f"{facts['ci95_high'] * 1e3:.4g} ms: the machine's speed drifted during the "
             "timing; the blocks' range is the better measure of the uncertainty"
             for number, facts in timed if facts.get("blocks_disagree")]
    medians = [facts["median"] for _, facts in timed]
    if len(medians) >= 2 and max(medians) / min(medians) - 1 > NOISY / 2:
        found.append(f"the {len(medians)} timing passes disagree: median latency "
                     f"{min(medians) * 1e3:.4g} to {max(medians) * 1e3:.4g} ms "
                     f"({max(medians) / min(medians) - 1:.0%} apart)")
    return found


def _robust_variation(steps: np.ndarray) -> float:
    """The spread of steps that a few unlike steps do not move: one evaluation step of 73%
    of the run made a coefficient of variation of 552% ('noisy'), where the other steps
    agreed. The findings say what ran in such a step (unusual steps)."""
    median = float(np.median(steps))  # x 1.4826: scipy's scale="normal" (1.4 s to import)
    return 1.4826 * float(np.median(np.abs(steps - median))) / median


def _noisy_clean_pass(passes: list[PassRecord],
                      step_times: dict[int, list[float]]) -> list[str]:
    timing = [p for p in passes if p.timing and p.ended_well]
    found = []
    for summary in timing:
        steps = np.asarray(step_times.get(summary.number, []), float)
        if len(steps) >= MIN_STEPS and np.median(steps) > 0:
            variation = _robust_variation(steps)
            if variation > NOISY:
                found.append(f"the clean timing pass {summary.number} was noisy: its steps "
                             f"vary by {variation:.0%} (median absolute deviation, as a "
                             "standard deviation, over the median): overheads and "
                             "comparisons are uncertain")
    times = [p.target_wall_time for p in timing if p.target_wall_time]
    if len(times) >= 2 and max(times) / min(times) - 1 > NOISY:
        found.append(f"the timing pass's {len(times)} repeats disagree: the target took "
                     f"{min(times):.3g} s to {max(times):.3g} s (run-to-run noise "
                     f"{max(times) / min(times) - 1:.0%})")
    return found


def _different_work(passes: list[PassRecord], results: list[PassResult]) -> list[str]:
    """Passes that saw different numbers of steps, or of calls of a region; or, where the
    target marks neither, the fact that this cannot be checked."""
    ended_well = [p for p in passes if p.ended_well]
    # a pass ended at its window did the same work as far as it went
    counted = [(p.number, p.steps) for p in ended_well if p.step_source and not p.window]
    if counted:  # (a profiler that records a window of steps counts fewer region calls)
        if len({steps for _, steps in counted}) == 1:
            return []
        listing = ", ".join(f"pass {number}: {steps}" for number, steps in counted)
        return [f"passes did different work (steps per pass: {listing}): whole-run times "
                "and totals do not compare; per-step figures still do"]
    calls = _region_calls(results, {p.number for p in ended_well})
    differing = _calls_differ(calls)
    if differing:
        return differing
    if len(ended_well) > 1 and not calls:
        return ["the target marks no step (pa.step(), optimizer.step()) and no region: "
                "whether every pass did the same work cannot be checked, and overheads rest "
                "on whole-run times"]
    return []


def _calls_differ(calls: dict[str, dict[int, float]]) -> list[str]:
    """The first region whose passes counted different calls, as a doubt."""
    for region, per_pass in calls.items():
        if len(set(per_pass.values())) > 1:
            listing = ", ".join(f"pass {number}: {count:g}" for number, count
                                in sorted(per_pass.items()))
            return [f"passes did different work (calls of region {region}: {listing}): "
                    "whole-run times and totals do not compare"]
    return []


def _region_calls(results: list[PassResult], passes: set[int]) -> dict[str, dict]:
    """Per region path, the calls each pass's backends counted (rank 0)."""
    calls: dict[str, dict[int, float]] = {}
    for result in results:
        if result.number not in passes or result.rank != 0:
            continue
        for _backend, number, _rank, scope, name, parent, metric, stat, value, _unit in \
                result.rows:
            if scope == "region" and metric == "calls" and stat == "total":
                path = region_path(parent, name)
                calls.setdefault(path, {})[number] = value
    return calls


def _children(results: list[PassResult], in_process: list[str]) -> list[str]:
    """One sentence when the target's children did work the in-process backends missed."""
    busiest = max(results, key=lambda r: r.children.get("cpu_time") or 0.0, default=None)
    if busiest is None:
        return []
    cpu = busiest.children.get("cpu_time") or 0.0
    wall = busiest.outcome.get("target_wall_time") or 0.0
    if cpu < CHILD_CPU_SECONDS or cpu < CHILD_CPU_SHARE * wall:
        return []
    blind = f"{', '.join(in_process)} measure inside the target's process and" \
        if in_process else "the backends"
    peak = _children_peak(results)
    memory = f", their peak RSS {peak / 2**20:.0f} MiB (memory backend)" if peak else ""
    return [f"the target's child processes (DataLoader workers, subprocesses, mp.spawn) used "
            f"{cpu:.3g} s of CPU in pass {busiest.number}{memory}: {blind} did not see that "
            "work"]


def _children_peak(results: list[PassResult]) -> float:
    """The children's peak RSS as the memory sampler saw it (getrusage's is the largest
    child's high-water mark, which a forked child inherits from its parent: not theirs)."""
    peaks = [row[-2] for result in results for row in result.rows
             if row[3] == "run" and row[6] == "peak_rss_children"]
    return max(peaks, default=0.0)
