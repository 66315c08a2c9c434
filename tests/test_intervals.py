"""Unions and overlaps of device intervals, on cases worked out by hand."""

import numpy as np
import pytest

from profile_all.readers import intervals


def _a(*values):
    return np.array(values, dtype=float)


@pytest.mark.parametrize(("starts", "ends", "union"), [
    ((), (), 0.0),
    ((0, 1, 5, 6), (2, 3, 7, 6.5), 5.0),  # [0, 3] and [5, 7]; [6, 6.5] inside
    ((0, 2), (2, 4), 4.0),  # touching
    ((0, 1), (10, 2), 10.0),  # nested
    ((5, 0), (6, 1), 2.0),  # unsorted
])
def test_union(starts, ends, union):
    assert intervals.union_length(_a(*starts), _a(*ends)) == union


def test_overlap_of_two_unions():
    talking = (_a(0, 5), _a(3, 7))
    computing = (_a(2, 6.5, 10, 2.5), _a(5.5, 8, 11, 2.6))  # the last inside the first
    assert intervals.overlap_length(talking, computing) == 1 + 0.5 + 0.5
    assert intervals.overlap_length(talking, (_a(), _a())) == 0
