"""The pstats reader on real files made by other projects (../shared/fixtures/pstats)."""

from __future__ import annotations

import marshal
import shutil

import pandas as pd
import pytest

from profile_all.readers import IngestError
from profile_all.readers.pstats_reader import read_pstats
from profile_all.rows import MEASURED


def test_reads_hatchets_recursive_profile(fixtures):
    every = pd.DataFrame(read_pstats(fixtures / "pstats" / "cprofile-cycle.pstats"),
                         columns=MEASURED)
    assert set(every["scope"]) == {"function", "call"}  # the call tree: tests/test_call_tree
    rows = every[every["scope"] == "function"]
    totals = rows.groupby("metric")["value"].sum()
    # the facts in shared/fixtures/README.md
    assert rows["name"].nunique() == 9
    assert totals["calls"] == 101_204_007
    assert totals["primitive_calls"] == 1_004_007
    assert totals["self_time"] == pytest.approx(23.045, abs=5e-4)
    assert rows["name"].str.match(r"^(.+:\d+\(.+\)|\{.+\})$").all()


def test_python2_pstats_is_refused_with_a_clear_message(fixtures, tmp_path):
    copy = tmp_path / "py2.pstats"
    shutil.copy(fixtures / "pstats" / "cprofile-cycle-py2.pstats", copy)
    with pytest.raises(IngestError, match=r"py2.pstats: not a pstats file this Python can read "
                                          r"\(bad marshal data.*Python 2's cannot be read"):
        read_pstats(copy)


def test_missing_and_empty_files(tmp_path):
    with pytest.raises(IngestError, match="no such file"):
        read_pstats(tmp_path / "none.prof")
    (tmp_path / "empty.prof").write_bytes(b"")
    with pytest.raises(IngestError, match="not a pstats file"):
        read_pstats(tmp_path / "empty.prof")


def test_a_profile_followed_by_more_bytes_is_refused(tmp_path):
    """cProfile writes one marshal object; pstats reads the first and ignores the rest, so a
    file written twice or joined to another read as the first alone, without a word."""
    stats = {("job.py", 1, "main"): (1, 1, 0.5, 0.5, {})}
    path = tmp_path / "twice.prof"
    path.write_bytes(marshal.dumps(stats) * 2)
    with pytest.raises(IngestError, match=rf"twice.prof: {len(marshal.dumps(stats)):,} bytes "
                                          r"follow its profile \(a file written twice"):
        read_pstats(path)
    path.write_bytes(marshal.dumps([1, 2]))
    with pytest.raises(IngestError, match=r"holds list \[1, 2\], not the functions of a "
                                          "profile: not a pstats file"):
        read_pstats(path)
