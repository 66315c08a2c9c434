"""`profile-all view` serves the run's .prof with the real SnakeViz, on 127.0.0.1 only."""

from __future__ import annotations

import os
import pstats
import re
import socket
import subprocess
import sys
import time
import urllib.request

from conftest import TARGETS, free_port, profile_all_here


def test_view_serves_the_profile_on_loopback(tmp_path):
    run_dir = tmp_path / "run"
    result = profile_all_here("run", TARGETS / "contract.py", "-b", "cprofile", "-o", run_dir)
    assert result.returncode == 0, result.stderr
    prof = run_dir / "artifacts" / "cprofile.prof"
    assert pstats.Stats(str(prof)).total_calls > 0
    assert f"profile-all view {run_dir}" in result.stderr

    server = subprocess.Popen(
        [sys.executable, "-m", "profile_all", "view", str(run_dir), "--no-browser",
         "--port", str(free_port())], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True)
    try:
        deadline = time.monotonic() + 60
        url = None
        while url is None:
            assert time.monotonic() < deadline and server.poll() is None
            found = re.search(r"http://127\.0\.0\.1:\d+/snakeviz/\S+", server.stdout.readline())
            url = found and found.group(0)
        with urllib.request.urlopen(url, timeout=30) as response:
            page = response.read().decode()
        assert response.status == 200
        assert "<title>cprofile</title>" in page
        assert "contract.py" in page  # the profile data itself is in the page
        port = int(url.split(":")[2].split("/")[0])
        with socket.socket() as outside:  # not reachable on another interface
            host = socket.gethostbyname(socket.gethostname())
            if not host.startswith("127."):
                assert outside.connect_ex((host, port)) != 0
    finally:
        server.terminate()
        server.wait(timeout=30)
    with socket.socket() as probe:  # the server itself was stopped, no orphan kept serving
        assert probe.connect_ex(("127.0.0.1", port)) != 0


def test_view_without_a_display_serves_and_says_how_to_reach_it(tmp_path):
    """An SSH session: no display, so no browser SnakeViz can open (it printed its usage
    and exit 2). view serves all the same, prints the URL and the SSH tunnel to it."""
    run_dir = tmp_path / "run"
    assert profile_all_here("run", TARGETS / "contract.py", "-b", "cprofile", "-o",
                            run_dir).returncode == 0
    port = free_port()
    env = {key: value for key, value in os.environ.items()
           if key not in ("DISPLAY", "WAYLAND_DISPLAY")}
    server = subprocess.Popen(
        [sys.executable, "-m", "profile_all", "view", str(run_dir), "--port", str(port)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    try:
        said = server.stdout.readline()
        assert said.startswith("profile-all: no display (DISPLAY and WAYLAND_DISPLAY are "
                               "unset): serving only; open the URL below"), said
        assert f"ssh -N -L {port}:127.0.0.1:{port} " in said
        deadline, url = time.monotonic() + 60, None
        while url is None:
            assert time.monotonic() < deadline and server.poll() is None
            found = re.search(r"http://127\.0\.0\.1:\d+/snakeviz/\S+", server.stdout.readline())
            url = found and found.group(0)
        with urllib.request.urlopen(url, timeout=30) as response:
            assert response.status == 200 and "contract.py" in response.read().decode()
    finally:
        server.terminate()
        server.wait(timeout=30)
    with socket.socket() as probe:
        assert probe.connect_ex(("127.0.0.1", port)) != 0
