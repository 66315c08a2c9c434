"""`profile-all model` through the CLI, each pass in a fresh process, and its bad input."""

from __future__ import annotations

import subprocess
import sys

import psutil
import pytest
import torch

import profile_all as pa
from conftest import REPO, profile_all, profile_all_here

MODELS = REPO / "scripts" / "examples" / "models.py"


def test_model_from_a_file_spec_in_subprocesses(tmp_path):
    result = profile_all_here("model", f"{MODELS}:mlp", "--input-shape", "16,784", "--iters", "20",
                              "--warmup", "2", "-o", tmp_path / "run")
    assert result.returncode == 0, result.stderr
    report = pa.load(tmp_path / "run")
    assert [p.backends for p in report.meta.passes] == [
        [], ["flop-counter"], ["thop"], ["flops-profiler"]]
    latency = report.latency().set_index(["metric", "stat"])["value"]
    assert latency[("iterations", "total")] == 20
    assert latency[("warmup_iterations", "total")] == 2
    assert report.counters().set_index("counter").loc["flop-counter", "flops"] == \
        2 * 16 * (784 * 256 + 256 * 10)
    assert "FLOP counters side by side" in result.stderr
    assert "achieved_flops" in result.stderr
    # a model's passes have iterations, not steps: no column of zeros
    passes = result.stderr[result.stderr.index("Passes"):result.stderr.index("Model latency")]
    assert "steps" not in passes and "│ 0 " not in passes.replace("│ 0    │", "")


def test_package_module_class_spec_and_train(tmp_path):
    result = profile_all_here("model", "torch.nn:PReLU", "--input-shape", "4,8", "--train",
                              "--iters", "5", "--warmup", "1", "-b", "flop-counter",
                              "-o", tmp_path / "run")
    assert result.returncode == 0, result.stderr
    report = pa.load(tmp_path / "run")
    assert set(report.frame.loc[report.frame["scope"] == "model", "name"]) == {"train_step"}


@pytest.mark.parametrize("args, message", [
    (["no_such_package.models:make"], "cannot import no_such_package.models: "
                                      "ModuleNotFoundError"),
    ([f"{MODELS}:nothing_here"], "has no callable named 'nothing_here'"),
    (["torch:float32"], "has no callable named 'float32'"),
    (["torch.nn.functional:relu"], "relu() raised TypeError"),
    (["collections:OrderedDict"], "returned an object of type OrderedDict, not a torch.nn.Module"),
    (["justaname"], "model SPEC must be package.module:factory or file.py:factory"),
    (["missing_file.py:make"], "model file not found: missing_file.py"),
    (["torch.nn:Tanh", "--train"], "--train needs a model with trainable parameters"),
])
def test_bad_specs(tmp_path, args, message):
    result = profile_all_here("model", *args, "--input-shape", "1,784", cwd=tmp_path)
    _refused(result, message, tmp_path)


@pytest.mark.parametrize("extra, message", [
    (["--input-shape", "1,x,3"], "--input-shape wants positive integers"),
    (["--input-shape", "1,0"], "--input-shape wants positive integers"),
    (["--input-shape", "1,100"], "the model rejects inputs of shape 1x100: RuntimeError"),
    (["--input-shape", "1,784", "--dtype", "float8"], "dtype (--dtype) must be one of"),
    (["--input-shape", "1,784", "--batch-size", "many"], "(--batch-size) wants a positive"),
])
def test_bad_shapes_and_options(tmp_path, extra, message):
    result = profile_all_here("model", f"{MODELS}:mlp", *extra, cwd=tmp_path)
    _refused(result, message, tmp_path)


@pytest.mark.skipif(torch.cuda.is_available(), reason="CUDA is available here")
def test_cuda_device_without_cuda(tmp_path):
    result = profile_all_here("model", f"{MODELS}:mlp", "--input-shape", "1,784", "--device",
                              "cuda", cwd=tmp_path)
    _refused(result, "--device cuda, but CUDA is not available here", tmp_path)


def _refused(result, message: str, cwd) -> None:
    assert result.returncode == 2, (result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], result.stderr
    assert not (cwd / "reports").exists()


def test_the_model_is_checked_in_a_forked_child_and_profile_all_never_imports_torch(tmp_path):
    """The check (build the model, run it once) runs where the passes run: the parent
    stays free of torch's import, and a check that dies is said, with nothing left."""
    (tmp_path / "factories.py").write_text(
        "import os, signal, torch\n"
        "def small():\n    return torch.nn.Linear(4, 2)\n"
        "def dies():\n    os.kill(os.getpid(), signal.SIGKILL)\n")
    script = (
        "import sys, profile_all as pa\n"
        "report = pa.profile_model('factories.py:small', input_shapes=[(2, 4)], iters=3,\n"
        "                          warmup=1, backends=['flop-counter'], out='run')\n"
        "print(report.meta.process_start, '|', 'torch' in sys.modules)\n")
    done = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    # counters forked; the timing pass a fresh interpreter (tests/test_model_latency.py)
    assert done.stdout.strip().splitlines()[-1] == \
        "fork, timing passes: fresh interpreter | False"
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    result = profile_all("model", "factories.py:dies", "--input-shape", "2,4", cwd=tmp_path,
                         env={"TMPDIR": str(scratch)})
    _refused(result, "checking the target failed: its process ended (killed by SIGKILL) "
                     "before it said anything", tmp_path)
    assert not list(scratch.glob("profile-all-check-*"))  # its scratch folder is gone
    # the timing pass's interpreter, started with the run and never given its pass, ended
    assert not _processes_with_env("TMPDIR", str(scratch))


def _processes_with_env(name: str, value: str) -> list[str]:
    """The command lines of the live processes whose environment holds name=value."""
    found = []
    for process in psutil.process_iter(["cmdline"]):
        try:
            if process.environ().get(name) == value:
                found.append(" ".join(process.info["cmdline"] or []))
        except (psutil.AccessDenied, psutil.NoSuchProcess, psutil.ZombieProcess):
            continue
    return found


def test_counting_on_the_meta_device(tmp_path):
    """--count-on meta: the passes of counters that count from shapes build and run the
    model on the meta device and count what the device would; the others run on it; the
    report says so. A model that cannot run there fails its pass, saying why."""
    (tmp_path / "factories.py").write_text(
        "import torch\n"
        "class Picky(torch.nn.Linear):\n"
        "    def forward(self, x):\n"
        "        return super().forward(x) * float(x.abs().max().item() > 0)\n"
        "def picky():\n    return Picky(784, 10)\n")
    result = profile_all_here("model", f"{MODELS}:mlp", "--input-shape", "16,784", "--iters", "3",
                              "--warmup", "1", "-b", "flop-counter", "-b", "thop", "-b",
                              "flops-profiler", "--count-on", "meta", "-o", tmp_path / "run")
    assert result.returncode == 0, result.stderr
    report = pa.load(tmp_path / "run")
    assert [(p.backends, p.ran_on) for p in report.meta.passes] == [
        ([], "cpu"), (["flop-counter"], "meta"), (["thop"], "meta"), (["flops-profiler"], "cpu")]
    counted = report.counters().set_index("counter")["flops"]
    exact = 2 * 16 * (784 * 256 + 256 * 10)  # the mlp's two Linear layers
    assert counted["flop-counter"] == exact and counted["thop"] == exact
    assert any("counted on the meta device" in doubt for doubt in report.meta.doubts)

    result = profile_all_here("model", "factories.py:picky", "--input-shape", "2,784",
                              "--iters", "2", "--warmup", "1", "-b", "flop-counter",
                              "--count-on", "meta", "-o", tmp_path / "picky", cwd=tmp_path)
    assert result.returncode != 0
    passes = pa.load(tmp_path / "picky").meta.passes
    assert passes[0].status == "ok" and passes[1].status != "ok"
    assert "--count-on meta: the model does not run on the meta device" in passes[1].error

    with pytest.raises(pa.UsageError, match="needs a SPEC"):
        pa.profile_model(torch.nn.Linear(4, 2), input_shapes=[(1, 4)], count_on="meta")
