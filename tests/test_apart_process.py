"""A program started apart from this process (backends/apart_process.py): not its
descendant even where this process is a subreaper, followed and signalled through a
pidfd, this process's subreaper setting as it was."""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys

import psutil
import pytest

from profile_all.backends import apart_process

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux only")


def _subreaper() -> int:
    said = ctypes.c_int(0)
    ctypes.CDLL(None, use_errno=True).prctl(37, ctypes.byref(said), 0, 0, 0)
    return said.value


@pytest.fixture
def as_a_worker():
    """This process the subreaper of its descendants, as a pass's worker is."""
    libc = ctypes.CDLL(None, use_errno=True)
    before = _subreaper()
    libc.prctl(36, 1, 0, 0, 0)
    yield
    libc.prctl(36, before, 0, 0, 0)


def test_the_program_is_no_descendant_and_is_followed_to_its_end(tmp_path, as_a_worker):
    log = tmp_path / "log"
    apart = apart_process.start([sys.executable, "-c",
                                 "import time; print('up', flush=True); time.sleep(60)"], log)
    try:
        assert apart.poll() is None
        assert apart.pid not in {child.pid for child in psutil.Process().children(True)}
        assert psutil.Process(apart.pid).ppid() != os.getpid()
        assert _subreaper() == 1  # as it was
        with pytest.raises(subprocess.TimeoutExpired):
            apart.wait(0.2)
        apart.send_signal(signal.SIGTERM)
        assert apart.wait(60) == 0 and apart.poll() == 0  # (its status is not ours)
        apart.send_signal(signal.SIGTERM)  # ended: nothing is signalled
    finally:
        apart.kill()
    assert "up" in log.read_text()


def test_output_goes_to_the_log_and_stdin_is_empty(tmp_path):
    log = tmp_path / "log"
    apart = apart_process.start(["/bin/sh", "-c", "cat; echo said; echo worried >&2"], log)
    apart.wait(60)
    assert log.read_text().split() == ["said", "worried"]


def test_a_program_that_cannot_run_ends_at_once_and_says_why(tmp_path):
    log = tmp_path / "log"
    apart = apart_process.start([str(tmp_path / "missing")], log)
    apart.wait(60)
    assert "missing" in log.read_text()
