"""One finding, and what the rules share: which backend times regions, the step times."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pandas as pd

from profile_all.report import sampling

if TYPE_CHECKING:
    from profile_all.report.run_data import RunData

#: Report.findings()'s columns: the rule, the sentence, how much (a share of step or run
#: time, and an amount in `unit`), the evidence (which backends and rows), what to try
COLUMNS = ["rule", "finding", "share", "amount", "unit", "evidence", "try"]


@dataclass(frozen=True)
class Finding:
    rule: str
    finding: str
    #: the order: most important first (a share of time where there is one)
    weight: float
    share: float = math.nan
    amount: float = math.nan
    unit: str = ""
    evidence: str = ""
    suggestion: str = ""

    def as_row(self) -> list[object]:
        return [self.rule, self.finding, self.share, self.amount, self.unit, self.evidence,
                self.suggestion]


def timer(report: RunData) -> tuple[str, str] | None:
    """(backend, metric) of the backend that times regions and steps on the host."""
    for name, facts in report.facts.items():
        if facts.region_timer == "wall_time":
            return name, "wall_time"
    return None


def totals(report: RunData, backend: str, scope: str, metric: str = "wall_time",
           stat: str = "total") -> pd.DataFrame:
    """(name, parent, value) of `backend`'s `scope` rows, the median over passes and ranks."""
    frame = report.scoped(scope)
    picked = frame[(frame["backend"] == backend) & (frame["metric"] == metric)
                   & (frame["stat"] == stat)]
    return picked.groupby(["name", "parent"], sort=False)["value"].median().reset_index()


def step_samples(report: RunData, backend: str) -> pd.Series:
    """Each step's time in order, from `backend`'s first pass and rank that has them."""
    samples = report.samples
    steps = samples[(samples["backend"] == backend) & (samples["scope"] == "step")]
    if steps.empty:
        return pd.Series(dtype="float64")
    first = steps[(steps["pass"] == steps["pass"].min()) & (steps["rank"] == steps["rank"].min())]
    return first["value"].reset_index(drop=True)


def base_time(report: RunData, backend: str, longest: float = 0.0) -> tuple[float, str]:
    """(the time shares are of, what it is): all steps, else the whole run; the whole run
    too when the steps are shorter than the `longest` thing to be shared out (a region
    outside the steps: 5.7 s of sleep after 0.28 s of steps was "2035.9% of the step time")."""
    steps = totals(report, backend, "step")
    if not steps.empty and steps["value"].sum() > max(longest, 0.0):
        return float(steps["value"].sum()), "step time"
    run = totals(report, backend, "run")
    run = run[run["name"] == "run"]
    return (float(run["value"].iloc[0]), "run time") if not run.empty else (math.nan, "")


def latency_doubt(report: RunData) -> str:
    """What a figure resting on a model's median latency must say beside it when that
    latency was unstable (its coefficient of variation over 10%): '' when it was not."""
    model = report.meta.model
    if not model.get("unstable"):
        return ""
    return (f"; the latency it rests on is unstable (coefficient of variation "
            f"{model['cv']:.0%}, over 10%): take it as rough")


def few_samples(report: RunData, backend: str) -> tuple[str, float]:
    """(what to say, how much to trust) of shares from a sampler that took fewer than
    sampling.MIN_SAMPLES samples: one sample of a 22 ms window made a full bar that led
    the findings."""
    if backend not in sampling.sampled_backends(report.facts):
        return "", 1.0
    frame = report.scoped("run")
    taken = float(frame[(frame["backend"] == backend)
                        & (frame["metric"] == "samples")]["value"].sum())
    if taken >= sampling.MIN_SAMPLES:
        return "", 1.0
    return (f" (from {taken:,.0f} sample{'s' if taken != 1 else ''} only: a rough share; "
            "more steps, or a higher sampling rate, give more)",
            taken / sampling.MIN_SAMPLES)
