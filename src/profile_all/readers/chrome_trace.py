"""torch.profiler (Kineto) chrome traces -> compact event columns, in bounded memory.

Parsing a whole trace with orjson makes a dict per event (ten times the file): the event array is
cut into chunks of about CHUNK_BYTES at event boundaries, each parsed alone for the columns kept.

An event boundary is `}` `,` `{"` with optional whitespace between: a raw `{"` cannot occur inside
a JSON string (its quote would end the string), so a cut there is always between two objects. It
may fall between two objects nested in an event's args: that chunk fails to parse and is joined
with the next one. A trace without such boundaries is parsed whole.

Formats read: Kineto's pretty-printed JSON and minified JSON, `.json` or gzip (by content, not by
name); a `{"traceEvents": [...]}` object or a bare JSON array of events; the 2021 Kineto format of
TensorBoard's samples (categories `Operator`, `Kernel`, `Runtime`, `Memcpy`, `Memset`, `external
id` in lower case, `tid` strings such as `"stream 7"`, `ProfilerStep#N` as an `Operator`); string
or integer pid/tid; the rank from `distributedInfo`. `ts` and `dur` are microseconds whatever
`displayTimeUnit` says (the Trace Event Format makes that field a display hint only). The file's
bytes, the event array's span, torch's unescaped quotes and times since 1970: trace_bytes.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from operator import itemgetter
from pathlib import Path
from typing import Any

import orjson

from profile_all.readers import event_args, limits, trace_bytes
from profile_all.readers.matmul_flops import matmul_flops
from profile_all.readers.trace_rank import rank_of

CHUNK_BYTES = 4 << 20
_BOUNDARY = re.compile(rb"\}\s*,\s*\{\s*\"")

#: lower-cased category -> what the analyses call it
CATEGORIES = {
    "cpu_op": "op", "operator": "op",
    "kernel": "kernel", "gpu_memcpy": "memcpy", "memcpy": "memcpy",
    "gpu_memset": "memset", "memset": "memset",
    "cuda_runtime": "runtime", "runtime": "runtime", "cuda_driver": "runtime",
    "hip_runtime": "runtime",
    "user_annotation": "annotation", "gpu_user_annotation": "gpu_annotation",
    "python_function": "python",
}
STEP_PREFIX = "ProfilerStep#"
MODULE_PREFIX = "nn.Module: "
#: the flow events that tie a launch (`s`, on the CPU) to its device activity (`f`)
FLOW_CATEGORY = "ac2g"


@dataclass
class TraceColumns:
    """The kept events, a list of tuples per kind (names interned). Threads are "pid:tid"
    strings, so that integer and string ids ("stream 7") compare alike."""

    ops: list[tuple] = field(default_factory=list)  # trace_links._OP_COLUMNS
    # kernels, copies, fills: (name, kind, thread, ts, dur, correlation, event_args.device_args)
    device: list[tuple] = field(default_factory=list)
    # (thread, ts, device, bytes, total allocated, total reserved): `[memory]` instants
    memory: list[tuple] = field(default_factory=list)
    # (name, thread, ts, dur): `nn.Module: X` calls (with_stack or with_modules)
    modules: list[tuple] = field(default_factory=list)
    frames: list[tuple] = field(default_factory=list)  # the same of `file.py(12): f` calls
    # (name, thread, ts, dur, correlation, external_id): CUDA/HIP runtime and driver calls
    runtime: list[tuple] = field(default_factory=list)
    # (name, thread, ts, dur): record_function ranges (regions) and ProfilerStep#N
    annotations: list[tuple] = field(default_factory=list)
    gpu_annotations: list[tuple] = field(default_factory=list)  # (name, dur)
    #: ac2g flow ids by the (thread, ts) they start (launch) or finish (device) at
    flow_starts: dict[tuple[str, float], int] = field(default_factory=dict)
    flow_finishes: dict[tuple[str, float], int] = field(default_factory=dict)
    events: int = 0
    #: complete events left out for a name that is not text (null, a number, an object)
    nameless: int = 0
    #: complete events of a category no reader reads (another accelerator's), by category
    unread: dict[str, int] = field(default_factory=dict)
    #: the profiler's own span (`PyTorch Profiler (0)`, category Trace): (ts, dur)
    profiled: tuple[float, float] | None = None


@dataclass
class ChromeTrace:
    path: Path
    meta: dict[str, Any]
    columns: TraceColumns
    #: ts and dur times this give seconds: always microseconds (see the module's doc)
    seconds_per_unit: float = 1e-6

    @property
    def rank(self) -> int:
        return rank_of(self.meta, self.path)

    def extent(self) -> tuple[float, float]:
        """The profiler's own span where it holds the events' middle and is under ten times
        their length, else theirs: (start, end)."""
        kept = [(e[2], e[3]) for e in self.columns.ops + self.columns.annotations
                + self.columns.runtime] + [(e[3], e[4]) for e in self.columns.device]
        low, high = (min(t for t, _ in kept), max(t + d for t, d in kept)) if kept else (0, 0)
        start, dur = self.columns.profiled or (low, high - low)
        fits = start <= (low + high) / 2 <= start + dur and dur <= 10 * (high - low)
        return (start, start + dur) if fits else (low, high)

    def keep_steps(self, steps: int) -> None:
        """Leave out the ranges ProfilerStep#N with N >= `steps`: torch opens the next one
        at each step(), so a profile stopped after `steps` steps holds one more, the tail
        after the last step, which is not a step."""
        def kept(name: str) -> bool:
            number = name[len(STEP_PREFIX):] if name.startswith(STEP_PREFIX) else ""
            return not (number.isdigit() and int(number) >= steps)

        self.columns.annotations = [e for e in self.columns.annotations if kept(e[0])]
        self.columns.gpu_annotations = [e for e in self.columns.gpu_annotations if kept(e[0])]


def _parse_array(data: bytes, start: int, stop: int, base: int | None) -> list[dict]:
    piece = data[start:stop].rstrip().rstrip(b",")  # times past 1e15 µs: trace_bytes.ts_base
    return orjson.loads(b"[" + (trace_bytes.rebased(piece, base) if base else piece) + b"]")


class _Collector:
    """Keeps the columns of the events the analyses use; drops everything else."""

    _basic = itemgetter("name", "pid", "tid", "ts", "dur")

    def __init__(self, path: Path | None = None) -> None:
        self.columns = TraceColumns()
        self._names: dict[str, str] = {}
        self._path, self._limits = path, limits.current()

    def _name(self, name: str) -> str:
        """`name` interned, once checked against the longest field a trace may hold."""
        known = self._names.get(name)
        if known is None:
            self._limits.field(self._path, len(name), "an event's name")
            known = self._names[name] = name
        return known

    def add(self, events: list[dict]) -> None:
        columns, names, basic = self.columns, self._names, self._basic
        columns.events += len(events)
        for event in events:
            if type(event) is not dict:
                continue
            if event.get("ph") != "X":
                if event.get("name") == "[memory]":
                    self.columns.memory.append(event_args.memory_record(event))
                else:
                    self._flow(event)
                continue
            category = event.get("cat")
            if type(category) is not str:  # (an object: no category of ours)
                continue
            kind = CATEGORIES.get(category) or CATEGORIES.get(category.lower())
            if kind is None:
                columns.unread[category] = columns.unread.get(category, 0) + 1
                if category == "Trace" and event.get("name") == "PyTorch Profiler (0)":
                    columns.profiled = event_args.span(event)
                continue
            try:
                name, pid, tid, ts, dur = basic(event)
            except KeyError:
                continue
            if type(name) is not str:
                columns.nameless += 1
                continue
            args = event.get("args")
            self._keep(kind, names.get(name) or self._name(name), f"{pid}:{tid}", ts, dur,
                       args if type(args) is dict else {})

    def _keep(self, kind: str, name: str, thread: str, ts: Any, dur: Any, args: dict) -> None:
        """A complete event's columns, in the list of its kind."""
        columns = self.columns
        if kind == "op" and not name.startswith(STEP_PREFIX):
            columns.ops.append(self._op(name, thread, ts, dur, args))
        elif kind in ("op", "annotation"):  # old traces write ProfilerStep#N as an op
            columns.annotations.append((name, thread, ts, dur))
        elif kind == "python":
            if name.startswith(MODULE_PREFIX):
                columns.modules.append((name[len(MODULE_PREFIX):], thread, ts, dur))
            elif "): " in name:  # `file.py(12): function`: the operators' call stacks
                columns.frames.append((name, thread, ts, dur))
        elif kind == "gpu_annotation":
            columns.gpu_annotations.append((name, dur))
        elif kind == "runtime":
            columns.runtime.append((name, thread, ts, dur, event_args.correlation(args),
                                    event_args.external_id(args)))
        else:
            columns.device.append((name, kind, thread, ts, dur, event_args.correlation(args),
                                   *event_args.device_args(args)))

    def _op(self, name: str, thread: str, ts: Any, dur: Any, args: dict) -> tuple:
        """An operator's columns: its FLOPs as the trace says, else derived from its input
        shapes (matmuls); its shapes as text (checked against the field limit); its stack."""
        dims = args.get("Input Dims") or args.get("Input dims")
        flops = args.get("FLOPs") or (matmul_flops(name, dims) if dims else 0)
        shapes = str(dims) if dims else None
        if shapes is not None and len(shapes) > 4096:
            self._limits.field(self._path, len(shapes), f"{name!r}'s Input Dims")
        stack = args.get("Call stack")  # (2021 traces recorded with_stack; interned)
        return (name, thread, ts, dur, event_args.external_id(args), flops, shapes,
                self._name(stack) if type(stack) is str else None)

    def _flow(self, event: dict) -> None:
        """A flow event's end (ac2g: a launch's start, its kernel's finish) by its thread
        and time; other phases (counters, metadata, instants) are not kept."""
        if event.get("ph") not in ("s", "f") or event.get("cat") != FLOW_CATEGORY:
            return
        flow_id, ts = event.get("id"), event.get("ts")
        if not isinstance(flow_id, int) or ts is None:
            return
        key = (f"{event.get('pid')}:{event.get('tid')}", ts)
        target = self.columns.flow_starts if event["ph"] == "s" else self.columns.flow_finishes
        target[key] = flow_id


def read_columns(data: bytes, make: Callable[[], Any] = _Collector,
                 path: Path | None = None) -> tuple[dict[str, Any], Any] | None:
    """(metadata, the collector, made by `make`, that was given the events), or None when
    the bytes are not a trace this reader parses."""
    span = trace_bytes.events_span(data)
    if span is not None:
        opening, first, closing = span
        meta = orjson.loads(data[:opening + 1] + data[closing:])
        collector, meta = make(), {} if isinstance(meta, list) else meta
        if isinstance(meta, dict) and _collect_chunks(data, first, closing, collector, path):
            meta.pop("traceEvents", None)
            return meta, collector
    try:  # an unusual layout: parse the whole document at once
        document = orjson.loads(data)
    except orjson.JSONDecodeError:
        return None
    events = document if isinstance(document, list) else (
        document.pop("traceEvents", None) if isinstance(document, dict) else None)
    if not isinstance(events, list) or (events and not isinstance(events[0], dict)):
        return None
    collector = make()
    collector.add(events)
    return (document if isinstance(document, dict) else {}), collector


#: what reading a trace holds at its peak, per byte of its JSON (the bytes themselves, the
#: columns and the rows): 2.1 measured on a 1.6M-event CPU trace of 427 MB (564 B an event)
PEAK_PER_BYTE = 2.1


def load(path: str | Path, data: bytes | None = None) -> ChromeTrace:
    """Read a chrome trace (or its JSON `data`, read already) into compact columns;
    IngestError when it is not one."""
    path = Path(path)
    data = trace_bytes.read_bytes(path) if data is None else data
    limits.current().fits_memory(path, len(data), PEAK_PER_BYTE - 1)
    read = read_columns(data, lambda: _Collector(path), path)
    if read is None and b'"name": "' in data:
        read = read_columns(trace_bytes.escape_raw_quotes(data), lambda: _Collector(path), path)
    if read is None:
        raise trace_bytes.json_error(path, data)
    meta, collector = read
    return ChromeTrace(path, meta, collector.columns)


#: the longest one event may be, in max_field: a field, and the rest of the event
EVENT_FIELDS = 4


def _collect_chunks(data: bytes, first: int, closing: int, collector: Any,
                    path: Path | None) -> bool:
    """Parse the events chunk by chunk; False when a chunk cannot be parsed even joined
    (by spans that double, up to an event's length: an event at a time took minutes on a
    trace written twice). An event over EVENT_FIELDS x max_field is refused unparsed."""
    start, base = first, trace_bytes.ts_base(data[first:first + (1 << 16)])
    longest = EVENT_FIELDS * limits.current().max_field
    while start < closing:
        stop = closing
        if closing - start > CHUNK_BYTES:
            boundary = _BOUNDARY.search(data, start + CHUNK_BYTES, closing)
            stop = data.index(b"{", boundary.start() + 1) if boundary else closing
            # the event across the chunk's edge runs at least from the edge to `stop`
            if stop - start - CHUNK_BYTES > longest:
                raise limits.BeyondLimits(
                    f"{path}: an event is at least {(stop - start - CHUNK_BYTES) / 2**20:.0f}"
                    f" MiB long, over the {EVENT_FIELDS} x --max-field an event may hold: "
                    "refused, not read")
        more = 1 << 10
        while True:
            try:
                events = _parse_array(data, start, stop, base)
                break
            except orjson.JSONDecodeError:
                if stop == closing or stop - start > CHUNK_BYTES + longest:
                    return False  # nothing left to join, or more than an event's length
                boundary = _BOUNDARY.search(data, stop + more, closing)
                stop = data.index(b"{", boundary.start() + 1) if boundary else closing
                more *= 2
        collector.add(events)
        del events
        start = stop
    return True
