"""What the terminal prints reads as text: findings wrap between words under their own
indent, counts agree with their nouns, times never show an exponent, headers are words,
and a doubt about a figure stands beside the figure."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from profile_all import units as fmt
from profile_all.render.terminal import _indented
from profile_all.report.findings.finding import latency_doubt
from profile_all.run_record import RunRecord


@pytest.mark.parametrize("seconds, shown", [
    (999.96e-6, "1 ms"), (0.0009994, "999 µs"), (1234.5, "1,234 s"), (0.5, "500 ms"),
    (12.3456e-9, "12.3 ns"), (3.0, "3 s")])
def test_times_take_the_unit_of_their_rounded_value(seconds, shown):
    assert fmt.seconds(seconds) == shown


def test_sizes_keep_their_bytes_and_never_an_exponent():
    assert fmt.size(1023.9) == "1,024 B"
    assert fmt.size(5 * 2**30) == "5 GiB"
    assert "e+" not in fmt.size(3000 * 2**30)


def test_counts_agree_with_their_nouns():
    assert fmt.counted(1, "more row") == "1 more row"
    assert fmt.counted(1234, "more row") == "1,234 more rows"
    assert fmt.counted(2, "process", "processes") == "2 processes"


def test_a_long_finding_wraps_between_words_under_its_indent():
    stream = io.StringIO()
    text = ("2. ██████░░░░░░░░░░░░░░ 30.6%  the allocator's page faults hold 30.6% of the "
            "latency: each iteration faulted in 670 pages; try "
            "MALLOC_TRIM_THRESHOLD_=1073741824 MALLOC_MMAP_THRESHOLD_=33554432 in the "
            "environment")
    _indented(Console(file=stream, width=60), text)
    lines = stream.getvalue().splitlines()
    assert len(lines) > 2 and all(len(line) <= 60 for line in lines)
    assert all(line.startswith("      ") and not line[6:].startswith(" ") for line in lines[1:])
    words = " ".join(line.strip() for line in lines).split()
    assert words == text.split()  # no word cut, none lost


class _Model:
    def __init__(self, model):
        self.meta = RunRecord(model=model)


def test_an_unstable_latency_is_doubted_beside_what_rests_on_it():
    assert latency_doubt(_Model({"unstable": False, "cv": 0.05})) == ""
    said = latency_doubt(_Model({"unstable": True, "cv": 0.7}))
    assert "unstable (coefficient of variation 70%, over 10%)" in said
