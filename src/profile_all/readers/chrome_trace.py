"""torch.profiler (Kineto) chrome traces -> compact event columns, in bounded memory.

Parsing a whole trace with orjson builds a Python dict per event, about ten times the
file's size. So the event array is cut into chunks of about CHUNK_BYTES at event
boundaries, each chunk is parsed alone, and only the columns the analyses need are kept.

An event boundary is `}` `,` `{"` with optional whitespace between: a raw `{"` cannot occur
inside a JSON string (its quote would end the string), so a cut there is always between
two objects. It may fall between two objects nested in an event's args: that chunk fails
to parse and is joined with the next one. A trace without such boundaries is parsed whole.

Formats read: Kineto's pretty-printed JSON and minified JSON, `.json` or gzip (by content,
not by name); a `{"traceEvents": [...]}` object or a bare JSON array of events; the 2021
Kineto format of TensorBoard's samples (categories `Operator`, `Kernel`, `Runtime`,
`Memcpy`, `Memset`, `external id` in lower case, `tid` strings such as `"stream 7"`,
`ProfilerStep#N` as an `Operator`); string or integer pid/tid; the rank from
`distributedInfo`. `ts` and `dur` are microseconds whatever `displayTimeUnit` says: the
Trace Event Format makes that field a display hint only.

torch writes a `"` in a record_function name raw, which is invalid JSON; such a trace is
read after re-escaping the quotes of its `"name"` lines (Kineto writes one key a line).
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

from profile_all.readers import IngestError

CHUNK_BYTES = 4 << 20
_BOUNDARY = re.compile(rb"\}\s*,\s*\{\s*\"")
_ARRAY_KEY = b'"traceEvents"'

#: lower-cased category -> what the analyses call it
CATEGORIES = {
    "cpu_op": "op", "operator": "op",
    "kernel": "kernel", "gpu_memcpy": "memcpy", "memcpy": "memcpy",
    "gpu_memset": "memset", "memset": "memset",
    "cuda_runtime": "runtime", "runtime": "runtime", "cuda_driver": "runtime",
    "hip_runtime": "runtime",
    "user_annotation": "annotation", "gpu_user_annotation": "gpu_annotation",
}
STEP_PREFIX = "ProfilerStep#"
#: the flow events that tie a launch (`s`, on the CPU) to its device activity (`f`)
FLOW_CATEGORY = "ac2g"


@dataclass
class TraceColumns:
    """The kept events, a list of tuples per kind (names interned). Threads are "pid:tid"
    strings, so that integer and string ids ("stream 7") compare alike."""

    # (name, thread, ts, dur, external_id, flops, input_dims)
    ops: list[tuple] = field(default_factory=list)
    # (name, kind, thread, ts, dur, correlation, bytes): kernels, memcpy, memset
    device: list[tuple] = field(default_factory=list)
    # (name, thread, ts, dur, correlation, external_id): CUDA/HIP runtime and driver calls
    runtime: list[tuple] = field(default_factory=list)
    # (name, thread, ts, dur): record_function ranges (regions) and ProfilerStep#N
    annotations: list[tuple] = field(default_factory=list)
    # (name, dur)
    gpu_annotations: list[tuple] = field(default_factory=list)
    #: ac2g flow ids by the (thread, ts) they start (launch) or finish (device) at
    flow_starts: dict[tuple[str, float], int] = field(default_factory=dict)
    flow_finishes: dict[tuple[str, float], int] = field(default_factory=dict)
    events: int = 0


@dataclass
class ChromeTrace:
    path: Path
    meta: dict[str, Any]
    columns: TraceColumns
    #: ts and dur times this give seconds: always microseconds (see the module's doc)
    seconds_per_unit: float = 1e-6

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
    return IngestError(f"{path}: not a torch.profiler chrome trace (no traceEvents list, "
                       "and not a JSON array of events)")


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
            if type(event) is not dict:
                continue
            phase = event.get("ph")
            if phase != "X":
                if phase in ("s", "f") and event.get("cat") == FLOW_CATEGORY:
                    self._flow(event)
                continue
            category = event.get("cat")
            kind = CATEGORIES.get(category) or CATEGORIES.get(str(category).lower())
            if kind is None:
                continue
            try:
                name, pid, tid, ts, dur = basic(event)
            except KeyError:
                continue
            name = names.setdefault(name, name)
            thread = f"{pid}:{tid}"
            args = event.get("args") or {}
            if kind == "op" and not name.startswith(STEP_PREFIX):
                dims = args.get("Input Dims") or args.get("Input dims")
                flops = args.get("FLOPs") or (matmul_flops(name, dims) if dims else 0)
                columns.ops.append((name, thread, ts, dur, _external_id(args), flops,
                                    str(dims) if dims else None))
            elif kind in ("op", "annotation"):  # old traces write ProfilerStep#N as an op
                columns.annotations.append((name, thread, ts, dur))
            elif kind == "gpu_annotation":
                columns.gpu_annotations.append((name, dur))
            elif kind == "runtime":
                columns.runtime.append((name, thread, ts, dur, _correlation(args),
                                        _external_id(args)))
            else:
                columns.device.append((name, kind, thread, ts, dur, _correlation(args),
                                       _number(args.get("bytes"))))

    def _flow(self, event: dict) -> None:
        flow_id, ts = event.get("id"), event.get("ts")
        if not isinstance(flow_id, int) or ts is None:
            return
        key = (f"{event.get('pid')}:{event.get('tid')}", ts)
        target = self.columns.flow_starts if event["ph"] == "s" else self.columns.flow_finishes
        target[key] = flow_id


def _correlation(args: dict) -> int:
    value = args.get("correlation", -1)
    return value if isinstance(value, int) else -1


def _external_id(args: dict) -> int:
    value = args.get("External id", args.get("external id", -1))
    return value if isinstance(value, int) else -1


def _number(value: Any) -> float:
    return float(value) if isinstance(value, int | float) else 0.0


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


def _events_span(data: bytes) -> tuple[int, int, int] | None:
    """(the event array's `[`, its first event's `{`, its closing `]`) when the layout is
    the usual one: a `traceEvents` array in an object, or a bare array of events."""
    stripped = len(data) - len(data.lstrip())
    if data[stripped:stripped + 1] == b"[":
        opening = stripped
    else:
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
        return opening, first, first  # an empty list
    if data[first:first + 1] != b"{":
        return None  # not an array of event objects
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
        return opening, first, closing
    return None


#: a pretty-printed name line whose value holds a raw `"` (torch does not escape them)
_RAW_QUOTED_NAME = re.compile(rb'^(\s*"name": ")(.*".*)(",?)\s*$', re.MULTILINE)


def _escape_raw_quotes(data: bytes) -> bytes:
    def escape(match: re.Match) -> bytes:
        inner = re.sub(rb'(?<!\\)"', rb'\\"', match.group(2))
        return match.group(1) + inner + match.group(3)

    return _RAW_QUOTED_NAME.sub(escape, data)


def _read_columns(data: bytes) -> tuple[dict[str, Any], TraceColumns] | None:
    """(metadata, columns), or None when the bytes are not a trace this reader parses."""
    span = _events_span(data)
    if span is not None:
        opening, first, closing = span
        meta = orjson.loads(data[:opening + 1] + data[closing:])
        collector = _Collector()
        if isinstance(meta, list):
            meta = {}
        if isinstance(meta, dict) and _collect_chunks(data, first, closing, collector):
            meta.pop("traceEvents", None)
            return meta, collector.columns
    try:  # an unusual layout: parse the whole document at once
        document = orjson.loads(data)
    except orjson.JSONDecodeError:
        return None
    events = document if isinstance(document, list) else (
        document.pop("traceEvents", None) if isinstance(document, dict) else None)
    if not isinstance(events, list) or (events and not isinstance(events[0], dict)):
        return None
    collector = _Collector()
    collector.add(events)
    return (document if isinstance(document, dict) else {}), collector.columns


def load(path: str | Path) -> ChromeTrace:
    """Read a chrome trace into compact columns; IngestError when it is not one."""
    path = Path(path)
    data = read_bytes(path)
    read = _read_columns(data)
    if read is None and b'"name": "' in data:
        read = _read_columns(_escape_raw_quotes(data))
    if read is None:
        raise _json_error(path, data)
    meta, columns = read
    return ChromeTrace(path, meta, columns)


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
