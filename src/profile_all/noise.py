"""How sure a difference between two sets of timings is: the interval of a ratio of
medians that holds the noise between runs, not only the spread of calls inside one run.

Calls inside one run are not independent draws: a machine drifts over seconds (other load,
frequency scaling, caches), so thousands of calls make a bootstrap over calls collapse to
an interval far narrower than the difference between two runs of the same code. So each
side is a list of runs (processes: timing passes repeated with --repeat), each run is cut
into BLOCKS contiguous blocks of calls, and the bootstrap resamples runs, then blocks
within them, and takes the median of the chosen blocks' medians. With one run a side the
interval holds the drift within a run only, and says so (`runs`); with too few calls for
blocks it falls back to the calls themselves.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

#: blocks a run's calls are cut into
BLOCKS = 5
#: calls a block needs at least; fewer calls than BLOCKS x this: the calls are the units
CALLS_PER_BLOCK = 3


def units(values: Sequence[float] | np.ndarray) -> np.ndarray:
    """A run's resampling units: the medians of its BLOCKS contiguous blocks of calls, or
    the calls themselves when there are too few for blocks."""
    if len(values) < BLOCKS * CALLS_PER_BLOCK:
        return np.asarray(values, dtype=float)
    return np.array([np.median(block) for block in np.array_split(values, BLOCKS)])


@dataclass
class Ratio:
    """median(b) / median(a) - 1 with its bootstrap interval, and what it rests on."""

    change: float
    #: the two sides' central values the change is taken between (medians of the units)
    centre_a: float
    centre_b: float
    low: float
    high: float
    runs_a: int
    runs_b: int
    blocked: bool  # every run's units were blocks (else some were its calls)

    @property
    def basis(self) -> str:
        unit = "blocks" if self.blocked else "calls"
        runs = f"{self.runs_a}+{self.runs_b} run{'s' if self.runs_a + self.runs_b > 2 else ''}"
        if min(self.runs_a, self.runs_b) < 2:
            return f"{runs}, {unit} (drift between runs not measured)"
        return f"{runs}, {unit}"

    @property
    def verdict(self) -> str:
        if self.low > 0:
            return "slower"
        if self.high < 0:
            return "faster"
        return "no change"


def _centre(runs: Sequence[np.ndarray]) -> float:
    return float(np.median(np.concatenate(runs)))


def _resampled(runs: Sequence[np.ndarray], resamples: int,
               rng: np.random.Generator) -> np.ndarray:
    """`resamples` bootstrap medians: runs drawn with replacement, then units within each."""
    chosen = rng.integers(0, len(runs), size=(resamples, len(runs)))
    lengths = np.array([len(run) for run in runs])
    width = int(lengths.max())
    padded = np.full((len(runs), width), np.nan)
    for position, run in enumerate(runs):
        padded[position, :len(run)] = run
    picks = (rng.random((resamples, len(runs), width)) * lengths[chosen][..., None]).astype(int)
    drawn = padded[chosen[..., None], picks]
    valid = np.arange(width)[None, None, :] < lengths[chosen][..., None]
    return np.nanmedian(np.where(valid, drawn, np.nan).reshape(resamples, -1), axis=1)


def median_ratio(a: Sequence[np.ndarray], b: Sequence[np.ndarray], *,
                 confidence: float = 0.95, resamples: int = 2000,
                 rng: np.random.Generator | None = None) -> Ratio:
    """The change from `a` to `b`, each a list of runs' values in call order."""
    rng = rng if rng is not None else np.random.default_rng(0)
    blocked = all(len(run) >= BLOCKS * CALLS_PER_BLOCK for run in [*a, *b])
    units_a, units_b = [units(run) for run in a], [units(run) for run in b]
    centre_a, centre_b = _centre(units_a), _centre(units_b)
    ratios = _resampled(units_b, resamples, rng) / _resampled(units_a, resamples, rng) - 1
    tail = (1 - confidence) / 2
    low, high = np.quantile(ratios, [tail, 1 - tail])
    return Ratio(centre_b / centre_a - 1, centre_a, centre_b, float(low), float(high),
                 len(a), len(b), blocked)
