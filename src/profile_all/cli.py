"""The `profile-all` command: a thin layer over the Python API.

The target's stdout and stderr pass through; what profile-all says (progress, the summary, paths)
goes to stderr, so `profile-all run train.py > out.txt` keeps the script's output clean (with
`--json` stdout holds the JSON alone, the script's output on stderr). Bad input: one line, exit 2.
"""

from __future__ import annotations

import contextlib
import functools
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from typer.exceptions import TyperException

from profile_all import backends as backend_registry
from profile_all import cli_attach, cli_backend_options, cli_files
from profile_all.cli_drawing import Drawing, finish
from profile_all.errors import SaveError, UsageError
from profile_all.safe_text import visible

app = typer.Typer(add_completion=True, no_args_is_help=True, pretty_exceptions_enable=False,
                  rich_markup_mode=None,
                  help="Profile PyTorch scripts with every profiler, merged into one report.")
err_console = Console(stderr=True)


def _print_version(asked: bool) -> None:
    if asked:
        from importlib.metadata import version

        print(f"profile-all {version('profile-all')}")
        raise typer.Exit()


@app.callback()
def _options(version: Annotated[bool, typer.Option(
        "--version", callback=_print_version, is_eager=True,
        help="print profile-all's version and exit")] = False) -> None:
    """Profile PyTorch scripts with every profiler, merged into one report."""


def _one_line_errors(command: Callable) -> Callable:
    """Bad input -> `profile-all: error: ...` on stderr and exit code 2, a report that
    could not be written -> the same and 74; no traceback."""

    @functools.wraps(command)
    def guarded(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except (UsageError, SaveError) as error:
            print(f"profile-all: error: {visible(str(error))}", file=sys.stderr)
            raise typer.Exit(error.exit_code) from None

    return guarded


@contextlib.contextmanager
def _stdout_kept_for_json(as_json: bool) -> Iterator[None]:
    """With --json, stdout is the JSON's alone: the target's own output (and its passes',
    which inherit the descriptor) goes to stderr meanwhile."""
    if not as_json:
        yield
        return
    sys.stdout.flush()
    saved = os.dup(1)
    os.dup2(2, 1)
    try:
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


def run(
    script: Annotated[str, typer.Argument(metavar="SCRIPT", help="the Python script to profile")],
    script_args: Annotated[list[str] | None, typer.Argument(
        metavar="[-- SCRIPT_ARGS...]", help="the script's arguments", show_default=False)] = None,
    backend: Annotated[list[str] | None, typer.Option(
        "--backend", "-b", metavar="NAME",
        help="a backend to run (repeat for several); default: "
        + ", ".join(backend_registry.DEFAULT))] = None,
    out: Annotated[Path | None, typer.Option(
        "--out", "-o", metavar="DIR",
        help="the run directory [default: reports/<timestamp>-<script>]")] = None,
    as_json: Annotated[bool, typer.Option(
        "--json", help="the run's meta and findings as JSON on stdout")] = False,
    quiet: Annotated[bool, typer.Option(
        "--quiet", "-q", help="no progress and no tables: one line with the status and the "
        "run directory")] = False,
    timeout: Annotated[float | None, typer.Option(
        metavar="SECONDS", help="seconds each pass may run; then it is stopped, where it hung "
        "is said, and the exit code is 124")] = None,
    on_timeout: Annotated[str, typer.Option(
        metavar="stop|continue", help="after a pass timed out: run no later pass that would "
        "run the script again (stop), or run them all (continue)")] = "stop",
    repeat: Annotated[int, typer.Option(
        min=1, metavar="N", help="run the clean timing pass N times, spread over the run: its "
        "repeats measure the run-to-run noise that overheads and `compare` are judged by")] = 1,
    pass_steps: Annotated[str | None, typer.Option(
        metavar="N|all", help="steps of each pass but the timing pass: its window in the "
        "timing pass's process [default: 6], or in its own, ending the script [default: 25]; "
        "all: every pass runs the script whole, each in its own process")] = None,
    max_steps: Annotated[int | None, typer.Option(min=1, metavar="N", help="every pass, "
        "the timing pass too, ends the script after N steps")] = None,
    show_output: Annotated[str, typer.Option(
        metavar="first|all|none", help="the script's output of the first pass only (every "
        "pass's is in artifacts/passN.stdout.log), of every pass, or of none")] = "first",
    fresh_processes: Annotated[bool, typer.Option(
        "--fresh-processes", help="a fresh interpreter for every pass, instead of forking each "
        "from a server that imported torch once")] = False,
    separate_passes: Annotated[bool, typer.Option(
        "--separate-passes", help="every pass in a process of its own running the script, "
        "not in windows of steps of the timing pass's process")] = False,
    nproc_per_node: Annotated[str, typer.Option(metavar="N|auto|cpu|gpu", help="torchrun: "
        "ranks on this node (auto, cpu, gpu as torchrun reads them)")] = "1",
    nnodes: Annotated[str, typer.Option(
        metavar="N|MIN:MAX", help="torchrun: nodes")] = "1",
    node_rank: Annotated[int | None, typer.Option(
        metavar="N", help="torchrun: this node's rank")] = None,
    rdzv_endpoint: Annotated[str | None, typer.Option(
        metavar="HOST:PORT", help="torchrun: rendezvous endpoint, the same on every node")]
    = None,
    rdzv_backend: Annotated[str, typer.Option(
        metavar="NAME", help="torchrun: rendezvous backend")] = "c10d",
    rdzv_id: Annotated[str, typer.Option(
        metavar="ID", help="torchrun: rendezvous id, the same on every node (each pass adds "
        "-passN)")] = "profile-all",
    **backend_flags: Any,
) -> None:
    """Run SCRIPT under every backend and merge what they measured: once, the profilers
    taking turns in windows of its steps, where they can share its process."""
    import profile_all as pa
    from profile_all.runner.watching.progress import PassProgress

    drawing = Drawing(err_console, quiet)
    with _stdout_kept_for_json(as_json):
        report = pa.run(
            script, script_args or [], backends=backend, out=out, timeout=timeout,
            options=cli_backend_options.options(backend_flags),
            launch=pa.Launch(nproc_per_node, nnodes, node_rank, rdzv_endpoint, rdzv_backend,
                             rdzv_id),
            repeat=repeat, fresh_processes=fresh_processes, separate_passes=separate_passes,
            observer=None if quiet else PassProgress(err_console),
            pass_steps=int(pass_steps) if pass_steps and pass_steps.isdigit() else pass_steps,
            max_steps=max_steps, show_output=show_output, on_timeout=on_timeout,
            command=sys.argv, meanwhile=drawing)
    finish(report, drawing, as_json)


app.command()(_one_line_errors(cli_backend_options.offering(run)))


@app.command()
@_one_line_errors
def model(
    spec: Annotated[str, typer.Argument(
        metavar="SPEC",
        help="package.module:factory or path/to/file.py:factory (returns an nn.Module)")],
    input_shape: Annotated[list[str] | None, typer.Option(
        metavar="SHAPE", help="an input's shape, like 1,3,224,224 (repeat for several inputs) "
        "[default: the factory's own, where it returns (module, example_inputs)]")] = None,
    dtype: Annotated[str, typer.Option(metavar="DTYPE",
                                       help="the model's: float32, float16, bfloat16 or float64")]
    = "float32",
    input_dtype: Annotated[str | None, typer.Option(
        metavar="DTYPE", help="the inputs', where not --dtype: int64 (or int32) makes token "
        "ids, for a language model")] = None,
    vocab_size: Annotated[int | None, typer.Option(
        min=1, metavar="N", help="integer inputs: token ids below N [default: the model's, "
        "from its nn.Embedding or config.vocab_size]")] = None,
    device: Annotated[str, typer.Option(
        metavar="auto|cpu|cuda[:N]", help="where the model runs (auto: cuda when there is one)")]
    = "auto",
    batch_size: Annotated[str | None, typer.Option(
        metavar="N|auto",
        help="N replaces the first dimension; auto searches for the best throughput")] = None,
    warmup: Annotated[int, typer.Option(min=0, metavar="N", help="iterations run before timing")]
    = 10,
    iters: Annotated[int | None, typer.Option(
        min=1, metavar="N",
        help="timed iterations [default: until the median's 95% CI is within 2%]")] = None,
    train: Annotated[bool, typer.Option(
        "--train", help="time forward, backward and an SGD step instead of inference")] = False,
    max_memory: Annotated[str | None, typer.Option(
        metavar="SIZE", help="batch search on CPU: stop before this much memory (8G, 512M)")]
    = None,
    count_on: Annotated[str, typer.Option(
        metavar="device|meta", help="device: count FLOPs where the model is timed; meta: the "
        "counters that count from shapes alone (flop-counter, thop) build and run the model on "
        "the meta device, computing nothing (a model too big for this machine)")] = "device",
    peak_flops: Annotated[float | None, typer.Option(
        metavar="FLOP/S", help="the device's peak FLOP/s, to report the fraction achieved")]
    = None,
    backend: Annotated[list[str] | None, typer.Option(
        "--backend", "-b", metavar="NAME",
        help="a backend besides the benchmark (repeat); default: "
        + ", ".join(backend_registry.DEFAULT_MODEL))] = None,
    out: Annotated[Path | None, typer.Option(
        "--out", "-o", metavar="DIR",
        help="the run directory [default: reports/<timestamp>-<factory>]")]
    = None,
    as_json: Annotated[bool, typer.Option(
        "--json", help="the run's meta and findings as JSON on stdout")] = False,
    quiet: Annotated[bool, typer.Option(
        "--quiet", "-q", help="no progress and no tables: one line with the status and the "
        "run directory")] = False,
    timeout: Annotated[float | None, typer.Option(metavar="SECONDS",
                                                  help="seconds each pass may run")] = None,
    repeat: Annotated[int, typer.Option(
        min=1, metavar="N", help="run the timing pass N times, spread among the counter passes: "
        "how far their latencies differ is shown beside each one's confidence interval")] = 1,
) -> None:
    """Benchmark a model the right way and count its FLOPs with every counter."""
    import profile_all as pa
    from profile_all.model.build import parse_shape
    from profile_all.runner.watching.progress import PassProgress

    drawing = Drawing(err_console, quiet)
    with _stdout_kept_for_json(as_json):
        report = pa.profile_model(
            spec, input_shapes=[parse_shape(text) for text in input_shape] if input_shape
            else None, dtype=dtype,
            input_dtype=input_dtype, vocab_size=vocab_size, device=device, train=train,
            warmup=warmup, iters=iters,
            batch_size=int(batch_size) if batch_size and batch_size.isdigit() else batch_size,
            max_memory=max_memory, count_on=count_on, peak_flops=peak_flops, backends=backend,
            out=out,
            timeout=timeout, repeat=repeat, observer=None if quiet else PassProgress(err_console),
            command=sys.argv, meanwhile=drawing)
    finish(report, drawing, as_json)


for command in (cli_attach.attach, cli_files.ingest, cli_files.merge, cli_files.show,
                cli_files.compare, cli_files.view):
    app.command()(_one_line_errors(command))
app.command("backends")(cli_files.list_backends)


def main(argv: list[str] | None = None) -> None:
    """The command; a usage error (a missing argument, an unknown option or choice, a value
    out of range) is one line on stderr and exit code 2, as every other bad input."""
    try:
        code = app(argv, standalone_mode=False, prog_name="profile-all")
    except TyperException as error:
        context = getattr(error, "ctx", None)
        command = context.command_path if context is not None else "profile-all"
        print(f"{command}: error: {error.format_message()} (see {command} --help)",
              file=sys.stderr)
        sys.exit(getattr(error, "exit_code", UsageError.exit_code))
    sys.exit(code if isinstance(code, int) else 0)
