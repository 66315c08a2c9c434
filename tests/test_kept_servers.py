"""`pa.keep_servers()`: a run leaves its fork server ready for the next run of the same
modules and environment in this process, and a pass forked from a kept server starts as
one forked from a new server would (its folder, sys.path, environment, random seeds);
nothing of it outlives the keeping, and a kept server that was killed costs nothing."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import psutil

import profile_all as pa
from conftest import profile_all_here

#: what a pass sees of its process, and a random draw of each generator
SEES = textwrap.dedent("""
    import os, random, sys
    import torch
    print("parent", os.getppid(), flush=True)
    print("cwd", os.getcwd())
    print("said", os.environ.get("KEPT_TEST_SAYS", "-"))
    print("draws", random.random(), torch.rand(1).item())
""")


def _seen(output: str) -> dict[str, str]:
    return dict(line.split(" ", 1) for line in output.splitlines()
                if line.split(" ", 1)[0] in ("parent", "cwd", "said", "draws"))


def _servers() -> set[int]:
    """Fork servers running as children of this process."""
    return {child.pid for child in psutil.Process().children()
            if "profile_all.runner.starting.forkserver" in " ".join(child.cmdline())
            and child.status() != psutil.STATUS_ZOMBIE}


def _run(script, out, cwd=None, env=None) -> dict[str, str]:
    done = profile_all_here("run", script, "-b", "wallclock", "-o", out, cwd=cwd, env=env)
    assert done.returncode == 0, done.stderr
    return _seen(done.stdout)


def test_the_second_run_forks_from_the_first_run_s_server_and_nothing_outlives_it(tmp_path):
    script = tmp_path / "sees.py"
    script.write_text(SEES)
    before = _servers()
    with pa.keep_servers() as kept:
        first = _run(script, tmp_path / "one")
        held = _servers() - before
        assert len(held) == 1 and len(kept) == 1
        elsewhere = tmp_path / "elsewhere"
        elsewhere.mkdir()
        second = _run(script, tmp_path / "two", cwd=elsewhere)
        assert _servers() - before == held  # the same server: no other was started
    assert _servers() - before == set()  # ended with the keeping
    assert first["parent"] == second["parent"] == str(*held)
    assert (first["cwd"], second["cwd"]) == (os.getcwd(), str(elsewhere))
    assert first["draws"] != second["draws"]  # each child seeded afresh, as a new process
    assert pa.load(tmp_path / "one").meta.process_start == "fork"
    assert pa.load(tmp_path / "two").meta.process_start == \
        "fork from a server kept from an earlier run"


def test_a_run_in_another_environment_starts_its_own_server(tmp_path):
    script = tmp_path / "sees.py"
    script.write_text(SEES)
    with pa.keep_servers(limit=1) as kept:
        plain = _run(script, tmp_path / "one")
        said = _run(script, tmp_path / "two", env={"KEPT_TEST_SAYS": "hello"})
        assert len(kept) == 1  # the limit: the first run's server was ended
    assert plain["parent"] != said["parent"]
    assert (plain["said"], said["said"]) == ("-", "hello")
    assert pa.load(tmp_path / "two").meta.process_start == "fork"


def test_a_kept_server_killed_between_runs_is_replaced_and_the_run_loses_nothing(tmp_path):
    script = tmp_path / "sees.py"
    script.write_text(SEES)
    with pa.keep_servers():
        first = _run(script, tmp_path / "one")
        os.kill(int(first["parent"]), signal.SIGKILL)
        second = _run(script, tmp_path / "two")
    assert second["parent"] != first["parent"]
    report = pa.load(tmp_path / "two")
    assert report.meta.status == "complete" and report.meta.process_start == "fork"
    assert not [doubt for doubt in report.meta.doubts if "fork server" in doubt]


def test_a_model_s_module_is_found_in_the_working_folder_of_its_own_run(tmp_path):
    """A server kept from a run in one folder: the next run's model module, found on
    sys.path from the folder it runs in (as `python -m` puts it there), is that folder's."""
    for name, width in (("a", 3), ("b", 5)):
        (tmp_path / name).mkdir()
        (tmp_path / name / f"only_in_{name}.py").write_text(
            f"import torch\n\ndef make():\n    return torch.nn.Linear(4, {width})\n")
    with pa.keep_servers():
        for name in ("a", "b"):
            done = profile_all_here("model", f"only_in_{name}:make", "--input-shape", "2,4",
                                    "--iters", "5", "--warmup", "1", "-b", "flop-counter",
                                    "-o", tmp_path / name / "run", cwd=tmp_path / name)
            assert done.returncode == 0, done.stderr
    # nn.Linear(4, 5) on a batch of 2: 2 * 2 * 4 * 5 FLOPs
    flops = pa.load(tmp_path / "b" / "run").frame.query("metric == 'flops'")["value"]
    assert 80 in set(flops)
    assert pa.load(tmp_path / "b" / "run").meta.process_start.startswith(
        "fork from a server kept from an earlier run")


def test_servers_kept_by_a_program_end_when_it_exits(tmp_path):
    script = tmp_path / "sees.py"
    script.write_text(SEES)
    program = tmp_path / "keeps.py"
    program.write_text(textwrap.dedent(f"""
        import profile_all as pa
        pa.keep_servers()
        pa.run({str(script)!r}, backends=["wallclock"], out={str(tmp_path / "run")!r},
               observer=False)
    """))
    done = subprocess.run([sys.executable, str(program)], capture_output=True, text=True,
                          timeout=240)
    assert done.returncode == 0, done.stderr
    server = int(_seen(done.stdout)["parent"])
    deadline = time.monotonic() + 30
    while psutil.pid_exists(server) and time.monotonic() < deadline:
        try:
            if psutil.Process(server).status() == psutil.STATUS_ZOMBIE:
                break
        except psutil.NoSuchProcess:
            break
        time.sleep(0.05)
    assert not psutil.pid_exists(server) or \
        psutil.Process(server).status() == psutil.STATUS_ZOMBIE


def test_a_child_forked_while_servers_are_kept_neither_uses_nor_ends_them(tmp_path):
    """A process forked from a program that keeps servers (a worker of its own) that ends
    as an interpreter does, its exit functions run, ended the kept servers: they are its
    parent's."""
    import atexit

    script = tmp_path / "sees.py"
    script.write_text(SEES)
    with pa.keep_servers() as kept:
        first = _run(script, tmp_path / "one")
        child = os.fork()
        if child == 0:  # as `sys.exit` would end it, outside pytest's hands
            seen = len(kept)
            atexit._run_exitfuncs()
            os._exit(seen)
        _pid, status = os.waitpid(child, 0)
        assert os.waitstatus_to_exitcode(status) == 0  # it saw nothing kept
        second = _run(script, tmp_path / "two")
    assert second["parent"] == first["parent"]  # the server the child's exit did not end
