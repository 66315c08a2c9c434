"""How sure a difference between two sets of timings is: an interval that holds the noise
between runs, not only the spread of calls inside one run.

Calls inside one process are not independent draws of the program's speed. On this
project's 2-core VM, eight fresh processes timing the same seeded CNN step measured 7.0 to
10.2 ms, while a fixed matmul-and-loop probe in the same processes stayed within 3.0-3.2
ms: each process has a speed of its own (memory layout, allocation, where its threads
land). So thousands of calls make an interval over calls collapse far below the
difference between two runs of the same code (6 of 6 regions of an A/A pair were called
changed). The unit of evidence is therefore the run: a timing pass (repeated with
--repeat). Each side's runs are summarised by their centres (the median of a run's block
medians: BLOCKS contiguous blocks of calls, or its calls when there are too few), and the
change is the ratio of the sides' geometric means of centres, with a Welch t interval on
their logarithms. One run on one side and several on the other: a prediction interval
from the repeated side's spread. One run a side: only the drift within the runs is seen,
from a bootstrap over blocks; such an interval is labelled, and a verdict from it is not
a test of run-to-run change (`tested` is False).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

#: how a set of values is summed up: np.median, or np.mean
Centre = Callable[..., Any]

#: blocks a run's calls are cut into
BLOCKS = 5
#: calls a block needs at least; fewer calls than BLOCKS x this: the calls are the units
CALLS_PER_BLOCK = 3


def units(values: Sequence[float] | np.ndarray, centre: Centre = np.median) -> np.ndarray:
    """A run's units: the `centre` (median) of its BLOCKS contiguous blocks of calls, or
    the calls themselves when there are too few for blocks."""
    values = np.asarray(values, dtype=float)
    if len(values) < BLOCKS * CALLS_PER_BLOCK:
        return values
    return np.array([centre(block) for block in np.array_split(values, BLOCKS)])


@dataclass
class Ratio:
    """b / a - 1 with its interval, and what it rests on."""

    change: float
    #: the two sides' central values the change is taken between
    centre_a: float
    centre_b: float
    low: float
    high: float
    runs_a: int
    runs_b: int
    blocked: bool  # every run's units were blocks (else some were its calls)

    @property
    def tested(self) -> bool:
        """The interval holds the noise between runs (some side was repeated)."""
        return max(self.runs_a, self.runs_b) >= 2

    @property
    def basis(self) -> str:
        unit = "blocks" if self.blocked else "calls"
        runs = f"{self.runs_a}+{self.runs_b} run{'s' if self.runs_a + self.runs_b > 2 else ''}"
        if not self.tested:
            return f"{runs}, {unit} (drift between runs not measured)"
        return runs

    @property
    def verdict(self) -> str:
        if self.low > 0:
            return "slower"
        if self.high < 0:
            return "faster"
        return "no change"


def _centres(runs: Sequence[np.ndarray], centre: Centre) -> np.ndarray:
    return np.array([centre(units(run, centre)) for run in runs])


def _within_runs(a: Sequence[np.ndarray], b: Sequence[np.ndarray], confidence: float,
                 resamples: int, rng: np.random.Generator,
                 centre: Centre) -> tuple[float, float]:
    """One run a side: a bootstrap of the ratio of centres over each run's units."""
    units_a, units_b = units(a[0], centre), units(b[0], centre)
    pick_a = rng.integers(0, len(units_a), size=(resamples, len(units_a)))
    pick_b = rng.integers(0, len(units_b), size=(resamples, len(units_b)))
    ratios = centre(units_b[pick_b], axis=1) / centre(units_a[pick_a], axis=1) - 1
    tail = (1 - confidence) / 2
    low, high = np.quantile(ratios, [tail, 1 - tail])
    return float(low), float(high)


def _between_runs(logs_a: np.ndarray, logs_b: np.ndarray,
                  confidence: float) -> tuple[float, float]:
    """The interval of mean(log b) - mean(log a): Welch's with two repeated sides, else a
    prediction interval for the single run from the repeated side's spread."""
    n_a, n_b = len(logs_a), len(logs_b)
    difference = logs_b.mean() - logs_a.mean()
    if n_a >= 2 and n_b >= 2:
        var_a, var_b = logs_a.var(ddof=1) / n_a, logs_b.var(ddof=1) / n_b
        spread = np.sqrt(var_a + var_b)
        freedom = (var_a + var_b) ** 2 / (var_a ** 2 / (n_a - 1) + var_b ** 2 / (n_b - 1)) \
            if spread > 0 else n_a + n_b - 2
    else:
        repeated = logs_a if n_a >= 2 else logs_b
        spread = repeated.std(ddof=1) * np.sqrt(1 + 1 / len(repeated))
        freedom = len(repeated) - 1
    from scipy import stats  # 0.6 s to import: only where an interval is made

    margin = stats.t.ppf(0.5 + confidence / 2, freedom) * spread
    return float(np.expm1(difference - margin)), float(np.expm1(difference + margin))


def median_ratio(a: Sequence[np.ndarray], b: Sequence[np.ndarray], *,
                 confidence: float = 0.95, resamples: int = 2000,
                 rng: np.random.Generator | None = None,
                 centre: Centre = np.median) -> Ratio:
    """The change from `a` to `b`, each a list of runs' values in call order. `centre`:
    np.mean where what is measured falls on some calls only and is to be counted (a
    sampler's pauses), rather than left out as the median leaves out outliers."""
    centres_a, centres_b = _centres(a, centre), _centres(b, centre)
    blocked = all(len(run) >= BLOCKS * CALLS_PER_BLOCK for run in [*a, *b])
    centre_a = float(np.exp(np.log(centres_a).mean()))
    centre_b = float(np.exp(np.log(centres_b).mean()))
    if max(len(a), len(b)) >= 2:
        low, high = _between_runs(np.log(centres_a), np.log(centres_b), confidence)
    else:
        rng = rng if rng is not None else np.random.default_rng(0)
        low, high = _within_runs(a, b, confidence, resamples, rng, centre)
    return Ratio(centre_b / centre_a - 1, centre_a, centre_b, low, high, len(a), len(b),
                 blocked)
