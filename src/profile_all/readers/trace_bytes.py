"""A chrome trace file's bytes: gunzipped when the content is gzip, the span of its event
array found without parsing the events, and torch's raw quotes in names repaired.

torch writes a `"` in a record_function name raw, which is invalid JSON; such a trace is
read after re-escaping the quotes of its `"name"` lines (Kineto writes one key a line).
"""

from __future__ import annotations

import re
import zlib
from pathlib import Path

import orjson

from profile_all.readers import BrokenFile, IngestError, limits

ARRAY_KEY = b'"traceEvents"'


#: how much a gzip stream is unpacked at a time while its size is watched
_PIECE = 64 * 2**20


#: the UTF-8 byte order mark
BOM = b"\xef\xbb\xbf"


def read_bytes(path: Path) -> bytes:
    """The trace's JSON bytes, gunzipped when the content is gzip (whatever the name), each
    within limits.current().max_unpacked (a bomb is stopped as it passes it)."""
    bound = limits.current()
    try:
        bound.unpacked(path, Path(path).stat().st_size)
        raw = Path(path).read_bytes()
    except FileNotFoundError:
        raise IngestError(f"{path}: no such file") from None
    except OSError as error:
        raise IngestError(f"{path}: cannot be read: {error.strerror}") from None
    if raw[:2] == b"\x1f\x8b":
        try:
            return _without_bom(_gunzip(raw, path, bound))
        except (EOFError, OSError, zlib.error) as error:
            raise BrokenFile(f"{path}: corrupt or truncated gzip data ({error})") from None
    if str(path).endswith(".gz"):
        raise IngestError(f"{path}: named .gz but is not gzip data")
    return _without_bom(raw)


def _without_bom(data: bytes | bytearray) -> bytes | bytearray:
    """The JSON without the UTF-8 byte order mark an editor may put first (JSON has none)."""
    return data[3:] if data[:3] == BOM else data


def _gunzip(raw: bytes, path: Path, bound: limits.Limits) -> bytearray:
    """gzip members one after the other, as gzip.decompress reads them, piece by piece."""
    out = bytearray()
    rest = raw
    while rest:
        unpacker = zlib.decompressobj(16 + zlib.MAX_WBITS)
        pending = rest
        while not unpacker.eof:
            piece = unpacker.decompress(pending, _PIECE)
            out += piece
            bound.unpacked(path, len(out))
            pending = unpacker.unconsumed_tail
            if not piece and not pending:
                break  # no more input, no more output: cut short
        if not unpacker.eof:
            raise EOFError("the stream ends before its end marker")
        rest = unpacker.unused_data.lstrip(b"\x00")  # (gzip pads members with zeros)
    return out  # (bytes-like: no copy of what may be gigabytes)


def json_error(path: Path, data: bytes) -> IngestError:
    try:
        orjson.loads(data)
    except orjson.JSONDecodeError as error:
        if not data.strip():
            return IngestError(f"{path}: empty file, not a trace")
        return BrokenFile(f"{path}: not valid JSON, corrupt or truncated ({error})")
    return IngestError(f"{path}: not a torch.profiler chrome trace (no traceEvents list, "
                       "and not a JSON array of events)")


#: the most bytes after the events array searched for its closing bracket (every trace
#: seen holds under 200 there: traceName, displayTimeUnit); a document with more is parsed
#: whole instead (read_columns)
MAX_TAIL = 64 << 10


def events_span(data: bytes) -> tuple[int, int, int] | None:
    """(the event array's `[`, its first event's `{`, its closing `]`) when the layout is
    the usual one: a `traceEvents` array in an object, or a bare array of events."""
    stripped = len(data) - len(data.lstrip())
    if data[stripped:stripped + 1] == b"[":
        opening = stripped
    else:
        key = data.find(ARRAY_KEY)
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
    # the closing bracket: the last `]` after which the rest of the document still parses,
    # tried on the rest alone (a 9.8 MB trace cut short tried 4,096 brackets, each with the
    # document's head: 50 s), within MAX_TAIL of the end; the whole frame once
    frame = b"[" if opening == stripped else b'{"traceEvents": ['
    closing = len(data)
    for _ in range(4096):
        closing = data.rfind(b"]", max(first, len(data) - MAX_TAIL), closing)
        if closing < 0:
            return None
        try:
            orjson.loads(frame + data[closing:])
        except orjson.JSONDecodeError:
            continue
        try:
            orjson.loads(data[:opening + 1] + data[closing:])
        except orjson.JSONDecodeError:
            return None
        return opening, first, closing
    return None


#: a pretty-printed name line whose value holds a raw `"` (torch does not escape them)
_RAW_QUOTED_NAME = re.compile(rb'^(\s*"name": ")(.*".*)(",?)\s*$', re.MULTILINE)


def escape_raw_quotes(data: bytes) -> bytes:
    def escape(match: re.Match) -> bytes:
        inner = re.sub(rb'(?<!\\)"', rb'\\"', match.group(2))
        return match.group(1) + inner + match.group(3)

    return _RAW_QUOTED_NAME.sub(escape, data)


#: a time of 15 digits of microseconds or more (since 1970: 1.7e15), as a trace writes it.
#: float64 holds such a number to 0.25 µs: a nanosecond trace's times lose their last
#: digits (an idle split came out 6.5% off), so such a trace's times are read relative to
#: a base taken off their digits (what remains holds nanoseconds exactly)
_EPOCH_TS = re.compile(rb'"ts"(\s*):(\s*)(\d{15,})(\.\d+)?')


def ts_base(head: bytes) -> int | None:
    """The base (whole seconds, in microseconds) to take off a trace's times, when its first
    time is of 15 digits or more with a fraction; None otherwise."""
    found = _EPOCH_TS.search(head)
    if found is None or not found[4]:
        return None
    return int(found[3]) // 10**6 * 10**6


def rebased(piece: bytes, base: int) -> bytes:
    """`piece` of a trace's JSON with every time of 15 digits or more less `base`, its
    fraction kept as written."""
    return _EPOCH_TS.sub(lambda found: b'"ts":' + str(int(found[3]) - base).encode()
                         + (found[4] or b""), piece)
