"""The `profile-all` command's entry point: Ctrl-C at any moment is one line and exit code
130, never a traceback and never silence, also while the command's own modules are still
being imported (the CLI imports Typer, Rich and pandas: a Ctrl-C in the first half second
once printed a 17-line KeyboardInterrupt traceback, and a little later Typer turned it into
a silent exit 130). While a run is on, the run's own stop handling has Ctrl-C instead."""

import contextlib
import gc
import os
import signal
import sys

from profile_all import after_import, std_streams

_interrupted = False


def _on_ctrl_c(signum: int, frame: object) -> None:
    global _interrupted
    _interrupted = True
    raise KeyboardInterrupt


def _say_interrupted() -> None:
    print("profile-all: interrupted (Ctrl-C)", file=sys.stderr)


def _arrow_memory_from_the_system() -> None:
    """This process's Arrow buffers (pandas' strings) from the C library's allocator, not
    Arrow's mimalloc pool: mimalloc kept what the report's tables freed, 317 MB at the peak
    of an 8-rank ingest against 230 MB (`/proc` PSS, parent and children), for no loss of
    speed. Only here, in profile-all's own process: a pass's process, and a program that
    calls the API, keep the allocator they have."""
    import pyarrow

    pyarrow.set_memory_pool(pyarrow.system_memory_pool())


def _imports_out_of_the_collectors_sight() -> None:
    """What importing pandas made (its modules, classes and functions: most of this
    process's objects, alive as long as it) hidden from the garbage collector's full
    passes (`gc.freeze`): the one such pass of an ingest, right after pandas' import,
    walked them all for 26-31 ms, and found nothing to free."""
    gc.freeze()


def _reader_gone(console: object) -> None:
    """Rich's Console, its stdout's reader gone: what `profile-all show RUN | head -1`
    meets. Rich's own answer is `SystemExit(1)`, a failure said by no one; the command ends
    as a Unix tool killed by SIGPIPE does instead (`main`: 141). The command's process
    only: a program that calls the API keeps Rich's answer."""
    raise BrokenPipeError


def main() -> None:
    std_streams.open_closed_ones()  # before anything opens a file: it would take 0-2
    if signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:  # a background job keeps it
        signal.signal(signal.SIGINT, _on_ctrl_c)
    if "pyarrow" in sys.modules:
        _arrow_memory_from_the_system()
    else:  # once something imports it (not for --help)
        after_import.call("pyarrow", _arrow_memory_from_the_system)
    after_import.call("pandas", _imports_out_of_the_collectors_sight)
    code: object = 0
    try:
        from profile_all.runner.starting import early_server

        early_server.start_for(sys.argv[1:])  # its import of torch begins before ours
        import rich.console

        rich.console.Console.on_broken_pipe = _reader_gone  # type: ignore[method-assign]
        from profile_all.cli import main as command

        command()
    except KeyboardInterrupt:
        _say_interrupted()
        code = 130
    except BrokenPipeError:  # `profile-all show RUN | head -1`: the reader stopped reading
        code = 128 + signal.SIGPIPE
    except SystemExit as ended:
        if _interrupted and ended.code == 130:  # Typer's silent exit for a KeyboardInterrupt
            _say_interrupted()
        code = ended.code
    finally:
        early = sys.modules.get("profile_all.runner.starting.early_server")
        if early is not None:
            early.discard()  # a run that never took it: the command was refused
    _exit_now(code)


def _exit_now(code: object) -> None:
    """End the process as `sys.exit(code)` would, without the interpreter's teardown:
    freeing pandas', pyarrow's and torch's modules object by object took 0.13 s of every
    run, after its report was written. Nothing of the command waits on that teardown: its
    files are written and closed, its children ended, its threads daemons."""
    if code is None:
        code = 0
    elif not isinstance(code, int):
        print(code, file=sys.stderr)
        code = 1
    for stream in (sys.stdout, sys.stderr):
        # a closed pipe: what was not read is lost either way
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    os._exit(code)
