"""torch.profiler (Kineto) chrome traces -> compact event columns, in bounded memory.

Parsing a whole trace with orjson builds a Python dict per event, about ten times the
file's size. So the `traceEvents` array is cut into chunks of about CHUNK_BYTES at event
boundaries, each chunk is parsed alone, and only the columns the analyses need are kept.

An event boundary is `}` `,` `{"` with optional whitespace between: a raw `{"` cannot occur
inside a JSON string (its quote would end the string), so a cut there is always between
two objects. It may fall between two objects nested in an event's args: that chunk fails
to parse and is joined with the next one. A trace without such boundaries is parsed whole.

Formats read: Kineto's pretty-printed JSON and minified JSON, `.json` or gzip (by content,
not by name), category names in either case (`cpu_op`/`Operator`, `kernel`/`Kernel`...),
`displayTimeUnit: "ns"` (ts and dur in ns) or anything else (µs, the format's default),
string or integer pid/tid, and the rank from `distributedInfo`.
"""

from __future__ import annotations

import gzip
import re
import zlib
from dataclasses import dataclass, field
from operator import itemgetter
from pathlib import Path
from typing import Any

import orjson

from profile_all.ingest import IngestError

CHUNK_BYTES = 4 << 20
_BOUNDARY = re.compile(rb"\}\s*,\s*\{\s*\"")
_ARRAY_KEY = b'"traceEvents"'

#: lower-cased category -> what the analyses call it
CATEGORIES = {
    "cpu_op": "op", "operator": "op",
    "kernel": "kernel", "gpu_memcpy": "memcpy", "memcpy": "memcpy",
    "gpu_memset": "memset", "memset": "memset",
    "cuda_runtime": "runtime", "runtime": "runtime", "cuda_driver": "runtime",
    "user_annotation": "annotation", "gpu_user_annotation": "gpu_annotation",
}


@dataclass
class TraceColumns:
    """The kept events, a list of tuples per kind (names interned)."""

    # (name, pid, tid, ts, dur, external_id, flops, input_dims)
    ops: list[tuple] = field(default_factory=list)
    # (name, kind, dur, external_id): kernels, memcpy and memset on the device
    device: list[tuple] = field(default_factory=list)
    # (name, pid, tid, ts, dur)
    annotations: list[tuple] = field(default_factory=list)
    # (name, dur)
    gpu_annotations: list[tuple] = field(default_factory=list)
    runtime_calls: int = 0
    events: int = 0


@dataclass
class ChromeTrace:
    path: Path
    meta: dict[str, Any]
    columns: TraceColumns
    seconds_per_unit: float  # ts and dur times this give seconds

    @property
    def rank(self) -> int:
        info = self.meta.get("distributedInfo") or {}
        rank = info.get("rank", 0) if isinstance(info, dict) else 0
        return int(rank) if isinstance(rank, int | str) and str(rank).isdigit() else 0


def read_bytes(path: Path) -> bytes:
    """The trace's JSON bytes, gunzipped when the content is gzip (whatever the name)."""
    try:
        raw = Path(path).read_bytes()
    except FileNotFoundError:
        raise IngestError(f"{path}: no such file") from None
    except OSError as error:
        raise IngestError(f"{path}: cannot be read: {error.strerror}") from None
    if raw[:2] == b"\x1f\x8b":
        try:
            return gzip.decompress(raw)
        except (EOFError, OSError, zlib.error) as error:
            raise IngestError(f"{path}: corrupt or truncated gzip data ({error})") from None
    if str(path).endswith(".gz"):
        raise IngestError(f"{path}: named .gz but is not gzip data")
    return raw


def _json_error(path: Path, data: bytes) -> IngestError:
    try:
        orjson.loads(data)
    except orjson.JSONDecodeError as error:
        if not data.strip():
            return IngestError(f"{path}: empty file, not a trace")
        return IngestError(f"{path}: not valid JSON, corrupt or truncated ({error})")
    return IngestError(f"{path}: not a torch.profiler chrome trace (no traceEvents list)")


def _parse_array(data: bytes, start: int, stop: int) -> list[dict]:
    return orjson.loads(b"[" + data[start:stop].rstrip().rstrip(b",") + b"]")


class _Collector:
    """Keeps the columns of the events the analyses use; drops everything else."""

    _basic = itemgetter("name", "pid", "tid", "ts", "dur")

    def __init__(self) -> None:
        self.columns = TraceColumns()
        self._names: dict[str, str] = {}

    def add(self, events: list[dict]) -> None:
        columns, names, basic = self.columns, self._names, self._basic
        columns.events += len(events)
        for event in events:
            if type(event) is not dict or event.get("ph") != "X":
                continue
            category = event.get("cat")
            kind = CATEGORIES.get(category) or CATEGORIES.get(str(category).lower())
            if kind is None:
                continue
            if kind == "runtime":
                columns.runtime_calls += 1
                continue
            try:
                name, pid, tid, ts, dur = basic(event)
            except KeyError:
                continue
            name = names.setdefault(name, name)
            args = event.get("args") or {}
            if kind == "op":
                dims = args.get("Input Dims")
                flops = args.get("FLOPs") or (matmul_flops(name, dims) if dims else 0)
                columns.ops.append((name, pid, tid, ts, dur, _external_id(args), flops,
                                    str(dims) if dims else None))
            elif kind == "annotation":
                columns.annotations.append((name, pid, tid, ts, dur))
            elif kind == "gpu_annotation":
                columns.gpu_annotations.append((name, dur))
            else:
                columns.device.append((name, kind, dur, _external_id(args)))


#: matrix products whose FLOPs the shapes give: operator -> positions of its two matrices
MATMUL_OPERANDS = {"aten::mm": (0, 1), "aten::addmm": (1, 2), "aten::bmm": (0, 1),
                   "aten::baddbmm": (1, 2)}


def matmul_flops(name: str, dims: list) -> int:
    """FLOPs of a matrix product from its input shapes, as torch's with_flops counts them
    (2 x batch x M x K x N): traces of recent torch carry the shapes but not the count.
    Other operators get 0 (not derived)."""
    operands = MATMUL_OPERANDS.get(name)
    if operands is None:
        return 0
    try:
        first, second = dims[operands[0]], dims[operands[1]]
        *batch, m, k = first
        n = second[-1]
        return 2 * (batch[0] if batch else 1) * m * k * n
    except (ValueError, TypeError, IndexError):
        return 0


def _external_id(args: dict) -> int:
    value = args.get("External id", args.get("external id", -1))
    return value if isinstance(value, int) else -1


def _events_span(data: bytes) -> tuple[int, int] | None:
    """(first event's `{`, the array's closing `]`) when the layout is the usual one."""
    key = data.find(_ARRAY_KEY)
    if key < 0:
        return None
    opening = data.find(b"[", key)
    first = opening + 1
    while first < len(data) and data[first] in b" \t\r\n":
        first += 1
    if first >= len(data):
        return None
    if data[first:first + 1] == b"]":
        return first, first  # an empty list
    # the closing bracket: the last `]` after which the rest of the document still parses
    closing = len(data)
    for _ in range(4096):
        closing = data.rfind(b"]", first, closing)
        if closing < 0:
            return None
        try:
            orjson.loads(data[:opening + 1] + data[closing:])
        except orjson.JSONDecodeError:
            continue
        return first, closing
    return None


def load(path: str | Path) -> ChromeTrace:
    """Read a chrome trace into compact columns; IngestError when it is not one."""
    path = Path(path)
    data = read_bytes(path)
    span = _events_span(data)
    collector = _Collector()
    meta = None
    if span is not None:
        first, closing = span
        meta = orjson.loads(data[:data.find(b"[", data.find(_ARRAY_KEY)) + 1] + data[closing:])
        if isinstance(meta, dict) and _collect_chunks(data, first, closing, collector):
            meta.pop("traceEvents", None)
        else:
            collector, meta = _Collector(), None
    if meta is None:  # an unusual layout, or a bad file: parse the whole document at once
        try:
            document = orjson.loads(data)
        except orjson.JSONDecodeError:
            raise _json_error(path, data) from None
        if not isinstance(document, dict) or not isinstance(document.get("traceEvents"), list):
            raise _json_error(path, data)
        collector.add(document.pop("traceEvents"))
        meta = document
    unit = 1e-9 if meta.get("displayTimeUnit") == "ns" else 1e-6
    return ChromeTrace(path, meta, collector.columns, unit)


def _collect_chunks(data: bytes, first: int, closing: int, collector: _Collector) -> bool:
    """Parse the events chunk by chunk; False when a chunk cannot be parsed even joined."""
    start = first
    while start < closing:
        stop = closing
        if closing - start > CHUNK_BYTES:
            boundary = _BOUNDARY.search(data, start + CHUNK_BYTES, closing)
            if boundary:
                stop = data.index(b"{", boundary.start() + 1)
        while True:
            try:
                events = _parse_array(data, start, stop)
                break
            except orjson.JSONDecodeError:
                if stop == closing:  # nothing left to join
                    return False
                boundary = _BOUNDARY.search(data, stop + 1, closing)
                stop = data.index(b"{", boundary.start() + 1) if boundary else closing
        collector.add(events)
        del events
        start = stop
    return True
