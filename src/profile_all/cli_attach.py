"""`profile-all attach PID`: a running process profiled from outside (the CLI's layer over
`pa.attach`)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from profile_all.cli_drawing import Drawing, finish

err_console = Console(stderr=True)


def attach(
    pid: Annotated[int, typer.Argument(metavar="PID", help="the running Python process")],
    duration: Annotated[float, typer.Option(
        metavar="SECONDS", help="how long to sample it (less if it ends)")] = 30.0,
    out: Annotated[Path | None, typer.Option(
        "--out", "-o", metavar="DIR",
        help="the run directory [default: reports/<timestamp>-attach-PID]")] = None,
    rate: Annotated[int, typer.Option(metavar="HZ", help="py-spy's samples a second")] = 50,
    native: Annotated[bool, typer.Option(
        "--native", help="native frames too (torch's C++ under the Python call)")] = False,
    idle: Annotated[bool, typer.Option(
        "--idle", help="sample waiting threads too")] = False,
    torch_steps: Annotated[int, typer.Option(
        min=0, metavar="N", help="ask a listening process (one that called pa.step() or "
        "pa.listen()) for a torch.profiler window of N steps; 0: do not ask")] = 5,
    as_json: Annotated[bool, typer.Option(
        "--json", help="the report's meta and findings as JSON on stdout")] = False,
    quiet: Annotated[bool, typer.Option(
        "--quiet", "-q", help="one line with the status and the run directory")] = False,
) -> None:
    """Profile a Python process that is already running, without restarting it."""
    import profile_all as pa

    drawing = Drawing(err_console, quiet)
    report = pa.attach(pid, duration=duration, out=out, rate=rate, native=native, idle=idle,
                       torch_steps=torch_steps or None, command=sys.argv,
                       progress=None if quiet else lambda line: print(
                           f"profile-all: {line}", file=sys.stderr, flush=True),
                       meanwhile=drawing)
    finish(report, drawing, as_json)
