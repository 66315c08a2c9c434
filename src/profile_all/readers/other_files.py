"""Files people hand to `ingest` that are none of the kinds read, named for what they are,
with what to give instead: torch's execution trace (the operators' graph, no times), its
memory timeline export, a memory snapshot (a pickle, never opened), and an archive (a tar
or zip of rank traces: unpack it and ingest the folder)."""

from __future__ import annotations

import re

_EXECUTION_TRACE = re.compile(rb'^\s*\{\s*"schema"\s*:\s*"[^"]*".{0,400}?"nodes"\s*:', re.S)
_MEMORY_TIMELINE = re.compile(rb"^\s*\[\s*\[\s*-?\d")
_PICKLE = (b"\x80\x02", b"\x80\x03", b"\x80\x04", b"\x80\x05")
_ZIP = b"PK\x03\x04"
_TAR_AT, _TAR = 257, b"ustar"


def named(text: bytes) -> str | None:
    """What a file is, from the first bytes it holds once unpacked (`text`), where it is one
    of these; None otherwise."""
    if _EXECUTION_TRACE.match(text):
        return ("an execution trace (torch.profiler.ExecutionTraceObserver, Chakra): it holds "
                "the operators' graph, not their times; ingest the Kineto trace recorded "
                "beside it (torch.profiler's export_chrome_trace or tensorboard_trace_handler)")
    if _MEMORY_TIMELINE.match(text):
        return ("a memory timeline (torch.profiler's export_memory_timeline): profile-all "
                "reads memory from the trace itself, recorded with profile_memory=True")
    if text.startswith(_PICKLE):
        return ("a pickle (a CUDA memory snapshot from torch.cuda.memory._dump_snapshot opens "
                "at https://pytorch.org/memory_viz): profile-all never unpickles a file")
    if text.startswith(_ZIP) or text[_TAR_AT:_TAR_AT + len(_TAR)] == _TAR:
        return ("an archive (tar or zip): unpack it (tar xzf FILE, unzip FILE) and ingest "
                "the folder of traces it holds")
    return None
