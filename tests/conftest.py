"""Shared helpers: run the real `profile-all` command in a subprocess, find the fixtures."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
TARGETS = Path(__file__).resolve().parent / "targets"
EXAMPLES = REPO / "scripts" / "examples"
#: one OpenMP thread a process (what a user's environment says wins): the suite's two workers
#: share two cores, and torch's two threads a process spun at barriers for a share of the
#: suite's CPU, as profile-all's own finding on such runs says (79% of a small training's
#: samples in libgomp); every subprocess a test starts inherits it
os.environ.setdefault("OMP_NUM_THREADS", "1")
#: a test worker of pytest-xdist has COLUMNS=80 in its environment (a plain `pytest` has
#: none): a Rich console made at import (the CLI's) would keep those 80 columns for good,
#: where the CLI in a process of its own gets the width its test asks for
os.environ.pop("COLUMNS", None)

#: other projects' files: ../shared/fixtures beside the clone (CI), or where
#: PROFILE_ALL_FIXTURES points
SHARED_FIXTURES = Path(os.environ.get("PROFILE_ALL_FIXTURES")
                       or REPO.parent / "shared" / "fixtures")


def profile_all(*args: str, cwd: Path | str | None = None, timeout: float = 240,
                stdin: str | None = None,
                env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """`profile-all ARGS` as a user runs it, in a fresh process; output captured as text;
    `env`: variables added to ours."""
    return subprocess.run([sys.executable, "-m", "profile_all", *map(str, args)],
                          cwd=cwd, input=stdin if stdin is not None else "",
                          capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "COLUMNS": "200", **(env or {})})


def profile_all_here(*args: str, cwd: Path | str | None = None,
                     env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """`profile-all ARGS` run by the CLI's own `main` in this process, as `profile_all`
    returns it: for a command whose test checks what is measured, read, written and said,
    not how the command's own process starts or ends. A fresh interpreter's imports are
    most of a command that reads a file (an ingest of a run's trace: 0.15 s here, 0.75 s
    in a process of its own, 2-core VM, 2026-11-28) and 0.7 CPU-s of every run. Its output
    is caught where a subprocess's is, on file descriptors 1 and 2, so that what the run's
    passes print (processes of their own) comes in the order it came. The tests of the
    command's process (signals, closed descriptors, names that are not UTF-8, what the
    process imports, files read side by side in forked processes, which a process with
    threads, as a test worker, does not fork) use `profile_all`."""
    import tempfile
    import traceback

    import profile_all
    from profile_all import cli

    saved = dict(os.environ), os.getcwd(), sys.argv
    os.environ.update({"COLUMNS": "200", **(env or {})})
    command = [str(Path(profile_all.__file__).parent / "__main__.py"), *map(str, args)]
    sys.argv = command  # what the report's meta.json keeps as the command
    code: object = 0
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err, \
            _on_descriptors(out, err) as (stdout, stderr):
        try:
            if cwd is not None:
                os.chdir(cwd)
            with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
                try:
                    cli.main(command[1:])
                except SystemExit as ended:
                    code = ended.code
                except Exception:  # as Python says an uncaught exception: its traceback
                    traceback.print_exc()
                    code = 1
        finally:
            os.environ.clear()
            os.environ.update(saved[0])
            os.chdir(saved[1])
            sys.argv = saved[2]
        said = [_read_back(file) for file in (out, err)]
    code = 0 if code is None else code if isinstance(code, int) else 1
    return subprocess.CompletedProcess(command, code, *said)


@contextlib.contextmanager
def _on_descriptors(out, err):
    """Descriptors 1 and 2 on `out` and `err` (files) while the block runs, and text
    streams that write through to them, flushed at each write as a pipe's reader sees."""
    import io

    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    saved = os.dup(1), os.dup(2)
    os.dup2(out.fileno(), 1)
    os.dup2(err.fileno(), 2)
    streams = [io.TextIOWrapper(io.FileIO(fd, "w", closefd=False), encoding="utf-8",
                                errors=errors, write_through=True, line_buffering=True)
               for fd, errors in ((1, "strict"), (2, "backslashreplace"))]
    try:
        yield streams
    finally:
        for stream in streams:
            with contextlib.suppress(ValueError):
                stream.flush()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        os.close(saved[0])
        os.close(saved[1])


def _read_back(file) -> str:
    """As `subprocess.run(text=True)` reads a pipe: newlines of every kind made \\n."""
    import io

    file.seek(0)
    return io.TextIOWrapper(file, encoding="utf-8", errors="replace", newline=None).read()


@pytest.fixture(scope="session", autouse=True)
def _kept_fork_servers():
    """The runs this test worker makes in its own process (`profile_all_here`, `pa.run`)
    take the fork server an earlier run of the same modules and environment left ready
    (`pa.keep_servers`): a new server's imports are 2.3 to 3.2 CPU-s of each run here.
    A test of how a run starts and ends a server of its own asks for `own_servers`."""
    import profile_all as pa

    with pa.keep_servers(limit=6):
        yield


@pytest.fixture
def own_servers():
    """This test's runs start and end a fork server each, as a command's run does."""
    import profile_all as pa

    with pa.keep_servers(limit=0):
        yield


def _without_test_name():
    """While a fixture is made or a test runs, the environment `profile_all_here` gives its
    commands (COLUMNS=200), without pytest's name of the running test (PYTEST_CURRENT_TEST):
    a run's fork server is kept for runs of the same environment, which that variable made
    every test's own, and COLUMNS the API's runs' apart from the commands'."""
    saved = {name: os.environ.get(name) for name in ("PYTEST_CURRENT_TEST", "COLUMNS")}
    os.environ.pop("PYTEST_CURRENT_TEST", None)
    os.environ["COLUMNS"] = "200"
    try:
        return (yield)
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


pytest_fixture_setup = pytest.hookimpl(wrapper=True)(
    lambda fixturedef, request: (yield from _without_test_name()))
pytest_pyfunc_call = pytest.hookimpl(wrapper=True)(
    lambda pyfuncitem: (yield from _without_test_name()))


#: a process of the second user tests run beside root: setpriv's command line
AS_NOBODY = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"]


def second_user_cannot() -> str:
    """Why these tests cannot run a process as a second user (nobody) here; '' when they
    can: root, setpriv, and a checkout nobody can read (one made by `mktemp -d` is root's
    alone: its targets never started)."""
    import shutil

    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        return "needs root and setpriv to run a process as a second user (nobody)"
    probe = subprocess.run(
        [*AS_NOBODY, sys.executable, "-c",
         f"import profile_all; open({str(TARGETS / 'listening_loop.py')!r}).close()"],
        capture_output=True, text=True, timeout=120, cwd="/")
    if probe.returncode:
        said = (probe.stderr.strip().splitlines() or ["?"])[-1]
        return f"the second user (nobody) cannot read this checkout or its Python: {said}"
    return ""


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


#: set by .ci/run where ../shared/fixtures is there: the tests on them must run, not skip
REQUIRE_FIXTURES = os.environ.get("PROFILE_ALL_REQUIRE_FIXTURES") == "1"


@pytest.fixture
def fixtures() -> Path:
    """The real files other projects made (../shared/fixtures): a user's clone has none,
    and the tests that read them skip there; CI has them and must run these tests."""
    if not SHARED_FIXTURES.is_dir():
        if REQUIRE_FIXTURES:
            pytest.fail(f"PROFILE_ALL_REQUIRE_FIXTURES=1 but {SHARED_FIXTURES} is missing")
        pytest.skip(f"the shared fixtures of other projects' files are not beside this clone "
                    f"({SHARED_FIXTURES}); CI has them")
    return SHARED_FIXTURES


#: the test files that took longest (30 s or more of the suite's 1,355 s of test time, 2-core
#: VM, 2026-11-28), longest first: they start first, so that the two workers (a file each,
#: `--dist loadfile`) do not end with one of them alone on a long file
LONGEST_FIRST = ("test_docs_commands", "test_distributed", "test_attach", "test_attach_safety",
                 "test_compare", "test_failures", "test_hostile_files", "test_trace_analyses",
                 "test_model_cli", "test_distributed_failures", "test_trust", "test_compiled",
                 "test_windows", "test_ingest_cli", "test_bad_input", "test_run_once",
                 "test_self_profiling", "test_reader_fuzz", "test_frameworks")


def _started_longest_first(items: list[pytest.Item]) -> None:
    rank = {name: place for place, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.stem, len(rank)))  # stable: else as found


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    _started_longest_first(items)
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

    from profile_all.rows import MEASURED

    return pd.DataFrame(rows, columns=MEASURED)


def write_torch_trace(path: Path, rank: int | None = None) -> Path:
    """A real torch.profiler trace of a tiny training step, made here (CPU), gzipped when
    `path` ends in .gz; with `rank`, the distributedInfo a rank's trace carries."""
    import gzip
    import json

    import torch

    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
    with torch.profiler.profile() as profile:
        for step in range(2):
            with torch.autograd.profiler.record_function("forward"):
                loss = model(torch.randn(8, 16)).sum()
            loss.backward()
            profile.step() if step == 0 else None
    plain = path.with_suffix("") if path.suffix == ".gz" else path
    profile.export_chrome_trace(str(plain))
    if rank is not None:
        document = json.loads(plain.read_text())
        document["distributedInfo"] = {"backend": "gloo", "rank": rank, "world_size": 2}
        plain.write_text(json.dumps(document))
    if path.suffix == ".gz":
        path.write_bytes(gzip.compress(plain.read_bytes()))
        plain.unlink()
    return path


@pytest.fixture(scope="session")
def own_trace(tmp_path_factory) -> Path:
    """A torch.profiler trace (.json.gz) made by the tests, for the readers' own logic."""
    return write_torch_trace(tmp_path_factory.mktemp("own_trace") / "trace.json.gz")


class Running:
    """`profile-all ARGS` started in a session of its own, its stdout read by a thread, so
    that waiting for a line has a deadline; on leaving, whatever is left of it is killed.
    `sigint_ignored`: started as a shell starts a background job (SIGINT ignored); `env`:
    what to add to its environment."""

    def __init__(self, *args: str, sigint_ignored: bool = False,
                 env: dict[str, str] | None = None) -> None:
        import queue
        import signal
        import threading

        disposition = signal.SIG_IGN if sigint_ignored else signal.SIG_DFL
        self.process = subprocess.Popen(
            [sys.executable, "-m", "profile_all", *map(str, args)], stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True, start_new_session=True,
            preexec_fn=lambda: signal.signal(signal.SIGINT, disposition),
            env={**os.environ, "COLUMNS": "200", **(env or {})})
        self.lines: queue.Queue[str | None] = queue.Queue()
        self._stderr: list[str] = []

        def read() -> None:
            for line in self.process.stdout:
                self.lines.put(line.rstrip("\n"))
            self.lines.put(None)

        self._readers = [threading.Thread(target=read, daemon=True),
                         threading.Thread(target=lambda: self._stderr.extend(
                             self.process.stderr), daemon=True)]
        for reader in self._readers:
            reader.start()

    def wait_for(self, wanted: str, timeout: float = 90) -> None:
        import queue
        import time

        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self.lines.get(timeout=max(0.1, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(f"no {wanted!r} line within {timeout} s") from None
            if line is None:
                raise AssertionError(f"profile-all ended before printing {wanted!r}")
            if line.strip() == wanted:
                return

    def finish(self, timeout: float = 90) -> int:
        """Its exit code, once it ended (within `timeout`)."""
        self.process.wait(timeout)
        for reader in self._readers:
            reader.join(10)
        return self.process.returncode

    @property
    def stderr(self) -> str:
        return "".join(self._stderr)

    def __enter__(self) -> Running:
        return self

    def __exit__(self, *exc: object) -> None:
        import contextlib
        import signal

        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(30)


def processes_with(text: str) -> list[str]:
    """Command lines of running processes (zombies aside) that mention `text`."""
    import psutil

    found = []
    for process in psutil.process_iter(["cmdline", "status"]):
        cmdline = " ".join(process.info["cmdline"] or [])
        if text in cmdline and process.info["status"] != psutil.STATUS_ZOMBIE:
            found.append(cmdline)
    return found
