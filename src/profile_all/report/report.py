"""The Report: a run's data and its views (run_data.RunData), and the analyses over them:
the findings (the answer first) and the comparison with another run."""

from __future__ import annotations

from typing import Any

import pandas as pd

from profile_all.report.compare import compare
from profile_all.report.findings import findings
from profile_all.report.run_data import RunData, timeline_frame
from profile_all.rows import COLUMNS, SAMPLE_COLUMNS
from profile_all.run_record import RunRecord


class Report(RunData):
    @classmethod
    def from_rows(cls, rows: list[list[Any]], meta: RunRecord,
                  samples: list[list[Any]] | None = None,
                  timeline: list[list[Any]] | None = None) -> Report:
        """`samples`: [backend, pass, rank, scope, name, parent, metric, [values]] each;
        `timeline`: TIMELINE_COLUMNS each."""
        frame = pd.DataFrame(rows, columns=COLUMNS)
        frame = frame.astype({"pass": "int64", "rank": "int64", "value": "float64"})
        per_call = pd.DataFrame(samples or [], columns=SAMPLE_COLUMNS).explode("value")
        per_call = per_call.dropna(subset=["value"]).astype(
            {"pass": "int64", "rank": "int64", "value": "float64"}).reset_index(drop=True)
        return cls(frame, meta, samples=per_call, timeline=timeline_frame(timeline))

    def compare(self, other: RunData, **options: Any) -> pd.DataFrame:
        """What changed from this run to `other`: see report.compare.compare."""
        return compare(self, other, **options)

    def findings(self) -> pd.DataFrame:
        """The answer first: a row per finding, most important first (report.findings)."""
        return self._once("findings", lambda: findings(self))

