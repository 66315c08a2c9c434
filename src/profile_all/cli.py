"""The `profile-all` command: a thin layer over the Python API.

The target's own stdout and stderr pass through; what profile-all says (progress, the
summary, paths) goes to stderr, so `profile-all run train.py > out.txt` keeps the script's
output clean. Bad input is one line on stderr and exit code 2.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from enum import Enum
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table
from typer.exceptions import TyperException

from profile_all import backends as backend_registry
from profile_all.errors import UsageError

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Profile PyTorch scripts with every profiler, merged into one report.")
err_console = Console(stderr=True)


def _one_line_errors(command: Callable) -> Callable:
    """Bad input -> `profile-all: error: ...` on stderr and exit code 2, no traceback."""

    @functools.wraps(command)
    def guarded(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except UsageError as error:
            print(f"profile-all: error: {error}", file=sys.stderr)
            raise typer.Exit(UsageError.exit_code) from None

    return guarded


@app.command()
@_one_line_errors
def run(
    script: Annotated[str, typer.Argument(help="the Python script to profile")],
    script_args: Annotated[list[str] | None, typer.Argument(
        help="the script's own arguments, after --", show_default=False)] = None,
    backend: Annotated[list[str] | None, typer.Option(
        "--backend", "-b", help="a backend to run (repeat for several); default: "
        + ", ".join(backend_registry.DEFAULT))] = None,
    out: Annotated[Path | None, typer.Option(
        "--out", "-o", help="the run directory [default: reports/<timestamp>-<script>]")] = None,
    timeout: Annotated[float | None, typer.Option(
        help="seconds each pass may run; then it is stopped and the exit code is 124")] = None,
    repeat: Annotated[int, typer.Option(
        min=1, help="run the clean timing pass N times, spread over the run: its repeats "
        "measure the run-to-run noise that overheads and `compare` are judged by")] = 1,
    fresh_processes: Annotated[bool, typer.Option(
        help="a fresh interpreter for every pass, instead of forking each from a server "
        "that imported torch once")] = False,
    region_cpu_time: Annotated[bool, typer.Option(
        help="wallclock: CPU time per region and step too (two system calls a region)")]
    = False,
    record_shapes: Annotated[bool, typer.Option(
        help="torch-profiler: record operator input shapes")] = False,
    profile_memory: Annotated[bool, typer.Option(
        help="torch-profiler: record tensor allocations")] = False,
    with_flops: Annotated[bool, typer.Option(
        help="torch-profiler: estimate FLOPs of matmul and conv operators")] = False,
    with_stack: Annotated[bool, typer.Option(
        help="torch-profiler: record Python stacks")] = False,
    torch_schedule: Annotated[str | None, typer.Option(
        metavar="WAIT,WARMUP,ACTIVE",
        help="torch-profiler: skip WAIT steps, warm up WARMUP, record ACTIVE (by pa.step())")]
    = None,
    warmup_steps: Annotated[int, typer.Option(
        min=0, help="cuda-events: leave the first N steps out (said so in the report)")] = 0,
    nvtx_modules: Annotated[bool, typer.Option(
        help="nsys: an NVTX range per nn.Module forward too")] = False,
    memory_interval: Annotated[float, typer.Option(
        min=0.001, help="memory: seconds between two samples of the process's memory")]
    = 0.01,
    memory_lines: Annotated[list[str] | None, typer.Option(
        metavar="MODULE:FUNCTION", help="memory: line-by-line memory of this function "
        "(repeat; the script's own module is its file's stem)")] = None,
    nproc_per_node: Annotated[str, typer.Option(
        help="ranks on this node, run by torchrun: N, or auto/cpu/gpu as torchrun reads them",
        rich_help_panel="Several ranks (torchrun)")] = "1",
    nnodes: Annotated[str, typer.Option(
        help="nodes, N or MIN:MAX", rich_help_panel="Several ranks (torchrun)")] = "1",
    node_rank: Annotated[int | None, typer.Option(
        help="this node's rank", rich_help_panel="Several ranks (torchrun)")] = None,
    rdzv_endpoint: Annotated[str | None, typer.Option(
        metavar="HOST:PORT", help="rendezvous endpoint, the same on every node",
        rich_help_panel="Several ranks (torchrun)")] = None,
    rdzv_backend: Annotated[str, typer.Option(
        help="rendezvous backend", rich_help_panel="Several ranks (torchrun)")] = "c10d",
    rdzv_id: Annotated[str, typer.Option(
        help="rendezvous id, the same on every node (each pass adds -passN)",
        rich_help_panel="Several ranks (torchrun)")] = "profile-all",
) -> None:
    """Run SCRIPT once per pass of compatible backends and merge what they measured."""
    from profile_all.report import terminal
    from profile_all.runner import orchestrator
    from profile_all.runner.launch import Launch
    from profile_all.runner.progress import PassProgress
    from profile_all.targets import ScriptTarget

    launch = Launch(nproc_per_node, nnodes, node_rank, rdzv_endpoint, rdzv_backend, rdzv_id)
    torch_options: dict[str, Any] = {
        "record_shapes": record_shapes, "profile_memory": profile_memory,
        "with_flops": with_flops, "with_stack": with_stack}
    if torch_schedule:
        torch_options["schedule"] = _schedule(torch_schedule)
    report = orchestrator.run(
        ScriptTarget(script, script_args or []), backend_names=backend, out=out,
        timeout=timeout, observer=PassProgress(err_console), command=sys.argv,
        options={"wallclock": {"cpu_time": region_cpu_time}, "torch-profiler": torch_options,
                 "cuda-events": {"warmup_steps": warmup_steps},
                 "nsys": {"module_ranges": nvtx_modules},
                 "memory": {"interval": memory_interval, "lines": memory_lines or []}},
        launch=launch, repeat=repeat, fresh_processes=fresh_processes)
    terminal.render(report, err_console)
    raise typer.Exit(report.exit_code)


def _schedule(text: str) -> dict[str, int]:
    try:
        wait, warmup, active = (int(part) for part in text.split(","))
    except ValueError:
        raise UsageError(f"--torch-schedule wants WAIT,WARMUP,ACTIVE (three integers), "
                         f"got {text!r}") from None
    if min(wait, warmup) < 0 or active < 1:
        raise UsageError(f"--torch-schedule: WAIT and WARMUP >= 0 and ACTIVE >= 1, got {text!r}")
    return {"wait": wait, "warmup": warmup, "active": active}


@app.command()
@_one_line_errors
def ingest(
    files: Annotated[list[Path], typer.Argument(
        help="chrome traces (.json, .json.gz), pstats files (.prof), nsys sqlite exports")],
    out: Annotated[Path | None, typer.Option(
        "--out", "-o", help="the run directory [default: reports/<timestamp>-ingest]")] = None,
) -> None:
    """Build a report from profiler files that already exist, a rank column per trace."""
    from profile_all.report import terminal
    from profile_all.runner.ingest_files import ingest as ingest_files

    terminal.render(ingest_files(files, out, command=sys.argv), err_console)


@app.command()
@_one_line_errors
def merge(
    run_dirs: Annotated[list[Path], typer.Argument(help="the run directories of each node")],
    out: Annotated[Path | None, typer.Option(
        "--out", "-o", help="the merged run directory [default: reports/<timestamp>-merge]")]
    = None,
    force: Annotated[bool, typer.Option(
        help="merge directories that are not from the same run")] = False,
) -> None:
    """Merge the run directories of several nodes into one report, a rank column per row."""
    from profile_all.report import terminal
    from profile_all.runner.merge_runs import merge as merge_runs

    terminal.render(merge_runs(run_dirs, out, force=force, command=sys.argv), err_console)


def _bytes(text: str | None) -> float | None:
    """`8G`, `512M`, `1000000` -> bytes."""
    if text is None:
        return None
    scale = {"K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}.get(text[-1:].upper(), 1)
    try:
        return float(text[:-1] if scale != 1 else text) * scale
    except ValueError:
        raise UsageError(f"--max-memory wants bytes like 8G or 512M, got {text!r}") from None


@app.command()
@_one_line_errors
def model(
    spec: Annotated[str, typer.Argument(
        help="package.module:factory or path/to/file.py:factory (returns an nn.Module)")],
    input_shape: Annotated[list[str], typer.Option(
        help="an input's shape, like 1,3,224,224 (repeat for several inputs)")],
    dtype: Annotated[str, typer.Option(help="float32, float16, bfloat16 or float64")]
    = "float32",
    device: Annotated[str, typer.Option(help="auto, cpu or cuda")] = "auto",
    batch_size: Annotated[str | None, typer.Option(
        help="N replaces the first dimension; auto searches for the best throughput")] = None,
    warmup: Annotated[int, typer.Option(min=0, help="iterations run before timing")] = 10,
    iters: Annotated[int | None, typer.Option(
        min=1, help="timed iterations [default: until the median's 95% CI is within 2%]")]
    = None,
    train: Annotated[bool, typer.Option(
        help="time forward, backward and an SGD step instead of inference")] = False,
    max_memory: Annotated[str | None, typer.Option(
        help="batch search on CPU: stop before this much memory (8G, 512M)")] = None,
    peak_flops: Annotated[float | None, typer.Option(
        help="the device's peak FLOP/s, to report the fraction achieved")] = None,
    backend: Annotated[list[str] | None, typer.Option(
        "--backend", "-b", help="a backend besides the benchmark (repeat); default: "
        + ", ".join(backend_registry.DEFAULT_MODEL))] = None,
    out: Annotated[Path | None, typer.Option(
        "--out", "-o", help="the run directory [default: reports/<timestamp>-<factory>]")]
    = None,
    timeout: Annotated[float | None, typer.Option(help="seconds each pass may run")] = None,
    repeat: Annotated[int, typer.Option(
        min=1, help="run the timing pass N times, spread among the counter passes: the "
        "spread between them is beside the latency's interval")] = 1,
) -> None:
    """Benchmark a model the right way and count its FLOPs with every counter."""
    from profile_all.model.build import parse_shape
    from profile_all.report import terminal
    from profile_all.runner import orchestrator
    from profile_all.runner.progress import PassProgress
    from profile_all.targets import ModelTarget

    shapes = [parse_shape(text) for text in input_shape]
    if batch_size not in (None, "auto"):
        if not batch_size.isdigit() or int(batch_size) < 1:
            raise UsageError(f"--batch-size wants a positive integer or auto, got {batch_size!r}")
        shapes = [(int(batch_size), *shape[1:]) for shape in shapes]
    target = ModelTarget(spec, shapes, dtype=dtype, device=device, train=train, warmup=warmup,
                         iters=iters, batch_search=batch_size == "auto",
                         max_memory=_bytes(max_memory))
    report = orchestrator.run(target, backend_names=backend, out=out, timeout=timeout,
                              observer=PassProgress(err_console), command=sys.argv,
                              peak_flops=peak_flops, repeat=repeat)
    terminal.render(report, err_console)
    raise typer.Exit(report.exit_code)


@app.command("backends")
def list_backends() -> None:
    """List every registered backend, and whether it can run here."""
    table = Table("backend", "kind", "available", "measures", "native file")
    for name in backend_registry.known_names():
        cls = backend_registry.load(name)
        ok, reason = cls.available()
        table.add_row(name, cls.kind, "yes" if ok else f"no: {reason}", cls.measures,
                      cls.native_file)
    Console().print(table)


class Format(str, Enum):
    table = "table"
    md = "md"
    csv = "csv"
    json = "json"


@app.command()
@_one_line_errors
def show(
    run_dir: Annotated[Path, typer.Argument(help="a run directory")],
    format: Annotated[Format, typer.Option(
        "--format", "-f", help="table (terminal), md (markdown), csv or json (every row)")]
    = Format.table,
    top: Annotated[int, typer.Option(min=1, help="rows of each long table shown")] = 10,
    html: Annotated[bool, typer.Option(
        "--html", help="(re)write RUN/report.html and print its path")] = False,
) -> None:
    """Print a run's report: its tables, or every row as CSV or JSON."""
    from profile_all.report.formats import render_to
    from profile_all.report.store import write_html
    from profile_all.runner.rundir import load

    report = load(run_dir)
    if html:
        print(write_html(report))
        return
    render_to(report, format.value, top, sys.stdout)


@app.command()
@_one_line_errors
def compare(
    run_a: Annotated[Path, typer.Argument(help="the run before the change")],
    run_b: Annotated[Path, typer.Argument(help="the run after it")],
    fail_above: Annotated[float | None, typer.Option(
        metavar="PCT", help="exit 1 when a region got slower, beyond the run-to-run noise, "
        "by more than PCT percent (for CI; both runs need --repeat 2 or more)")] = None,
    format: Annotated[Format, typer.Option(
        "--format", "-f", help="table, md, csv or json")] = Format.table,
) -> None:
    """Compare two runs: each region's change in time, with its 95% interval and verdict."""
    from profile_all.report import tables
    from profile_all.report.compare import slower_than
    from profile_all.report.terminal import rich_table
    from profile_all.runner.rundir import load

    table = load(run_a).compare(load(run_b))
    slower = slower_than(table, fail_above) if fail_above is not None else None
    if format is Format.table:
        console = Console()
        console.print(rich_table("Change from A to B (b / a - 1)",
                                     tables.compare_table(table)))
        console.print(f"A: {run_a}\nB: {run_b}", highlight=False)
    elif format is Format.md:
        print(tables.compare_table(table).to_markdown(index=False))
    elif format is Format.csv:
        table.to_csv(sys.stdout, index=False)
    else:
        print(table.to_json(orient="records"))
    for note in table.attrs.get("notes", []):
        print(f"profile-all: note: {note}", file=sys.stderr)
    if slower is not None and not slower.empty:
        names = ", ".join(f"{name} ({change:+.1%})" for name, change
                          in zip(slower["name"], slower["change"], strict=True))
        print(f"profile-all: slower by more than {fail_above:g}% beyond the run-to-run noise: "
              f"{names}", file=sys.stderr)
        raise typer.Exit(1)


@app.command()
@_one_line_errors
def view(
    run_dir: Annotated[Path, typer.Argument(help="a run directory with a cProfile file")],
    port: Annotated[int, typer.Option(help="port on 127.0.0.1 (the next free one if taken)")]
    = 8080,
    browser: Annotated[bool, typer.Option(help="open a web browser")] = True,
) -> None:
    """Open the run's cProfile file in SnakeViz, served on 127.0.0.1."""
    from profile_all.view import serve_snakeviz

    serve_snakeviz(run_dir, port, browser)


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
