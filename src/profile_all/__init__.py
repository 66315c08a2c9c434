"""profile-all: profile PyTorch scripts with every profiler you already use, in one report.

    import profile_all as pa
    report = pa.run("train.py", args=["--epochs", "1"])
    report.frame        # one tidy DataFrame, a row per measured value
    report.summary()    # a row per region

    with pa.region("forward"): ...     # heard by every active backend
    pa.step()                          # marks the end of an iteration
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from profile_all import validate
from profile_all.errors import ProfileAllError, UsageError
from profile_all.regions import region, step
from profile_all.render.notebook import show_reports_as_html
from profile_all.runner.starting.launch import Launch

__all__ = ["Launch", "ProfileAllError", "Report", "UsageError", "attach", "compare", "ingest",
           "keep_servers", "listen", "load", "merge", "profile_model", "region", "run", "step"]


show_reports_as_html()  # in a notebook's kernel; nothing elsewhere


#: what is imported when asked: Report and load import pandas, never in the target's
#: process; load_ipython_extension is IPython's (`%load_ext profile_all`: %%profile_all)
_LAZY = {"Report": "profile_all.report.report", "load": "profile_all.runs.folder",
         "load_ipython_extension": "profile_all.cell_magic",
         "keep_servers": "profile_all.runner.starting.kept_servers"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'profile_all' has no attribute {name!r}")


def _observer(observer: Any) -> Any:
    """The caller's observer; None: progress in a notebook (else none); False: none."""
    if observer is False:
        return None
    if observer is None:
        from profile_all.runner.watching.progress import in_notebook

        return in_notebook()
    return observer


def run(script: str | Path, args: Sequence[str] = (), *, backends: Sequence[str] | None = None,
        out: str | Path | None = None, timeout: float | None = None, isolate: bool = True,
        options: dict[str, dict[str, Any]] | None = None, nproc_per_node: int | str = 1,
        launch: Launch | None = None, repeat: int = 1, fresh_processes: bool = False,
        observer: Any = None, command: Sequence[str] | None = None,
        pass_steps: int | str | None = None, max_steps: int | None = None,
        show_output: str = "first", meanwhile: Any = None,
        separate_passes: bool = False, on_timeout: str = "stop") -> Any:
    """Run `script` with `args` under each pass of backends; write and return its Report.

    The script runs once: the clean timing pass runs it whole, and where it marks steps
    the other passes whose backends can share a process run each in a window of its
    steps inside that process; what cannot share, or found no window (a script with too
    few steps), runs in a pass of its own, the script run again (docs/command-line.md,
    "How a run is laid out").

    backends: names as `profile-all backends` lists them (default: every backend that can
    run here).
    out: the run directory (default `reports/<timestamp>-<script>/`).
    timeout: seconds each pass may run before it is stopped (exit code 124); the report
    says where it hung. on_timeout: "stop" runs no later pass that would run the script
    again (it would hang there too), "continue" runs them all.
    isolate: False runs the passes in this process (no timeout then).
    options: per-backend options, e.g. {"wallclock": {"cpu_time": True}} for CPU time per
    region, {"torch-profiler": {"record_shapes": True}}, {"memory": {"interval": 0.005}}.
    nproc_per_node: ranks on this machine, each pass under torchrun (N, "auto", "cpu").
    launch: for several machines, `Launch(nproc_per_node="8", nnodes="2", node_rank=0,
    rdzv_endpoint="head:29500")` instead of nproc_per_node.
    repeat: how many times the clean timing pass runs, spread over the run; its repeats
    measure the run-to-run noise that overheads and `compare` are judged by (3 or more
    for a comparison that gates CI).
    fresh_processes: a fresh interpreter for every pass, instead of forking each from a
    server that imported torch once (seconds saved a pass); every pass in its own.
    separate_passes: every pass in a process of its own, each running the script from its
    start (no windows inside the timing pass's process).
    observer: told as each pass starts and ends (`pass_started(pass, count)`,
    `pass_ended(pass, count, summary)`, summary a pass_record.PassRecord): the CLI's
    progress lines. None: progress lines in a Jupyter notebook's cell, nothing elsewhere;
    False: nothing anywhere.
    command: the command line recorded in meta.json (the CLI's argv).
    options["torch-profiler"]["schedule"]: {"wait": W, "warmup": U, "active": A} or "W,U,A".
    pass_steps: where the target marks steps (pa.step(), or optimizer.step()), the steps of
    each pass but the clean timing pass: its window inside the timing pass's process
    (default 6: a step to settle, then five for per-step figures; a sampler's lasts until
    it has 50 samples), or in a pass of its own, where it ends the script (default 25: a
    few warm-up steps, then enough for stable per-step figures); "all" runs every pass
    whole, each in its own process.
    max_steps: every pass, the timing pass too, ends the target after this many steps: the
    first minutes of a long job, without editing it.
    show_output: "first" shows the target's output of the first pass only (every pass's
    is in artifacts/passN.stdout.log and .stderr.log); "all" shows every pass's; "none"
    shows none.
    meanwhile: a function called with the Report while its files are written, by a forked
    process where this one runs a single thread (the CLI draws the report in the terminal
    then); the call returns once both are done.
    """
    from profile_all.runner import orchestrator
    from profile_all.targets import ScriptTarget

    script = validate.path("script", script)
    args = validate.strings("args", args, paths_too=True)
    out = validate.path("out", out, optional=True)
    validate.flag("isolate", isolate)
    if isinstance(nproc_per_node, bool) or not isinstance(nproc_per_node, int | str):
        raise validate.ArgumentTypeError(f"nproc_per_node must be a number or 'auto', 'cpu', "
                                         f"'gpu', not {type(nproc_per_node).__name__}")
    if launch is not None and not isinstance(launch, Launch):
        raise validate.ArgumentTypeError(f"launch must be a profile_all.Launch, not "
                                         f"{type(launch).__name__}")
    if launch is not None and str(nproc_per_node) != "1":
        raise UsageError("give nproc_per_node or launch, not both")
    launch = launch or Launch(nproc_per_node=str(nproc_per_node))
    return orchestrator.run(ScriptTarget(str(script), args), backend_names=backends, out=out,
                            timeout=timeout, isolate=isolate, options=options, launch=launch,
                            repeat=repeat, observer=_observer(observer), pass_steps=pass_steps,
                            max_steps=max_steps, show_output=show_output,
                            on_timeout=on_timeout,
                            command=validate.strings("command", command or [], paths_too=True),
                            fresh_processes=validate.flag("fresh_processes", fresh_processes),
                            separate_passes=validate.flag("separate_passes", separate_passes),
                            meanwhile=validate.report_function("meanwhile", meanwhile))


def merge(run_dirs: Sequence[str | Path], out: str | Path | None = None, *,
          force: bool = False, command: Sequence[str] | None = None,
          meanwhile: Any = None) -> Any:
    """One Report from the run directories of several nodes (`profile-all merge`);
    meanwhile: as for `run`."""
    from profile_all.runs.merge import merge as merge_runs

    return merge_runs(validate.paths("run_dirs", run_dirs),
                      validate.path("out", out, optional=True),
                      force=validate.flag("force", force),
                      command=validate.strings("command", command or [], paths_too=True),
                      meanwhile=validate.report_function("meanwhile", meanwhile))


def ingest(files: Sequence[str | Path], out: str | Path | None = None, *,
           command: Sequence[str] | None = None, max_unpacked: int | str | None = None,
           max_field: int | str | None = None, meanwhile: Any = None,
           progress: Any = None) -> Any:
    """A Report from profiler files that already exist (`profile-all ingest`): chrome
    traces (a file, or a directory of them), pstats, Nsight Systems exports and reports,
    `nsys stats` CSVs, mprofile .dat files; a rank per trace. `max_unpacked` (bytes a file
    may unpack to, default 4G) and `max_field` (characters of one name or field, default
    1M): a file beyond them is refused, not read (bytes or text like `512M`). meanwhile:
    as for `run`. progress: called with (files read, files) as each is read (the CLI
    says it every 10 s of a long ingest)."""
    from profile_all.runs import parse_ahead

    unpacked = validate.byte_size("max_unpacked", max_unpacked)
    field = validate.byte_size("max_field", max_field)
    paths, checked = validate.paths("files", files), {
        "out": validate.path("out", out, optional=True),
        "command": validate.strings("command", command or [], paths_too=True),
        "max_unpacked": int(unpacked) if unpacked else None,
        "max_field": int(field) if field else None,
        "meanwhile": validate.report_function("meanwhile", meanwhile),
        "progress": validate.report_function("progress", progress,
                                             of="(files read, files)")}
    with parse_ahead.started(paths, checked["max_unpacked"], checked["max_field"]) as ahead:
        from profile_all.runs.ingest import ingest as ingest_files  # (pandas: meanwhile)

        return ingest_files(paths, **checked, ahead=ahead)


def compare(run_a: str | Path, run_b: str | Path, *, fail_above: float | None = None,
            html: str | Path | None = None) -> Any:
    """What changed from run A to run B: `Report.compare`'s table (a row per measure, its
    change b / a - 1 with a 95% interval and a verdict; `attrs["notes"]`: what makes the
    runs unlike). With `fail_above` (percent), `attrs["slower"]` holds the regions slower
    beyond the run-to-run noise by more than that (both runs need `repeat` >= 2), and
    `attrs["undecided"]` those slower by more than that as measured whose interval still
    holds no change (the gate cannot decide them: `compare --fail-above` exits 3). With
    `html`, a page there holds the table and the two runs' operator trees side by side
    (`Report.operator_tree_diff`)."""
    from profile_all.report.compare import slower_than, undecided
    from profile_all.runs.folder import load
    from profile_all.runs.store import write_compare_html

    fail_above = validate.percent("fail_above", fail_above)
    page = validate.path("html", html, optional=True)
    a, b = load(validate.path("run_a", run_a)), load(validate.path("run_b", run_b))
    table = a.compare(b)
    if page is not None:
        write_compare_html(page, table, a.operator_tree_diff(b), str(run_a), str(run_b))
    if fail_above is not None:  # (different targets are an A/B: attrs["notes"] says so)
        table.attrs["slower"] = slower_than(table, fail_above)
        table.attrs["undecided"] = undecided(table, fail_above)
    return table


def profile_model(model: Any, example_inputs: Sequence[Any] | None = None, *,
                  input_shapes: Sequence[Sequence[int]] | None = None,
                  backends: Sequence[str] | None = None, out: str | Path | None = None,
                  dtype: str | None = None, input_dtype: str | None = None,
                  vocab_size: int | None = None, device: str = "auto", train: bool = False,
                  batch_size: int | str | None = None, warmup: int = 10,
                  iters: int | None = None, budget_seconds: float = 10.0,
                  max_memory: float | str | None = None, count_on: str = "device",
                  peak_flops: float | None = None,
                  timeout: float | None = None, repeat: int = 1, observer: Any = None,
                  command: Sequence[str] | None = None, meanwhile: Any = None) -> Any:
    """Benchmark a model and count its FLOPs with every counter; write and return a Report.

    model: a live nn.Module (every pass runs in this process) or a SPEC string,
    `package.module:factory` or `file.py:factory` (every pass in a fresh process).
    example_inputs: tensors whose shapes (and dtype) the measured inputs take; or
    input_shapes; neither, for a SPEC whose factory returns (module, example_inputs): those.
    input_dtype: the inputs' dtype where not `dtype` (the model's): int64
    makes token ids below vocab_size (default: the model's, from its nn.Embedding or its
    config). batch_size: a number replaces the first dimension; "auto" searches for
    the batch with the best throughput. iters=None: repeat until the median's 95%
    confidence interval is within 2%, or budget_seconds run out.
    backends: default flop-counter, thop and flops-profiler (the benchmark always runs).
    repeat: how many timing passes, spread among the counter passes (fresh processes).
    max_memory: the batch search on CPU stops before this much memory: bytes, or "8G".
    count_on: "meta" builds and runs the model on the meta device in the passes whose
    counters count from shapes alone (flop-counter, thop): nothing computed, no weights.
    observer, command, meanwhile: as for `run`.
    """
    from profile_all.runner import orchestrator
    from profile_all.targets import ModelTarget

    live = not isinstance(model, str)
    if live and not callable(getattr(model, "forward", None)):
        raise validate.ArgumentTypeError(f"model must be an nn.Module or a SPEC string "
                                         f"('package.module:factory'), not "
                                         f"{type(model).__name__}")
    shapes, dtype, input_dtype = validate.model_inputs(
        example_inputs, input_shapes, dtype, input_dtype, factory_may_give=not live)
    out = validate.path("out", out, optional=True)
    shapes = validate.batched(shapes, batch_size)
    target = ModelTarget(
        spec=model if not live else f"<live>:{type(model).__name__}", input_shapes=shapes,
        dtype=dtype or "float32", input_dtype=input_dtype, vocab_size=vocab_size,
        device=device, train=train, warmup=warmup, iters=iters,
        budget_seconds=budget_seconds, batch_search=batch_size == "auto",
        max_memory=validate.byte_size("max_memory (--max-memory)", max_memory),
        count_on=count_on, live_model=model if live else None)
    return orchestrator.run(target, backend_names=backends, out=out, timeout=timeout,
                            isolate=not live, peak_flops=peak_flops, repeat=repeat,
                            observer=_observer(observer),
                            command=validate.strings("command", command or [], paths_too=True),
                            meanwhile=validate.report_function("meanwhile", meanwhile))


def attach(pid: int, *, duration: float = 30.0, out: str | Path | None = None,
           rate: int = 50, native: bool = False, idle: bool = False,
           torch_steps: int | None = 5, command: Sequence[str] | None = None,
           progress: Any = None, meanwhile: Any = None) -> Any:
    """Profile a Python process that is already running, without restarting it
    (`profile-all attach PID`): py-spy samples its stacks `rate` times a second for
    `duration` seconds (or until it ends, or profile-all is stopped), with native frames
    (`native`) and waiting threads (`idle`) on request; its memory, CPU time, threads and
    children come from the OS; where it listens (it called `pa.step()` or `pa.listen()`),
    it is asked for a torch.profiler window of `torch_steps` steps (None: not asked).
    Writes and returns a Report; what was sampled is kept whatever ends it. `progress`:
    called with a line once sampling has begun (the CLI prints it); meanwhile: as for
    `run`."""
    from profile_all.runner.attaching import attach as attaching
    from profile_all.runner.attaching import attach_report
    from profile_all.runs.folder import RunDirectory

    duration = validate.seconds("duration (--duration)", duration)
    validate.whole("rate", rate, 1, 1000)
    if torch_steps is not None:
        validate.whole("torch_steps", torch_steps, 1)
    out = validate.path("out", out, optional=True)
    meanwhile = validate.report_function("meanwhile", meanwhile)
    process = attaching.check_target(pid)
    attached = attaching.gather(
        process, RunDirectory.create(out, f"attach-{pid}"), duration=duration, rate=rate,
        native=validate.flag("native", native), idle=validate.flag("idle", idle),
        torch_steps=torch_steps, progress=progress)
    return attach_report.written(attached, rate, idle, validate.strings(
        "command", command or [], paths_too=True), meanwhile)


def listen() -> bool:
    """Take `profile-all attach`'s requests for a torch.profiler window (the first
    `pa.step()` does this too): False where this process cannot (on_demand.listen)."""
    from profile_all import on_demand

    return on_demand.listen()
