"""The fork server's start said as it goes and bounded (runner/server_start.py): a module
whose import hangs makes profile-all say what it waits for, ask the server for its stack
(which shows the import where it is stuck), and give up at the limit in one line, the
server ended. The limits are shortened here; the import really hangs."""

from __future__ import annotations

import os

import psutil
import pytest

from profile_all.runner import forkserver, server_start


def test_a_hanging_import_is_said_dumped_and_bounded(tmp_path, monkeypatch, capfd):
    (tmp_path / "hangs_on_import.py").write_text(
        "import time\n\ndef stuck_here():\n    time.sleep(60)\n\nstuck_here()\n")
    monkeypatch.setattr(server_start, "NOTE_EVERY", 0.3)
    monkeypatch.setattr(server_start, "DUMP_AFTER", 1.0)
    monkeypatch.setattr(server_start, "START_LIMIT", 2.5)
    env = dict(os.environ, PYTHONPATH=f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    server = forkserver.ForkServer(["json", "hangs_on_import"], env)
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
