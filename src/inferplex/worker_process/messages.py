"""Messages between the caller and a worker process: a length, then a pickle, on a request socket."""

from __future__ import annotations

import pickle
import socket
import struct
from typing import Any

__all__ = ["MessageSocket"]

_HEADER = struct.Struct("!Q")
_RECEIVE_CHUNK = 1 << 16


class MessageSocket:
    """One end of a request socket: whole messages (a length, then a pickle) each way.

    A message usually crosses in one call each way: one system call, one
    release of the GIL.  Bytes read past a message are kept for the next.
    """

    def __init__(self, sock: socket.socket) -> None:
        self.socket = sock
        self._pending = bytearray()

    def send(self, message: Any) -> None:
        data = pickle.dumps(message, pickle.HIGHEST_PROTOCOL)
        self.socket.sendall(_HEADER.pack(len(data)) + data)

    def receive(self) -> Any:
        """The next message; EOFError when the other side has gone."""
        pending = self._pending
        while len(pending) < _HEADER.size:
            self._fill(_HEADER.size - len(pending))
        end = _HEADER.size + _HEADER.unpack_from(pending)[0]
        while len(pending) < end:
            self._fill(end - len(pending))
        data = pending[_HEADER.size:end]  # a copy
        del pending[:end]  # taken whole, even if it does not unpickle: the next message stays readable
        return pickle.loads(data)  # noqa: S301 - our own worker process

    def _fill(self, needed: int) -> None:
        chunk = self.socket.recv(max(needed, _RECEIVE_CHUNK))
        if not chunk:
            raise EOFError("the other side closed the socket")
        self._pending += chunk

    def close(self) -> None:
        self.socket.close()
