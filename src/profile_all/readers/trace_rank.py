"""The rank a chrome trace names in `distributedInfo`, checked: ranks are bounded."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from profile_all.readers import IngestError

MAX_RANK = 2**20  # the highest rank a trace may name (a million ranks)


def rank_of(meta: dict[str, Any], path: Path) -> int:
    """`distributedInfo.rank` (0 where it says none); IngestError where it is beyond any
    job's ranks (a 5,000-digit rank once reached int() and a traceback)."""
    info = meta.get("distributedInfo") or {}
    rank = info.get("rank", 0) if isinstance(info, dict) else 0
    text = str(rank) if isinstance(rank, int | str) and not isinstance(rank, bool) else ""
    if not text.isdigit():
        return 0
    if len(text) > len(str(MAX_RANK)) or int(text) > MAX_RANK:
        raise IngestError(f"{path}: distributedInfo.rank is {text[:20]}"
                          f"{'...' if len(text) > 20 else ''}: not a rank (0 to "
                          f"{MAX_RANK:,})")
    return int(text)
