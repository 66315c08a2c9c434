"""PyTorch Lightning and HuggingFace's Trainer: their actions and steps reach every
backend, in a script that knows nothing of profile-all and in one that asks for it. The
real libraries (optional: `make test-extras`), skipped with the reason where absent."""

from __future__ import annotations

import importlib.util
import pickle

import pytest

from conftest import EXAMPLES, profile_all_here, value_of


def _skip_without(*modules: str) -> pytest.MarkDecorator:
    missing = [module for module in modules if importlib.util.find_spec(module) is None]
    return pytest.mark.skipif(bool(missing), reason=f"needs {', '.join(missing)} "
                                                    "(make test-extras)")


needs_lightning = _skip_without("lightning")
needs_transformers = _skip_without("transformers", "accelerate")


def _run(tmp_path, script: str, *args: str, backends: tuple[str, ...] = ("wallclock",)):
    import profile_all as pa

    out = tmp_path / "run"
    options = [item for name in backends for item in ("-b", name)]
    done = profile_all_here("run", *options, "-o", out, EXAMPLES / script, "--", *args,
                            cwd=tmp_path, env={"OMP_NUM_THREADS": "1"})
    assert done.returncode == 0, done.stderr[-3000:]
    return pa.load(out), done


def _calls(report, name: str, parent: str) -> float:
    return value_of(report.frame, backend="wallclock", scope="region", name=name,
                    parent=parent, metric="calls")


@needs_lightning
def test_a_lightning_script_s_actions_are_regions_and_its_batches_steps(tmp_path):
    report, _done = _run(tmp_path, "train_lightning.py", "--max-steps", "12", "--val-every",
                        "6", backends=("wallclock", "torch-profiler"))
    first = report.meta.passes[0]
    assert (first.steps, first.step_source) == (12, "pa.step()")
    assert _calls(report, "run_training_batch", "run_training_epoch") == 12
    assert _calls(report, "[_TrainingEpochLoop].train_dataloader_next",
                  "run_training_epoch") == 12
    # validation inside the loop (2 times, 4 batches each), the callback's name without
    # its settings, the training step inside the optimizer step's closure
    assert _calls(report, "[Strategy]SingleDeviceStrategy.validation_step",
                  "run_training_epoch") == 8
    assert _calls(report, "[Callback]ModelCheckpoint.on_validation_end",
                  "run_training_epoch") == 2
    assert _calls(report, "[Strategy]SingleDeviceStrategy.training_step",
                  "run_training_epoch/run_training_batch/"
                  "[LightningModule]Classifier.optimizer_step") == 12
    # run_training_batch trains (it is no data loading), and the step's own work is found
    # inside run_training_epoch, which wraps the steps: no input-bound finding rests on them
    found = report.findings()
    assert not found[(found["rule"] == "input")
                     & found["evidence"].str.contains("run_training_batch|outside")].shape[0]
    # torch-profiler heard them in a window of Lightning's steps, inside the same process
    profiled = report.meta.passes[1]
    assert profiled.host == 1 and profiled.steps >= 2
    traced = report.frame.query("backend == 'torch-profiler' and scope == 'region'")
    assert "run_training_batch" in set(traced["name"])


@needs_lightning
@pytest.mark.parametrize("asked", ["simple", "profile-all"])
def test_a_trainer_given_a_profiler_keeps_it_and_is_not_marked_twice(tmp_path, asked):
    """Lightning's own (`profiler="simple"`) keeps hearing every action and prints its
    summary; profile-all's, asked for by the script, is not wrapped again."""
    report, done = _run(tmp_path, "train_lightning.py", "--max-steps", "6", "--val-every",
                        "3", "--profiler", asked)
    assert _calls(report, "run_training_batch", "run_training_epoch") == 6
    assert report.meta.passes[0].steps == 6
    if asked == "simple":
        assert "FIT Profiler Report" in done.stdout + done.stderr  # SimpleProfiler's summary


@needs_lightning
def test_the_lightning_profiler_closes_what_an_error_left_open_and_pickles():
    from profile_all import regions
    from profile_all.lightning import Profiler

    heard: list[tuple[str, str]] = []

    class Listener:
        def enter(self, name, parent):
            heard.append(("enter", name))

        def exit(self, name, parent, token):
            heard.append(("exit", name))

        def step(self):
            heard.append(("step", ""))

    profiler = Profiler()
    regions.listen([Listener()])
    try:
        profiler.start("run_training_batch")
        profiler.start("[Strategy]S.training_step")  # an exception skipped its stop
        profiler.stop("never started")
        profiler.stop("run_training_batch")
    finally:
        regions.listen(())
    assert heard == [("enter", "run_training_batch"), ("enter", "[Strategy]S.training_step"),
                     ("exit", "[Strategy]S.training_step"), ("exit", "run_training_batch"),
                     ("step", "")]
    assert isinstance(pickle.loads(pickle.dumps(profiler)), Profiler)


@needs_transformers
@pytest.mark.parametrize("asked", [False, True], ids=["found", "asked-for"])
def test_a_huggingface_trainer_s_steps_evaluation_and_saving(tmp_path, asked):
    report, _done = _run(tmp_path, "train_hf_trainer.py", "--max-steps", "8",
                         "--eval-every", "4", *(["--callback"] if asked else []))
    first = report.meta.passes[0]
    assert (first.steps, first.step_source) == (8, "pa.step()")
    assert _calls(report, "train_step", "") == 8
    assert _calls(report, "evaluate", "") == 2
    assert _calls(report, "save_checkpoint", "") == 2


@needs_transformers
def test_a_trainer_whose_code_changed_is_made_as_it_was(capsys):
    """The marks are given once the Trainer is made: where they fail (a Trainer without
    the callback handler this transformers has), the Trainer is the script's as it was,
    and a line says so; nothing raises in the script."""
    import types

    from profile_all.frameworks import _call_back_huggingface

    class Trainer:
        def __init__(self, model):
            self.model = model

    original = Trainer.__init__
    undo = _call_back_huggingface(types.SimpleNamespace(Trainer=Trainer))
    try:
        made = Trainer("m")
    finally:
        undo()
    assert made.model == "m" and Trainer.__init__ is original
    assert capsys.readouterr().err.startswith(
        "profile-all: HuggingFace's Trainer is not marked (AttributeError: ")
