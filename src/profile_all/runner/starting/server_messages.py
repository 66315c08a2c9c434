"""The fork server's messages: JSON objects, a line each, over a Unix stream socket; a
request carries the pass's file descriptors with it (SCM_RIGHTS)."""

from __future__ import annotations

import json
import socket
import time
from typing import Any

#: bytes enough for one message (a JSON line)
MESSAGE_BYTES = 1 << 16


def send(channel: socket.socket, message: dict[str, Any], fds: list[int] = ()) -> None:
    payload = json.dumps(message).encode() + b"\n"
    if fds:
        socket.send_fds(channel, [payload], fds)
    else:
        channel.sendall(payload)


class Lines:
    """JSON messages, a line each, read from a stream socket (which may hand over half a
    line, or two, at a time)."""

    def __init__(self, channel: socket.socket) -> None:
        self.channel = channel
        self._buffer = b""

    def holding(self) -> bool:
        """Whether part of a message, or more, was received and not yet read."""
        return bool(self._buffer)

    def read(self, timeout: float | None = None) -> dict[str, Any] | None:
        """The next message; None when the other side closed; TimeoutError after
        `timeout` seconds without a whole one."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while b"\n" not in self._buffer:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            self.channel.settimeout(left)
            try:
                chunk = self.channel.recv(MESSAGE_BYTES)
            finally:
                self.channel.settimeout(None)
            if not chunk:
                return None
            self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        return json.loads(line.decode())
