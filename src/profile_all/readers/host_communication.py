"""Collectives that run on the host (gloo), and how much of their time the process
computed beside them: HTA's communication-computation overlap where the communication is
not a kernel.

A gloo collective is a `gloo:<collective>` range of the thread that runs it; computation is
any operator's time, less the collectives' own operators (`c10d::...`,
`record_param_comms`, which only hand the work to gloo's thread). Rows: scope
`host_communication`, name `gloo`: its union (`communication_time`) and the part of it any
thread spent in an operator (`communication_overlap`).
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from profile_all.readers import intervals
from profile_all.rows import row

_COLLECTIVE = ("gloo:",)
_HANDING_OVER = ("c10d::", "record_param_comms")


def host_communication_rows(annotations: pd.DataFrame, ops: pd.DataFrame, scale: float
                            ) -> list[list[Any]]:
    talking = annotations[annotations["name"].str.startswith(_COLLECTIVE)]
    if talking.empty:
        return []
    computing = ops[~ops["name"].str.startswith(_HANDING_OVER)]
    starts = talking["ts"].to_numpy(float)
    ends = starts + talking["dur"].to_numpy(float)
    busy = computing["ts"].to_numpy(float)
    return [row("host_communication", "gloo", "communication_time",
                intervals.union_length(starts, ends) * scale),
            row("host_communication", "gloo", "communication_overlap", intervals.overlap_length(
                (starts, ends), (busy, busy + computing["dur"].to_numpy(float))) * scale)]
