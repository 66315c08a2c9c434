"""The fork server's start said as it goes and bounded (runner/starting/server_start.py): a module
whose import hangs makes profile-all say what it waits for, ask the server for its stack
(which shows the import where it is stuck), and give up at the limit in one line, the
server ended. The limits are shortened here; the import really hangs."""

from __future__ import annotations

import contextlib
import os
import signal
import time

import psutil
import pytest

import profile_all as pa
from conftest import Running, processes_with
from profile_all.runner.starting import server_handle, server_start


def test_a_hanging_import_is_said_dumped_and_bounded(tmp_path, monkeypatch, capfd):
    (tmp_path / "hangs_on_import.py").write_text(
        "import time\n\ndef stuck_here():\n    time.sleep(60)\n\nstuck_here()\n")
    monkeypatch.setattr(server_start, "NOTE_EVERY", 0.3)
    monkeypatch.setattr(server_start, "DUMP_AFTER", 1.0)
    monkeypatch.setattr(server_start, "START_LIMIT", 2.5)
    env = dict(os.environ, PYTHONPATH=f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    server = server_handle.ForkServer(["json", "hangs_on_import"], env)
    try:
        with pytest.raises(server_start.StartStalled, match=r"did not get ready in 2 s \(it was "
                                                           r"importing hangs_on_import"):
            server.wait_ready()
        server.process.wait(10)
        assert not psutil.pid_exists(server.process.pid) or \
            psutil.Process(server.process.pid).status() == psutil.STATUS_ZOMBIE
    finally:
        server.close()
    err = capfd.readouterr().err
    assert "profile-all: waiting for the fork server: importing hangs_on_import, " in err
    assert "stuck_here" in err and "hangs_on_import.py" in err  # the server's own stack


def test_a_pass_is_the_leader_of_its_own_group_once_its_pid_is_said(tmp_path):
    """profile-all stops a pass by signalling its process group. The server says the
    pass's pid only once the child has made its session: a SIGTERM sent just after the
    start used to find no such group, and the pass ran on to its grace and a SIGKILL. The
    spec is a FIFO nobody writes, so the worker blocks reading it, as a pass just started."""
    server = server_handle.ForkServer(["json"], dict(os.environ))
    try:
        for number in range(5):
            spec = tmp_path / f"pass{number}.spec.json"
            os.mkfifo(spec)
            started = server.start(spec, dict(os.environ))
            assert os.getpgid(started.pid) == started.pid
            os.killpg(started.pid, signal.SIGTERM)
            assert started.wait(30) == -signal.SIGTERM
    finally:
        server.close()


def test_a_stop_while_the_server_imports_ends_the_run_without_waiting_for_it(tmp_path):
    """SIGHUP (as SIGTERM, Ctrl-C) while the fork server still imports: the run ends at
    once as interrupted, its pass said never to have started; nothing left running."""
    (tmp_path / "sitecustomize.py").write_text(  # the server's start hangs, only its
        "import sys, time\n"
        "if 'profile_all.runner.starting.forkserver' in sys.orig_argv:\n    time.sleep(120)\n")
    script = tmp_path / "script.py"
    script.write_text("print('ran')\n")
    run_dir = tmp_path / "run"
    env = {"PYTHONPATH": f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    with Running("run", script, "-b", "wallclock", "-o", run_dir, env=env) as running:
        server = _wait_for_server(running.process.pid)
        # the server starts as the command does; the run's stop handling, once its folder is
        _wait_for(lambda: any(tmp_path.glob(".run.partial-*")))
        os.kill(running.process.pid, signal.SIGHUP)
        assert running.finish(30) == 129, running.stderr
    assert not server.is_running() or server.status() == psutil.STATUS_ZOMBIE
    report = pa.load(run_dir)
    first = report.meta.passes[0]
    assert first.status == "interrupted" and first.logs == []
    assert first.error == ("interrupted: profile-all got SIGHUP before the pass's process "
                              "started: nothing measured")
    assert report.findings().iloc[0]["finding"].startswith("the run was stopped in pass 1: ")
    assert processes_with(str(tmp_path)) == []


def _wait_for_server(pid: int) -> psutil.Process:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        for child in psutil.Process(pid).children():
            with contextlib.suppress(psutil.Error):
                if "profile_all.runner.starting.forkserver" in child.cmdline():
                    return child
        time.sleep(0.05)
    raise AssertionError("no fork server started")


def _wait_for(condition) -> None:
    deadline = time.monotonic() + 60
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("waited 60 s")
        time.sleep(0.05)
