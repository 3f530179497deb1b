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
    """Write all of `data`, waiting while the descriptor is full: a sandbox process's side of its channel."""
    view = memoryview(data)
    while view:
        try:
            view = view[os.write(descriptor, view) :]
        except BlockingIOError:  # the channel is non-blocking for reads, and so for writes too
            select.select([], [descriptor], [])


class FrameReader:
    """Reads frames from a non-blocking pipe, taking every byte available per system call.

    A pool keeps many requests in flight per worker, so one read usually brings several frames.
    """

    def __init__(self, descriptor: int, spin: float = 0.0) -> None:
        self._descriptor = descriptor
        self.spin = spin
        self._buffer = bytearray()
        os.set_blocking(descriptor, False)

    def _wait(self) -> None:
        """Poll for a moment, then sleep in the kernel.

        On a virtual machine an idle vCPU takes hundreds of microseconds to wake, several times the cost
        of a step; a worker that polls (yielding the core) for `spin` seconds answers a busy pool at once.
        """
        deadline = time.monotonic() + self.spin
        while time.monotonic() < deadline:
            if select.select([self._descriptor], [], [], 0)[0]:
                return
            os.sched_yield()
        select.select([self._descriptor], [], [])

    def pending(self) -> bool:
        """Whether a whole frame is already buffered."""
        if len(self._buffer) < HEADER.size:
            return False
        size: int = HEADER.unpack_from(self._buffer)[0]
        return len(self._buffer) >= HEADER.size + size

    def next(self) -> Any:
        """The next frame, blocking until it has arrived."""
        while not self.pending():
            try:
                chunk = os.read(self._descriptor, 1 << 16)
            except BlockingIOError:
                self._wait()
                continue
            if not chunk:
                raise FrameError(f"pipe closed with {len(self._buffer)} bytes of a frame unread")
            self._buffer += chunk
        (size,) = HEADER.unpack_from(self._buffer)
        body = bytes(self._buffer[HEADER.size : HEADER.size + size])
        del self._buffer[: HEADER.size + size]
        return decode(body)
