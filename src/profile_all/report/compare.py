"""What changed between two runs, and whether it is beyond the noise.

Regions, steps and a model's iterations are compared on their per-call samples
(`Report.samples`): the change is the ratio of medians minus one, and its confidence
interval comes from a bootstrap of that ratio (each run's calls resampled with
replacement). A change whose interval excludes zero is `slower` or `faster`; one whose
interval holds zero is `within noise`. Fewer than MIN_CALLS calls on either side cannot be
tested, and says so. The interval holds the spread of the calls, not the drift between two
runs on a busy machine: a CI threshold (`slower_than`) should sit above that drift.

Functions (cProfile) and operators (torch.profiler) keep totals, not calls, so their change
is shown without a test (`no per-call samples`). FLOP counts are exact: any difference is
`changed`. Peak memory is one sampled value a run: its difference is shown untested.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from profile_all.errors import UsageError

MIN_CALLS = 3
TOP = 10
COLUMNS = ["kind", "name", "parent", "backend", "metric", "a", "b", "change", "ci_low",
           "ci_high", "calls_a", "calls_b", "verdict"]


def _bootstrap_change(a: np.ndarray, b: np.ndarray, resamples: int, confidence: float,
                      rng: np.random.Generator) -> tuple[float, float]:
    """The interval of median(b) / median(a) - 1, resampling both; in chunks, so that a
    region with 10,000 calls needs no more than a few MB."""
    ratios = []
    chunk = max(1, 2_000_000 // max(len(a), len(b)))
    for start in range(0, resamples, chunk):
        size = min(chunk, resamples - start)
        median_a = np.median(rng.choice(a, (size, len(a))), axis=1)
        median_b = np.median(rng.choice(b, (size, len(b))), axis=1)
        ratios.append(median_b / median_a - 1)
    tail = (1 - confidence) / 2
    low, high = np.quantile(np.concatenate(ratios), [tail, 1 - tail])
    return float(low), float(high)


def _timed(a: Any, b: Any, confidence: float, resamples: int, seed: int) -> list[dict]:
    rng = np.random.default_rng(seed)
    keys = ["scope", "backend", "metric", "name", "parent"]
    groups_a = dict(list(a.samples.groupby(keys, sort=False)["value"]))
    groups_b = dict(list(b.samples.groupby(keys, sort=False)["value"]))
    found = []
    for key in [k for k in groups_a if k in groups_b]:
        scope, backend, metric, name, parent = key
        values_a, values_b = groups_a[key].to_numpy(), groups_b[key].to_numpy()
        median_a, median_b = float(np.median(values_a)), float(np.median(values_b))
        change = median_b / median_a - 1 if median_a > 0 else np.nan
        low = high = np.nan
        if min(len(values_a), len(values_b)) < MIN_CALLS:
            verdict = f"too few calls to test (< {MIN_CALLS})"
        elif median_a <= 0:
            verdict = "not tested (zero time)"
        else:
            low, high = _bootstrap_change(values_a, values_b, resamples, confidence, rng)
            verdict = "slower" if low > 0 else "faster" if high < 0 else "within noise"
        found.append({"kind": scope, "name": name, "parent": parent, "backend": backend,
                      "metric": f"{metric} median", "a": median_a, "b": median_b,
                      "change": change, "ci_low": low, "ci_high": high,
                      "calls_a": len(values_a), "calls_b": len(values_b), "verdict": verdict})
    return found


def _totals(kind: str, table_a: pd.DataFrame, table_b: pd.DataFrame, metric: str,
            backend: str) -> list[dict]:
    """The top names of either run by `metric`, their change untested."""
    if metric not in table_a.columns or metric not in table_b.columns:
        return []
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


def _counts(a: Any, b: Any) -> list[dict]:
    found = []
    counters_a, counters_b = a.counters().set_index("counter"), b.counters().set_index("counter")
    if not counters_a.empty and not counters_b.empty:
        for counter in counters_a.index.intersection(counters_b.index):
            value_a = float(counters_a.at[counter, "flops"])
            value_b = float(counters_b.at[counter, "flops"])
            found.append({"kind": "flops", "name": "total", "parent": "", "backend": counter,
                          "metric": "flops", "a": value_a, "b": value_b,
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
    b / a - 1. UsageError when the runs have no region, step or model in common."""
    timed = _timed(a, b, confidence, resamples, seed)
    if not timed:
        names_a = sorted(set(a.samples["name"])) or ["none"]
        names_b = sorted(set(b.samples["name"])) or ["none"]
        raise UsageError(
            "the two runs have no timed region, step or model in common (first: "
            f"{', '.join(names_a[:5])}; second: {', '.join(names_b[:5])})")
    rows = timed
    rows += _totals("function", a.functions(), b.functions(), "self_time", "cprofile")
    rows += _totals("operator", a.operators(), b.operators(), "self_time", "torch-profiler")
    rows += _counts(a, b)
    return pd.DataFrame(rows).reindex(columns=COLUMNS)


def slower_than(table: pd.DataFrame, percent: float) -> pd.DataFrame:
    """Regions, steps and models slower beyond the noise by more than `percent`."""
    return table[(table["verdict"] == "slower") & (table["change"] * 100 > percent)]
