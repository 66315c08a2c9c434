"""Memory by what holds it (rows `held_memory`, from torch's memory profile): per device,
the whole pass at its peak and each step at its end and at its peak, a column per
category."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pandas as pd

if TYPE_CHECKING:
    from profile_all.report.run_data import RunData

CATEGORIES = ["parameters", "gradients", "optimizer_state", "activations", "temporaries",
              "inputs", "autograd", "other"]
COLUMNS = ["device", "step", "moment", *CATEGORIES, "total", "largest", "pass", "rank"]


def held_memory(frame: pd.DataFrame) -> pd.DataFrame:
    """A row per device, step ("" for the whole pass) and moment (`at_end`, `at_peak`, and
    `max`: each category's own largest, at different moments): bytes per category, their
    total (at `max`, no moment's), and the largest category."""
    rows = frame[(frame["scope"] == "held_memory") & (frame["name"].isin(CATEGORIES))]
    if rows.empty:
        return pd.DataFrame(columns=COLUMNS)
    place = rows["parent"].str.partition("/")
    rows = rows.assign(device=place[0], step=place[2], moment=rows["stat"])
    table = rows.pivot_table(index=["pass", "rank", "device", "step", "moment"],
                             columns="name", values="value", aggfunc="sum")
    table = table.reindex(columns=CATEGORIES).fillna(0.0)
    table["total"] = table[CATEGORIES].sum(axis=1).where(
        table.index.get_level_values("moment") != "max")  # maxima at different moments
    table["largest"] = table[CATEGORIES].idxmax(axis=1)
    table = table.reset_index().rename_axis(columns=None)
    number = pd.to_numeric(table["step"].str.removeprefix("step "), errors="coerce")
    table = table.assign(_number=number.fillna(-1)).sort_values(
        ["pass", "rank", "device", "_number", "moment"])
    return table[COLUMNS].reset_index(drop=True)


def of(data: RunData) -> pd.DataFrame:
    """`held_memory(data.frame)`, made once per frame for the Report, its findings and its
    sections."""
    return data.once("held_memory", lambda: held_memory(data.scoped("held_memory")))
