"""What changed between two runs, and whether it is beyond the noise between runs.

Regions, steps and a model's iterations are compared on the per-call samples of each run's
clean timing passes (`Report.samples`): each timing pass (--repeat) is a run, and
noise.median_ratio gives the change and an interval that holds the noise between runs,
not only the spread of calls inside one (which called 6 of 6 regions of two identical
runs changed). A change whose interval excludes zero is `slower` or `faster`, unless it
is smaller than DRIFT_FLOOR (`no change beyond drift`); one whose interval holds it is
`no change`, unless the interval reaches INCONCLUSIVE_BEYOND or more either way (two
repeats a side can give -95% to +14,000%): then it is `inconclusive`, since it does not
rule out the changes users look for; with one timing pass a side the drift between runs is
unknown, and the verdict says `untested` (the interval over blocks is still shown). Each
row says what it rests on (`basis`), and `slower_than` (the CI gate) refuses to judge
runs of one timing pass. Fewer than MIN_CALLS calls on either side cannot be tested.

Functions (cProfile), operators and kernels (torch.profiler: calls, host and device time,
own and total, as TensorBoard's diff view; two ingested traces compare on these alone)
keep totals, not calls, so their change is shown without a test (`no per-call samples`).
FLOP counts are exact: any difference is `changed`. Peak memory is one sampled value a
run: its difference is shown untested.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from profile_all import noise
from profile_all.errors import UsageError

MIN_CALLS = 3
TOP = 10
#: an operator's measures compared, as TensorBoard's diff view shows them (each where both
#: runs have it: device times from traces with device work)
_OPERATOR_DIFF = ["calls", "self_time", "cpu_time", "self_gpu_time", "gpu_time"]
#: a tested change smaller than this is not called slower or faster: two runs of the same
#: code made at different times on one machine differ by this much (load, frequency,
#: memory layout), which the repeats inside one run do not sample (an A/A pair of sleeping
#: regions on this project's 2-core CI machine: +0.9% to +1.4%, intervals excluding 0)
DRIFT_FLOOR = 0.03
#: an interval that holds zero but reaches this far either way rules out no change of the
#: size users look for (a 10% gate): it is inconclusive, not "no change"
INCONCLUSIVE_BEYOND = 0.25
#: timing passes a side that a CI gate needs: one a side cannot tell a change from drift
GATE_RUNS = 2
UNTESTED = "untested: one run a side (profile with --repeat 3 or more)"
COLUMNS = ["kind", "name", "parent", "backend", "metric", "a", "b", "change", "ci_low",
           "ci_high", "calls_a", "calls_b", "runs_a", "runs_b", "basis", "verdict"]


def _timing_passes(report: Any) -> set[int]:
    """The passes of a run whose samples are clean timings (timers, the model benchmark)."""
    return {p.number for p in report.meta.passes if p.timing}


def _runs(report: Any) -> dict[tuple, list[np.ndarray]]:
    """Per measure (scope, backend, metric, name, parent): each timing pass's calls, in
    call order; ranks pooled within a pass."""
    samples = report.samples
    samples = samples[samples["pass"].isin(_timing_passes(report))]
    keys = ["scope", "backend", "metric", "name", "parent"]
    runs: dict[tuple, list[np.ndarray]] = {}
    for (*key, _pass), values in samples.groupby([*keys, "pass"], sort=False)["value"]:
        runs.setdefault(tuple(key), []).append(values.to_numpy(float))
    return runs


def _timed(a: Any, b: Any, confidence: float, resamples: int, seed: int) -> list[dict]:
    """A row per region, step or model common to both runs. The intervals hold together:
    each is at 1 - (1 - confidence) / m for m measures (Bonferroni), since a gate fails
    when any one of them is slower."""
    rng = np.random.default_rng(seed)
    runs_a, runs_b = _runs(a), _runs(b)
    common = [k for k in runs_a if k in runs_b]
    each = 1 - (1 - confidence) / max(1, len(common))
    found = []
    for key in common:
        scope, backend, metric, name, parent = key
        all_a, all_b = np.concatenate(runs_a[key]), np.concatenate(runs_b[key])
        median_a, median_b = float(np.median(all_a)), float(np.median(all_b))
        entry = {"kind": scope, "name": name, "parent": parent, "backend": backend,
                 "metric": f"{metric} median", "a": median_a, "b": median_b,
                 "change": median_b / median_a - 1 if median_a > 0 else np.nan,
                 "ci_low": np.nan, "ci_high": np.nan, "calls_a": len(all_a),
                 "calls_b": len(all_b), "runs_a": len(runs_a[key]),
                 "runs_b": len(runs_b[key]), "basis": ""}
        if min(len(all_a), len(all_b)) < MIN_CALLS:
            entry["verdict"] = f"too few calls to test (< {MIN_CALLS})"
        elif median_a <= 0:
            entry["verdict"] = "not tested (zero time)"
        else:
            ratio = noise.median_ratio(runs_a[key], runs_b[key], confidence=each,
                                       resamples=resamples, rng=rng)
            entry.update(a=ratio.centre_a, b=ratio.centre_b, change=ratio.change,
                         ci_low=ratio.low, ci_high=ratio.high, basis=ratio.basis,
                         verdict=_verdict(ratio))
        found.append(entry)
    return found + _one_side(runs_a, runs_b)


def _verdict(ratio: noise.Ratio) -> str:
    if not ratio.tested:
        return UNTESTED
    if ratio.verdict in ("slower", "faster") and abs(ratio.change) < DRIFT_FLOOR:
        return f"no change beyond drift (below {DRIFT_FLOOR:.0%})"
    if ratio.verdict == "no change" and max(-ratio.low, ratio.high) >= INCONCLUSIVE_BEYOND:
        return (f"inconclusive (the interval reaches {INCONCLUSIVE_BEYOND:.0%} or more: "
                "more repeats narrow it)")
    return ratio.verdict


def _one_side(runs_a: dict[tuple, list], runs_b: dict[tuple, list]) -> list[dict]:
    """Regions, steps and models timed in one run only: a region that appeared or went is
    a change too, and is shown, not dropped."""
    found = []
    for runs, other, side in ((runs_a, runs_b, "a"), (runs_b, runs_a, "b")):
        for key in [k for k in runs if k not in other]:
            scope, backend, metric, name, parent = key
            values = np.concatenate(runs[key])
            found.append({"kind": scope, "name": name, "parent": parent, "backend": backend,
                          "metric": f"{metric} median", side: float(np.median(values)),
                          f"calls_{side}": len(values), f"runs_{side}": len(runs[key]),
                          "basis": "", "verdict": "only in A (gone in B)" if side == "a"
                          else "only in B (new)"})
    return found


def _totals(kind: str, a: Any, b: Any, view: str, metric: str) -> list[dict]:
    """The top names of either run's `view` (scope `kind`) by `metric`, their change
    untested; `backend` names the backends whose rows they are."""
    table_a, table_b = getattr(a, view)(), getattr(b, view)()
    if metric not in table_a.columns or metric not in table_b.columns:
        return []
    backend = "+".join(sorted({*_backends(a, kind), *_backends(b, kind)}))
    a = table_a.set_index("name")[metric]
    b = table_b.set_index("name")[metric]
    names = list(dict.fromkeys([*a.head(TOP).index, *b.head(TOP).index]))
    found = []
    for name in names:
        value_a, value_b = a.get(name, np.nan), b.get(name, np.nan)
        found.append({"kind": kind, "name": name, "parent": "", "backend": backend,
                      "metric": metric, "a": value_a, "b": value_b,
                      "change": value_b / value_a - 1 if value_a else np.nan,
                      "verdict": "no per-call samples: not tested"})
    return found


def _backends(report: Any, scope: str) -> set[str]:
    return set(report.frame.loc[report.frame["scope"] == scope, "backend"])


def _counts(a: Any, b: Any) -> list[dict]:
    found = []
    keys = ["module", "counter"]  # a root module's FLOPs per call, by each counter
    counted_a = a.counters().set_index(keys)["flops"]
    counted_b = b.counters().set_index(keys)["flops"]
    for module, counter in counted_a.index.intersection(counted_b.index):
        value_a = float(counted_a[(module, counter)])
        value_b = float(counted_b[(module, counter)])
        found.append({"kind": "flops", "name": module, "parent": "", "backend": counter,
                      "metric": "flops per call", "a": value_a, "b": value_b,
                      "change": value_b / value_a - 1 if value_a else np.nan,
                      "verdict": "same" if value_a == value_b else "changed"})
    peaks = []
    for report in (a, b):
        frame = report.frame
        peaks.append(frame[(frame["metric"] == "peak_rss") & (frame["scope"] == "run")]
                     .groupby("backend")["value"].max())
    for backend in peaks[0].index.intersection(peaks[1].index):
        value_a, value_b = float(peaks[0][backend]), float(peaks[1][backend])
        found.append({"kind": "memory", "name": "run", "parent": "", "backend": backend,
                      "metric": "peak_rss", "a": value_a, "b": value_b,
                      "change": value_b / value_a - 1 if value_a else np.nan,
                      "verdict": "one sample a run: not tested"})
    return found


def compare(a: Any, b: Any, *, confidence: float = 0.95, resamples: int = 2000,
            seed: int = 0) -> pd.DataFrame:
    """A row per compared measure of runs `a` and `b` (Reports), COLUMNS; `change` is
    b / a - 1. UsageError when the runs have no region, step or model in common.
    `attrs["notes"]`: what makes the two runs unlike, a sentence each; `attrs["cwd"]`: the
    second run's folder."""
    timed = _timed(a, b, confidence, resamples, seed)
    totals = _totals("function", a, b, "functions", "self_time")
    for metric in _OPERATOR_DIFF:  # TensorBoard's diff view: operators and kernels
        totals += _totals("operator", a, b, "operators", metric)
    totals += _totals("kernel", a, b, "kernels", "gpu_time") + _totals(
        "kernel", a, b, "kernels", "calls")
    in_both = [row for row in totals if not (pd.isna(row["a"]) or pd.isna(row["b"]))]
    if all(row["verdict"].startswith("only in") for row in timed) and not in_both:
        names_a = sorted(set(a.samples["name"])) or ["none"]
        names_b = sorted(set(b.samples["name"])) or ["none"]
        raise UsageError(
            "the two runs have no timed region, step or model in common (first: "
            f"{', '.join(names_a[:5])}; second: {', '.join(names_b[:5])}), nor a function, "
            "operator or kernel")
    rows = timed + totals + _counts(a, b)
    table = pd.DataFrame(rows).reindex(columns=COLUMNS)
    table.attrs["notes"] = _unlike(a, b)
    table.attrs["cwd"] = b.meta.cwd  # functions' files are shown from it
    return table


def target_of(report: Any) -> tuple[str, str]:
    """What a run profiled: (kind, the script's path or the model's spec)."""
    target = report.meta.target
    return str(target.get("kind", "")), str(target.get("path") or target.get("spec") or "")


def _unlike(a: Any, b: Any) -> list[str]:
    """Differences between the runs' setups that a change in time may come from; first,
    that they profiled different targets."""
    notes = []
    if target_of(a) != target_of(b):
        notes.append(f"the runs profiled different targets: {target_of(a)[1] or 'unknown'} "
                     f"against {target_of(b)[1] or 'unknown'}: their times are not of one "
                     "program")
    models = target_of(a)[0] == target_of(b)[0] == "model"
    # a model's latency is its timing pass's clock, which starts after the model is built
    # whatever its counters imported: only a script's time can hold an import
    if a.meta.preimported != b.meta.preimported and not models:
        notes.append("the runs differ in modules imported before the target's clock: "
                     f"{a.meta.preimported} against {b.meta.preimported}")
    timers = [sorted({n for p in r.meta.passes if p.timing for n in p.backends})
              for r in (a, b)]
    if timers[0] != timers[1]:
        notes.append(f"the timing passes ran different timers: {timers[0]} against "
                     f"{timers[1]}")
    return notes


def slower_than(table: pd.DataFrame, percent: float) -> pd.DataFrame:
    """Regions, steps and models slower beyond the run-to-run noise by more than
    `percent`. UsageError when no timed measure rests on GATE_RUNS timing passes a side:
    one run a side cannot tell a change from the drift between runs."""
    timed = table[table["basis"].fillna("") != ""]
    gated = timed[(timed["runs_a"] >= GATE_RUNS) & (timed["runs_b"] >= GATE_RUNS)]
    if gated.empty:
        runs_a = int(timed["runs_a"].max()) if not timed.empty else 0
        runs_b = int(timed["runs_b"].max()) if not timed.empty else 0
        raise UsageError(
            f"--fail-above needs at least {GATE_RUNS} timing passes in each run to tell a "
            f"change from the drift between runs, and these have {runs_a} and {runs_b}: "
            "profile both with --repeat 3 or more")
    return gated[(gated["verdict"] == "slower") & (gated["change"] * 100 > percent)]


def undecided(table: pd.DataFrame, percent: float) -> pd.DataFrame:
    """The measures the gate cannot decide: slower by more than `percent` as measured, but
    whose interval holds no change (inconclusive: the noise is as large as the change), on
    GATE_RUNS timing passes a side. A gate that passed them would pass a 10x slowdown."""
    gated = table[(table["runs_a"] >= GATE_RUNS) & (table["runs_b"] >= GATE_RUNS)]
    return gated[gated["verdict"].str.startswith("inconclusive")
                 & (gated["change"] * 100 > percent)]
