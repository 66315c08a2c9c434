"""Text that others wrote (a target's region names and errors, another tool's file, a run
folder from elsewhere), made safe to show: every control character is shown as its escape,
and bytes that are not UTF-8 (a Linux path may hold any) as theirs.

A name holding `\\x1b[2J\\x1b[31m` cleared and recoloured the user's terminal when a run
printed it, and kept its bytes in summary.md. So each renderer (terminal, markdown, HTML,
CSV and JSON out of `show`, the CLI's error line) shows C0 and C1 controls, DEL and the
bidirectional overrides (which reorder what a reader sees) as `\\x1b`, `\\n`, `\\u202e`: the
text is still there to read, and no byte of it acts on the terminal.
"""

from __future__ import annotations

import re

_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def _escape(found: re.Match[str]) -> str:
    return repr(found.group())[1:-1]


def visible(text: str) -> str:
    """`text` with every control character shown as its Python escape, and as valid UTF-8
    text (`utf8`)."""
    return _CONTROL.sub(_escape, utf8(text))


def visible_all(value: object) -> object:
    """Every string in `value` (dicts, lists and tuples of them) made `visible`."""
    if isinstance(value, str):
        return visible(value)
    if isinstance(value, dict):
        return {visible_all(key): visible_all(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [visible_all(item) for item in value]
    return value


def utf8(text: str) -> str:
    """`text` as valid UTF-8 text: Python holds a name made of bytes that are not UTF-8
    (a Linux path: `s\\xfe.py`) with lone surrogates, which Arrow, orjson and a terminal
    refuse. Such bytes are shown as `\\xfe`, any other lone surrogate as `\\udcff`."""
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        try:
            raw = text.encode("utf-8", "surrogateescape")
        except UnicodeEncodeError:
            return text.encode("utf-8", "backslashreplace").decode("utf-8")
        return raw.decode("utf-8", "backslashreplace")
    return text


def utf8_all(value: object) -> object:
    """Every string in `value` (dicts, lists and tuples of them) made `utf8`."""
    if isinstance(value, str):
        return utf8(value)
    if isinstance(value, dict):
        return {utf8_all(key): utf8_all(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [utf8_all(item) for item in value]
    return value
