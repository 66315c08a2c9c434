"""torch.compile's own ranges in a torch.profiler trace, and the steps that hold one.

`dynamo_timed` names its ranges "X (dynamo_timed)" beside a plain "X", some hold
"compile_id=0/0"; the outermost are these. They are compiling, not the user's operators
or regions: the report shows them as compile time (report/compilation.py).

Per-step statistics of a trace's steps (ProfilerStep#N) leave out, as the wall-clock
timer's do (ARCHITECTURE.md, "What a step spans"), #0 (from the profiler's start to the
first step: whatever came before it) and every step that holds a compile range.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from profile_all.readers.chrome_trace import STEP_PREFIX

TIMED = " (dynamo_timed)"
OUTERMOST = ("dynamo", "entire_frame_compile", "backend_compile")


def compiling(names: pd.Series) -> pd.Series:
    """Which of `names` are torch.compile's own ranges."""
    names = names.astype(str)
    timed = names.str.endswith(TIMED)
    twins = set(names[timed].str.removesuffix(TIMED)) | set(OUTERMOST)
    return timed | names.isin(twins) | names.str.contains("compile_id=", regex=False)


def left_out_steps(annotations: pd.DataFrame) -> np.ndarray:
    """Per annotation (name, ts, dur): whether it is a step that per-step statistics leave
    out: ProfilerStep#0, or one that overlaps a compile range."""
    names = annotations["name"].astype(str)
    steps = names.str.startswith(STEP_PREFIX).to_numpy()
    first = (names == f"{STEP_PREFIX}0").to_numpy()
    compile_mask = compiling(names).to_numpy()
    if not compile_mask.any():
        return first
    starts = annotations["ts"].to_numpy(float)
    ends = starts + annotations["dur"].to_numpy(float)
    begun, ended = starts[compile_mask], ends[compile_mask]
    held = np.array([bool(np.any((begun < end) & (ended > start)))
                     for start, end in zip(starts, ends, strict=True)])
    return steps & (first | held)
