"""Models: FLOPs of every counter against counts made by hand, the benchmark's numbers,
flops-profiler's patches undone, and the batch search."""

from __future__ import annotations

import itertools

import pytest
import torch

import profile_all as pa
from conftest import REPO
from profile_all.model import timing_method

EXAMPLES = REPO / "scripts" / "examples" / "models.py"

# One forward pass, by hand: 2 FLOPs per multiply-accumulate of each matmul/convolution.
MLP_FORWARD = 2 * 32 * (784 * 256 + 256 * 10)  # batch 32
CNN_FORWARD = (2 * 8 * (16 * 32 * 32) * (3 * 3 * 3)  # conv1 at 32x32, batch 8
               + 2 * 8 * (32 * 16 * 16) * (16 * 3 * 3)  # conv2 at 16x16
               + 2 * 8 * (32 * 8 * 8) * 10)  # linear head
ENCODER_FORWARD = (2 * 64 * 64 * 192  # q, k, v projections of 4 x 16 tokens
                   + 2 * 2 * (4 * 4) * 16 * 16 * 16  # q.k^T and attn.v, 4 heads of 16
                   + 2 * 64 * 64 * 64  # output projection
                   + 2 * 2 * 64 * 64 * 128)  # feed-forward up and down
# Training: backward is 2x forward for every matmul, less the first layer's input
# gradient, which nobody asks for (the input does not require grad).
MLP_TRAIN = 3 * MLP_FORWARD - 2 * 32 * 784 * 256
CNN_TRAIN = 3 * CNN_FORWARD - 2 * 8 * (16 * 32 * 32) * 27
# The flash attention backward also recomputes the scores q.k^T (one more matmul).
ENCODER_TRAIN = 3 * ENCODER_FORWARD - 2 * 64 * 64 * 192 + 2 * (4 * 4) * 16 * 16 * 16


def _model(name: str) -> torch.nn.Module:
    from importlib.util import module_from_spec, spec_from_file_location

    spec = spec_from_file_location("example_models", EXAMPLES)
    module = module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, name)()


def _counters(report) -> dict[str, float]:
    table = report.counters()
    return dict(zip(table["counter"], table["flops"], strict=True))


@pytest.mark.parametrize("name, shape, forward, train", [
    ("mlp", (32, 784), MLP_FORWARD, MLP_TRAIN),
    ("small_cnn", (8, 3, 32, 32), CNN_FORWARD, CNN_TRAIN),
    ("encoder_layer", (4, 16, 64), ENCODER_FORWARD, ENCODER_TRAIN),
])
def test_flop_counter_is_exact_forward_and_backward(tmp_path, name, shape, forward, train):
    for is_train, expected in ((False, forward), (True, train)):
        report = pa.profile_model(_model(name), input_shapes=[shape], train=is_train,
                                  backends=["flop-counter"], iters=5, warmup=1,
                                  out=tmp_path / f"{name}-{is_train}")
        assert _counters(report)["flop-counter"] == expected, (name, is_train)


def test_counters_side_by_side_on_the_mlp(tmp_path):
    report = pa.profile_model(_model("mlp"), input_shapes=[(32, 784)], iters=5, warmup=1,
                              out=tmp_path / "run")
    table = report.counters().set_index("counter")
    assert table.loc["thop", "flops"] == MLP_FORWARD  # 2 x its MACs: the same matmuls
    assert table.loc["thop", "macs"] == MLP_FORWARD / 2
    assert table.loc["flops-profiler", "flops"] == MLP_FORWARD + 32 * 256  # + the ReLU
    assert table.loc["flops-profiler", "cause"].startswith("element-wise ops counted")
    assert (table["params"] == 784 * 256 + 256 + 256 * 10 + 10).all()
    modules = report.modules().set_index("module")
    assert modules.loc["Sequential.0", "flop-counter"] == 2 * 32 * 784 * 256
    assert modules.loc["Sequential.0", "thop"] == 2 * 32 * 784 * 256
    assert modules.loc["Sequential.2", "flops-profiler"] == 2 * 32 * 256 * 10


def test_attention_missed_by_a_counter_is_explained_and_flagged(tmp_path):
    report = pa.profile_model(_model("encoder_layer"), input_shapes=[(4, 16, 64)], iters=5,
                              warmup=1, out=tmp_path / "run")
    table = report.counters().set_index("counter")
    assert table.loc["flop-counter", "flops"] == ENCODER_FORWARD  # fast path made countable
    assert table.loc["flops-profiler", "vs_reference"] < -0.3
    # flops-profiler counts nothing in self_attn: its projections and attention are missed
    attention = 2 * 64 * 64 * 192 + 2 * 2 * (4 * 4) * 16 * 16 * 16 + 2 * 64 * 64 * 64
    assert table.loc["flops-profiler", "cause"].startswith(
        f"attention not counted (MultiheadAttention): -{attention:,} FLOP per call; "
        f"element-wise ops counted (LayerNorm): +")
    # thop's attention rule adds a softmax inside the module where flop-counter counts the
    # matmuls: no recorded fact establishes that, so it is left unexplained, with its size
    assert "unexplained: +" in table.loc["thop", "cause"]
    summary = (tmp_path / "run" / "summary.md").read_text()
    assert "flops-profiler counted 0 FLOPs for TransformerEncoderLayer.self_attn" in summary


def test_training_compares_forward_only_counters_at_3x(tmp_path):
    report = pa.profile_model(_model("mlp"), input_shapes=[(32, 784)], train=True, iters=5,
                              warmup=1, out=tmp_path / "run")
    table = report.counters().set_index("counter")
    assert table.loc["thop", "flops"] == 3 * MLP_FORWARD
    assert table.loc["flop-counter", "flops"] == MLP_TRAIN
    assert table.loc["thop", "cause"] == (
        f"backward estimated as 2x forward: {3 * MLP_FORWARD - MLP_TRAIN:+,} FLOP per call "
        f"from the measured {MLP_TRAIN - MLP_FORWARD:,}")
    latency = report.latency()
    regions = set(report.frame.loc[report.frame["scope"] == "model", "name"])
    assert regions == {"train_step"}
    assert set(latency["metric"]) >= {"latency", "fps", "achieved_flops"}
    # one iteration's FLOPs, forward and measured backward, over one iteration's latency
    values = latency.set_index(["metric", "stat"])["value"]
    assert values[("achieved_flops", "value")] == pytest.approx(
        MLP_TRAIN / values[("latency", "median")])


def test_flops_profiler_patches_are_undone_in_process(tmp_path):
    originals = torch.bmm, torch.matmul, torch.nn.functional.linear, torch.Tensor.add
    report = pa.profile_model(_model("mlp"), input_shapes=[(4, 784)],
                              backends=["flops-profiler"], iters=3, warmup=1,
                              out=tmp_path / "run")
    assert (torch.bmm, torch.matmul, torch.nn.functional.linear, torch.Tensor.add) == originals
    notes = [f["error"] for p in report.meta.passes for f in p.backend_failures]
    assert notes == ["flops-profiler leaves torch functions patched after it stops; put "
                     "back, so the script runs unchanged: torch.bmm"]
    a, b = torch.randn(2, 3, 4), torch.randn(2, 4, 5)
    assert torch.bmm(a, b).shape == (2, 3, 5)


def test_benchmark_statistics_and_achieved_flops(tmp_path):
    report = pa.profile_model(_model("mlp"), input_shapes=[(32, 784)], backends=[],
                              iters=None, warmup=3, budget_seconds=2, out=tmp_path / "run",
                              peak_flops=1e12)
    latency = report.latency().set_index(["metric", "stat"])["value"]
    median = latency[("latency", "median")]
    assert latency[("latency", "ci95_low")] <= median <= latency[("latency", "ci95_high")]
    assert latency[("latency", "min")] <= median <= latency[("latency", "p99")]
    assert latency[("warmup_iterations", "total")] == 3
    assert latency[("iterations", "total")] >= timing_method.MIN_ADAPTIVE_ITERS
    assert latency[("fps", "median")] == pytest.approx(32 / median)
    # no counter ran: no achieved FLOP/s is invented
    assert ("achieved_flops", "value") not in latency.index
    assert report.meta.model["clock"] == "perf_counter"


def test_median_confidence_interval_covers_the_median():
    samples = [float(value) for value in range(1, 102)]
    low, high = timing_method.median_confidence_interval(samples)
    assert low < 51 < high
    assert high - low < 25
    stats = timing_method.latency_statistics(samples)
    assert stats["median"] == 51 and stats["iqr"] == 50 and stats["cv"] > 0.5


def test_batch_search_on_cpu_stops_when_throughput_stops_improving(tmp_path):
    report = pa.profile_model(_model("mlp"), input_shapes=[(1, 784)], batch_size="auto",
                              backends=[], iters=5, warmup=1, out=tmp_path / "run")
    batches = report.batches()
    sizes = list(batches["batch_size"])
    assert sizes[0] == 1 and all(b == 2 * a for a, b in itertools.pairwise(sizes))
    assert (batches["peak_memory"] > 0).all()
    best = report.meta.model["best_batch_size"]
    assert best == batches.loc[batches["throughput"].idxmax(), "batch_size"]


def test_search_bisects_after_an_out_of_memory():
    fits_up_to = 45

    def measure_at(batch):
        if batch > fits_up_to:
            return None
        return timing_method.BatchPoint(batch, latency=0.001, peak_memory=batch * 1e6)

    points = timing_method.search_batch_size(measure_at, on_gpu=True)
    assert max(p.batch_size for p in points) == fits_up_to


def test_achieved_flops_per_region_when_a_timer_times_the_regions(tmp_path):
    report = pa.profile_model(_model("mlp"), input_shapes=[(32, 784)], train=True,
                              backends=["wallclock", "flop-counter"], iters=20, warmup=2,
                              out=tmp_path / "run")
    frame = report.frame
    counted = frame[(frame["backend"] == "flop-counter") & (frame["scope"] == "region")
                    & (frame["metric"] == "flops") & (frame["stat"] == "mean")]
    per_region = dict(zip(counted["name"], counted["value"], strict=True))
    assert per_region["forward"] == MLP_FORWARD
    assert per_region["backward"] == MLP_TRAIN - MLP_FORWARD
    assert per_region["train_step"] == MLP_TRAIN
    achieved = frame[(frame["backend"] == "derived") & (frame["scope"] == "region")]
    timed = frame[(frame["backend"] == "wallclock") & (frame["name"] == "backward")
                  & (frame["metric"] == "wall_time") & (frame["stat"] == "median")]
    backward = achieved[achieved["name"] == "backward"]["value"].item()
    assert backward == pytest.approx((MLP_TRAIN - MLP_FORWARD) / timed["value"].item())
