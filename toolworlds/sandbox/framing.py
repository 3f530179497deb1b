"""The wire between the pool and a worker: a 4-byte big-endian length, then that many bytes of JSON.

Requests are `{"op": ..., ...}`; every request gets exactly one reply, `{"ok": value}` or
`{"error": {"kind": ..., "message": ...}}`, in order. The parent caps what it will read, so a worker that
lies about a length cannot make it allocate without bound.
"""

from __future__ import annotations

import os
import select
import struct
import time
from typing import Any

from pydantic_core import from_json, to_json

HEADER = struct.Struct(">I")


def encode(message: Any) -> bytes:
    body = to_json(message)
    return HEADER.pack(len(body)) + body


def decode(body: bytes) -> Any:
    return from_json(body)


class FrameError(Exception):
    """The other side broke the protocol or went away mid-frame."""


def write_frame(descriptor: int, message: Any) -> None:
    write_all(descriptor, encode(message))


def write_all(descriptor: int, data: bytes) -> None:
    """Write all of `data` to a blocking descriptor: a sandbox process's side of its channel."""
    view = memoryview(data)
    while view:
        view = view[os.write(descriptor, view) :]


class FrameReader:
    """Reads frames from a blocking pipe or socket, taking every byte available per system call."""

    def __init__(self, descriptor: int, spin: float = 0.0) -> None:
        self._descriptor = descriptor
        self.spin = spin
        self._buffer = bytearray()
        self._last_wait = 0.0
        os.set_blocking(descriptor, True)

    def _poll(self, deadline: float) -> None:
        """Poll until `deadline` before a read that would sleep in the kernel.

        On a virtual machine an idle vCPU takes hundreds of microseconds to wake, several times the cost
        of a step; a process that polls (yielding the core) for `spin` seconds answers a waiting pool at once.
        It polls only while the last wait was that short: a busy pool that serves many processes asks each
        again milliseconds later, and polling for it would only take cores from the rest.
        """
        while not select.select([self._descriptor], [], [], 0)[0] and time.monotonic() < deadline:
            os.sched_yield()

    def pending(self) -> bool:
        """Whether a whole frame is already buffered."""
        if len(self._buffer) < HEADER.size:
            return False
        size: int = HEADER.unpack_from(self._buffer)[0]
        return len(self._buffer) >= HEADER.size + size

    def next(self) -> Any:
        """The next frame, blocking until it has arrived."""
        waiting = time.monotonic()
        while not self.pending():
            if self.spin and self._last_wait <= self.spin:
                self._poll(waiting + self.spin)
            chunk = os.read(self._descriptor, 1 << 16)
            if not chunk:
                raise FrameError(f"pipe closed with {len(self._buffer)} bytes of a frame unread")
            self._buffer += chunk
        self._last_wait = time.monotonic() - waiting
        (size,) = HEADER.unpack_from(self._buffer)
        body = bytes(self._buffer[HEADER.size : HEADER.size + size])
        del self._buffer[: HEADER.size + size]
        return decode(body)
