"""Every bad input we know of, CLI and API: refused before any pass starts, one line on
stderr naming what is wrong, exit code 2, no traceback, nothing written. The command is
run in this process (its `main`), so that the whole list costs seconds; a few of them go
through a real `profile-all` process in test_bad_input.py."""

from __future__ import annotations

import math
import os
from pathlib import Path

import pytest

import profile_all as pa
from conftest import TARGETS
from profile_all.cli import main
from profile_all.errors import UsageError

SCRIPT = str(TARGETS / "contract.py")
MODEL = str(Path(__file__).resolve().parent.parent / "scripts" / "examples" / "models.py")


def torch_module():
    """A live module (torch imported only when the case runs)."""
    import torch

    return torch.nn.Linear(2, 2)


def _files(tmp: Path) -> dict[str, str]:
    """Bad things on disk, made fresh for each case."""
    (tmp / "a_dir").mkdir()
    (tmp / "empty_dir").mkdir()
    (tmp / "broken.py").write_text("def broken(:\n")
    (tmp / "empty.json").write_text("")
    (tmp / "numbers.csv").write_text("a,b\n1,2\n")
    (tmp / "cut.json.gz").write_bytes(b"\x1f\x8b\x08\x00cut")
    (tmp / "not_a_run").mkdir()
    (tmp / "full").mkdir()
    (tmp / "full" / "mine.txt").write_text("keep me")
    (tmp / "a_file").write_text("")
    (tmp / "factory.py").write_text("def number():\n    return 3\n")
    return {name: str(tmp / name) for name in (
        "a_dir", "empty_dir", "broken.py", "empty.json", "numbers.csv", "cut.json.gz",
        "not_a_run", "full", "a_file", "factory.py")}


CLI = [  # (argv with {placeholders} for _files, a piece of the one line)
    (["run"], "Missing argument 'SCRIPT'"),
    (["run", "{tmp}/missing.py"], "script not found"),
    (["run", "{a_dir}"], "is a directory"),
    (["run", "{broken.py}"], "syntax error"),
    (["run", SCRIPT, "-b", "wallclok"], "unknown backend 'wallclok'"),
    (["run", SCRIPT, "-b", "wallclock", "-b", "wallclock"], "backend 'wallclock' is given twice"),
    (["run", SCRIPT, "--timeout", "nan"], "timeout must be a positive, finite number"),
    (["run", SCRIPT, "--timeout", "inf"], "timeout must be a positive, finite number"),
    (["run", SCRIPT, "--timeout", "-1"], "timeout must be a positive, finite number"),
    (["run", SCRIPT, "--timeout", "0"], "timeout must be a positive, finite number"),
    (["run", SCRIPT, "--timeout", "abc"], "Invalid value for '--timeout'"),
    (["run", SCRIPT, "--timeout", "1e308"], "timeout must be at most 2,592,000 seconds"),
    (["run", SCRIPT, "--repeat", "1000000000"], "repeat must be at most 100, got 1,000,000,000"),
    (["run", SCRIPT, "--timeout"], "requires an argument"),
    (["run", SCRIPT, "--memory-lines", "nocolon"], "--memory-lines wants MODULE:FUNCTION"),
    (["run", SCRIPT, "--memory-lines", ":grow"], "--memory-lines wants MODULE:FUNCTION"),
    (["run", SCRIPT, "--memory-lines", "allocates:"], "--memory-lines wants MODULE:FUNCTION"),
    (["run", SCRIPT, "--memory-interval", "0"], "--memory-interval must be a positive, finite"),
    (["run", SCRIPT, "--memory-interval", "nan"], "--memory-interval must be a positive, finite"),
    (["run", SCRIPT, "--repeat", "0"], "Invalid value for '--repeat'"),
    (["run", SCRIPT, "--repeat", "two"], "Invalid value for '--repeat'"),
    (["run", SCRIPT, "--torch-schedule", "1,x"], "--torch-schedule wants WAIT,WARMUP,ACTIVE"),
    (["run", SCRIPT, "--torch-schedule", "1,1,0"], "schedule's active must be at least 1"),
    (["run", SCRIPT, "--torch-schedule", "-1,1,1"], "schedule's wait must be at least 0"),
    (["run", SCRIPT, "--torch-schedule", "1,2"], "--torch-schedule wants WAIT,WARMUP,ACTIVE"),
    (["run", SCRIPT, "--warmup-steps", "-1"], "--warmup-steps must be at least 0, got -1"),
    (["run", SCRIPT, "--nproc-per-node", "0"], "(--nproc-per-node) wants a positive integer"),
    (["run", SCRIPT, "--nproc-per-node", "x"], "(--nproc-per-node) wants a positive integer"),
    (["run", SCRIPT, "--nnodes", "2"], "several nodes need --rdzv-endpoint"),
    (["run", SCRIPT, "--nnodes", "x"], "--nnodes wants N or MIN:MAX"),
    (["run", SCRIPT, "--node-rank", "-1"], "--node-rank must be >= 0"),
    (["run", SCRIPT, "--bogus"], "No such option: --bogus"),
    (["run", SCRIPT, "-o", "{full}"], "exists and is not empty"),
    (["run", SCRIPT, "-o", "{a_file}/run"], "cannot write the output folder"),
    (["run", SCRIPT, "-o", "{a_file}"], "is a file, not a folder: give -o a folder's name"),
    (["model"], "Missing argument 'SPEC'"),
    (["model", MODEL + ":mlp"], ":mlp() returned a module alone: give --input-shape, or "
                                "return (module, example_inputs) from the factory"),
    (["model", MODEL + ":mlp", "--input-shape", "1,a"], "--input-shape wants positive integers"),
    (["model", MODEL + ":mlp", "--input-shape", "0,784"], "--input-shape wants positive"),
    (["model", MODEL + ":mlp", "--input-shape", "100000000,100000000"],
     "inputs of shape 100000000x100000000 take 37,252,903.0 GiB, more than the"),
    (["model", MODEL + ":mlp", "--input-shape", ""], "--input-shape wants positive integers"),
    (["model", "nocolon", "--input-shape", "1,2"], "model SPEC must be"),
    (["model", "{tmp}/missing.py:f", "--input-shape", "1,2"], "model file not found"),
    (["model", "json:nosuch", "--input-shape", "1,2"], "nosuch"),
    (["model", "nosuch_module_xyz:f", "--input-shape", "1,2"], "nosuch_module_xyz"),
    (["model", "{factory.py}:number", "--input-shape", "1,2"], "not a torch.nn.Module"),
    (["model", MODEL + ":mlp", "--input-shape", "1,3", "--iters", "2"],
     "the model rejects inputs of shape 1x3"),
    (["model", MODEL + ":mlp", "--input-shape", "1,784", "--dtype", "int8"], "(--dtype) must be"),
    (["model", MODEL + ":mlp", "--input-shape", "1,784", "--device", "tpu"],
     "(--device) must be auto, cpu, cuda or cuda:N, got 'tpu'"),
    (["model", MODEL + ":mlp", "--input-shape", "1,784", "--batch-size", "0"],
     "batch_size must be at least 1"),
    (["model", MODEL + ":mlp", "--input-shape", "1,784", "--batch-size", "x"],
     "(--batch-size) wants a positive integer or auto"),
    (["model", MODEL + ":mlp", "--input-shape", "1,784", "--iters", "0"],
     "Invalid value for '--iters'"),
    (["model", MODEL + ":mlp", "--input-shape", "1,784", "--warmup", "-1"],
     "Invalid value for '--warmup'"),
    (["model", MODEL + ":mlp", "--input-shape", "1,784", "--max-memory", "8X"],
     "(--max-memory) wants bytes like 8G"),
    (["model", MODEL + ":mlp", "--input-shape", "1,784", "--max-memory", "-8G"],
     "max_memory (--max-memory) must be a positive, finite number"),
    (["model", MODEL + ":mlp", "--input-shape", "1,784", "--peak-flops", "abc"],
     "Invalid value for '--peak-flops'"),
    (["model", MODEL + ":mlp", "--input-shape", "1,784", "--peak-flops", "-1"],
     "peak_flops must be a positive, finite number"),
    (["model", MODEL + ":mlp", "--input-shape", "1,784", "--repeat", "0"],
     "Invalid value for '--repeat'"),
    (["model", MODEL + ":mlp", "--input-shape", "1,784", "--timeout", "nan"],
     "timeout must be a positive, finite number"),
    (["ingest"], "Missing argument 'FILE|DIR...'"),
    (["ingest", "{tmp}/missing.json"], "no such file"),
    (["ingest", "{empty.json}"], "empty file"),
    (["ingest", "{numbers.csv}"], "not a file profile-all reads"),
    (["ingest", "{empty_dir}"], "a directory with no trace file in it"),
    (["ingest", "{cut.json.gz}"], "corrupt or truncated"),
    # the output folder is refused before a file is read (a broken one here)
    (["ingest", "{cut.json.gz}", "-o", "{full}"], "exists and is not empty"),
    (["show", "{tmp}/nope"], "no such folder"),
    (["show", "{not_a_run}"], "no meta.json"),
    (["show", "{a_file}"], "not a run directory"),
    (["show", "{not_a_run}", "--format", "xml"], "Invalid value for '--format'"),
    (["show", "{not_a_run}", "--top", "0"], "Invalid value for '--top'"),
    (["compare", "{not_a_run}"], "Missing argument 'RUN_B'"),
    (["compare", "{tmp}/nope", "{tmp}/nope2"], "no such folder"),
    (["compare", "{not_a_run}", "{not_a_run}", "--fail-above", "abc"],
     "Invalid value for '--fail-above'"),
    (["compare", "{not_a_run}", "{not_a_run}", "--fail-above", "nan"],
     "fail_above must be a finite percentage of 0 or more"),
    (["compare", "{not_a_run}", "{not_a_run}", "--fail-above", "inf"],
     "fail_above must be a finite percentage of 0 or more"),
    (["compare", "{not_a_run}", "{not_a_run}", "--fail-above", "-5"],
     "fail_above must be a finite percentage of 0 or more"),
    (["compare", "{not_a_run}", "{not_a_run}", "--format", "xml"],
     "Invalid value for '--format'"),
    (["view", "{not_a_run}", "--port", "99999", "--no-browser"], "port must be 1 to 65535"),
    (["view", "{not_a_run}", "--port", "0", "--no-browser"], "port must be at least 1"),
    (["view", "{tmp}/nope", "--no-browser"], "no such folder"),
    (["merge"], "Missing argument 'NODE_DIR...'"),
    (["merge", "{tmp}/nope"], "merge wants two run directories or more"),
    (["merge", "{tmp}/nope", "{tmp}/nope2"], "no such folder"),
    (["nosuch"], "No such command 'nosuch'"),
    (["run", SCRIPT, "-b"], "requires an argument"),
]


@pytest.mark.parametrize("argv, message", CLI, ids=[" ".join(a)[:60] for a, _ in CLI])
def test_cli(tmp_path, monkeypatch, capsys, argv, message):
    names = _files(tmp_path)
    monkeypatch.chdir(tmp_path)
    before = sorted(os.listdir(tmp_path))
    argv = [_place(arg, {**names, "tmp": str(tmp_path)}) for arg in argv]
    with pytest.raises(SystemExit) as ended:
        main(argv)
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert ended.value.code == 2, captured.err
    assert len(lines) == 1 and message in lines[0], captured.err
    assert "Traceback" not in captured.err and captured.out == ""
    assert sorted(os.listdir(tmp_path)) == before  # nothing written, no report, no partial


def _place(arg: str, names: dict[str, str]) -> str:
    for name, path in names.items():
        arg = arg.replace("{" + name + "}", path)
    return arg


API = [  # (call, exception type, a piece of the message)
    (lambda: pa.run(SCRIPT, args="--x 1"), TypeError, "args must be a list of strings"),
    (lambda: pa.run(SCRIPT, args=[1]), TypeError, "args must hold strings only"),
    (lambda: pa.run(SCRIPT, backends="wallclock"), TypeError, "backends must be a list"),
    (lambda: pa.run(SCRIPT, backends=["wallclock", 3]), TypeError, "backends must hold"),
    (lambda: pa.run(SCRIPT, backends=["nosuch"]), ValueError, "unknown backend 'nosuch'"),
    (lambda: pa.run(SCRIPT, timeout="abc"), TypeError, "timeout must be a number of seconds"),
    (lambda: pa.run(SCRIPT, timeout=math.nan), ValueError, "timeout must be a positive"),
    (lambda: pa.run(SCRIPT, timeout=True), TypeError, "timeout must be a number"),
    (lambda: pa.run(SCRIPT, options="x"), TypeError, "options must be a dict"),
    (lambda: pa.run(SCRIPT, options={"nosuch": {}}), ValueError, "unknown backend 'nosuch'"),
    (lambda: pa.run(SCRIPT, options={"wallclock": {"cpu": True}}), ValueError,
     "unknown option 'cpu' of backend 'wallclock'"),
    (lambda: pa.run(SCRIPT, options={"wallclock": []}), TypeError,
     "options['wallclock'] must be a dict"),
    (lambda: pa.run(SCRIPT, options={"memory": {"interval": "x"}}), TypeError,
     "option 'interval' of backend 'memory' must be"),
    (lambda: pa.run(SCRIPT, options={"memory": {"lines": ["nocolon"]}}), ValueError,
     "--memory-lines wants MODULE:FUNCTION"),
    (lambda: pa.run(SCRIPT, options={"torch-profiler": {"schedule": {"wait": 1}}}),
     ValueError, "schedule wants wait, warmup and active"),
    (lambda: pa.run(SCRIPT, options={"cuda-events": {"warmup_steps": -1}}), ValueError,
     "--warmup-steps must be at least 0"),
    (lambda: pa.run(SCRIPT, repeat=0), ValueError, "repeat must be at least 1"),
    (lambda: pa.region(123), TypeError, "a region's name is text, like region('forward'); "
                                        "got 123 (int)"),
    (lambda: pa.region(""), ValueError, "a region's name is text"),
    (lambda: pa.run(SCRIPT, repeat=1.5), TypeError, "repeat must be a whole number"),
    (lambda: pa.run(SCRIPT, isolate="no"), TypeError, "isolate must be True or False"),
    (lambda: pa.run(SCRIPT, out=3), TypeError, "out must be a path"),
    (lambda: pa.run(3), TypeError, "script must be a path"),
    (lambda: pa.run(""), ValueError, "script is empty"),
    (lambda: pa.run(SCRIPT, nproc_per_node=True), TypeError, "nproc_per_node must be"),
    (lambda: pa.run(SCRIPT, launch="x"), TypeError, "launch must be a profile_all.Launch"),
    (lambda: pa.run(SCRIPT, timeout=5, isolate=False), ValueError, "a timeout needs isolate"),
    (lambda: pa.profile_model(42, input_shapes=[(1, 2)]), TypeError,
     "model must be an nn.Module or a SPEC string"),
    (lambda: pa.profile_model(MODEL + ":mlp"), UsageError, ":mlp() returned a module alone"),
    (lambda: pa.profile_model(torch_module()), TypeError, "needs example_inputs or"),
    (lambda: pa.profile_model(MODEL + ":mlp", input_shapes="1,784"), TypeError,
     "input_shapes must be a non-empty list"),
    (lambda: pa.profile_model(MODEL + ":mlp", input_shapes=[(1, 0)]), ValueError,
     "input_shapes: a dimension must be at least 1"),
    (lambda: pa.profile_model(MODEL + ":mlp", input_shapes=[(1, 784)], device="tpu"),
     ValueError, "device (--device) must be auto, cpu, cuda or cuda:N"),
    (lambda: pa.profile_model(MODEL + ":mlp", input_shapes=[(1, 784)], batch_size=0),
     ValueError, "batch_size must be at least 1"),
    (lambda: pa.profile_model(MODEL + ":mlp", input_shapes=[(1, 784)], iters=0), ValueError,
     "iters must be at least 1"),
    (lambda: pa.profile_model(MODEL + ":mlp", input_shapes=[(1, 784)], warmup=-1),
     ValueError, "warmup must be at least 0"),
    (lambda: pa.profile_model(MODEL + ":mlp", input_shapes=[(1, 784)], train="yes"),
     TypeError, "train must be True or False"),
    (lambda: pa.profile_model(MODEL + ":mlp", example_inputs="abc"), TypeError,
     "example_inputs must be a non-empty list of tensors"),
    (lambda: pa.profile_model(MODEL + ":mlp", input_shapes=[(1, 784)], peak_flops=-1),
     ValueError, "peak_flops must be a positive"),
    (lambda: pa.run(SCRIPT, nproc_per_node=-1), ValueError,
     "nproc_per_node (--nproc-per-node) wants a positive integer"),
    (lambda: pa.profile_model(MODEL + ":mlp", input_shapes=[(1, 784)], dtype="float99"),
     ValueError, "dtype (--dtype) must be one of"),
    (lambda: pa.profile_model(MODEL + ":mlp", input_shapes=[(1, 784)], max_memory="8X"),
     ValueError, "max_memory (--max-memory) wants bytes like 8G"),
    (lambda: pa.profile_model(MODEL + ":mlp", input_shapes=[(1, 784)], batch_size="many"),
     ValueError, "batch_size (--batch-size) wants a positive integer or auto"),
    (lambda: pa.run(SCRIPT, options={"torch-profiler": {"schedule": "1,x"}}), ValueError,
     "--torch-schedule wants WAIT,WARMUP,ACTIVE"),
    (lambda: pa.compare("a", "b", fail_above=float("nan")), ValueError,
     "fail_above must be a finite percentage"),
    (lambda: pa.compare("a", "b", fail_above="10"), TypeError, "fail_above must be a number"),
    (lambda: pa.compare(3, "b"), TypeError, "run_a must be a path"),
    (lambda: pa.ingest("trace.json"), TypeError, "files must be a list"),
    (lambda: pa.load(3), TypeError, "run_dir must be a path"),
    (lambda: pa.merge("dir"), TypeError, "run_dirs must be a list"),
]


@pytest.mark.parametrize("call, kind, message", API, ids=[m[:50] for _, _, m in API])
def test_api(tmp_path, monkeypatch, call, kind, message):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(kind, match=None) as raised:
        call()
    assert message in str(raised.value)
    assert isinstance(raised.value, pa.UsageError)  # the CLI's one line, exit 2
    assert not (tmp_path / "reports").exists()


def test_the_list_is_long():
    assert len(CLI) + len(API) > 80
