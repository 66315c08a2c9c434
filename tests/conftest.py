"""Shared helpers: run the real `profile-all` command in a subprocess, find the fixtures."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
TARGETS = Path(__file__).resolve().parent / "targets"
EXAMPLES = REPO / "scripts" / "examples"
SHARED_FIXTURES = REPO.parent / "shared" / "fixtures"


def profile_all(*args: str, cwd: Path | str | None = None, timeout: float = 240,
                stdin: str | None = None) -> subprocess.CompletedProcess:
    """`profile-all ARGS` as a user runs it, in a fresh process; output captured as text."""
    return subprocess.run([sys.executable, "-m", "profile_all", *map(str, args)],
                          cwd=cwd, input=stdin if stdin is not None else "",
                          capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "COLUMNS": "200"})


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture
def fixtures() -> Path:
    if not SHARED_FIXTURES.is_dir():
        pytest.fail(f"the shared fixtures are missing: {SHARED_FIXTURES}")
    return SHARED_FIXTURES


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    try:
        import torch

        has_cuda = torch.cuda.is_available()
    except ImportError:
        has_cuda = False
    if has_cuda:
        return
    skip = pytest.mark.skip(reason="CUDA is not available")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


def value_of(frame, **criteria) -> float:
    """The one value of the report rows matching every column=value given (stat defaults
    to total); fails when none or several match."""
    criteria.setdefault("stat", "total")
    picked = frame
    for column, wanted in criteria.items():
        picked = picked[picked[column] == wanted]
    return picked["value"].item()


def measured_frame(rows):
    """A backend's or reader's rows (MEASURED columns) as a DataFrame."""
    import pandas as pd

    from profile_all.report.schema import MEASURED

    return pd.DataFrame(rows, columns=MEASURED)
