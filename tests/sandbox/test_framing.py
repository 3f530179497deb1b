"""The frame reader a sandbox process answers through: whole frames in order however the bytes arrive,
a clear error when the other side goes away mid-frame, and no polling for a pool that asks rarely."""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Iterator

import pytest

from toolworlds.sandbox.framing import FrameError, FrameReader, encode


@pytest.fixture
def pipe() -> Iterator[tuple[int, int]]:
    reads, writes = os.pipe()
    yield reads, writes
    for descriptor in (reads, writes):
        with contextlib.suppress(OSError):  # a test may have closed it
            os.close(descriptor)


def test_frames_come_whole_and_in_order_however_the_bytes_arrive(pipe: tuple[int, int]) -> None:
    reads, writes = pipe
    messages = [{"op": "step", "n": index, "text": "é" * index} for index in range(50)]
    stream = b"".join(encode(message) for message in messages)

    def dribble() -> None:  # one byte at a time, then the rest in one go
        for index in range(200):
            os.write(writes, stream[index : index + 1])
        os.write(writes, stream[200:])

    writer = threading.Thread(target=dribble)
    writer.start()
    reader = FrameReader(reads)
    assert [reader.next() for _ in messages] == messages
    writer.join()


def test_a_frame_cut_short_by_the_other_side_is_an_error(pipe: tuple[int, int]) -> None:
    reads, writes = pipe
    os.write(writes, encode({"op": "step"})[:-3])
    os.close(writes)
    with pytest.raises(FrameError, match="bytes of a frame unread"):
        FrameReader(reads).next()


def test_after_a_long_wait_the_reader_sleeps_instead_of_polling(pipe: tuple[int, int]) -> None:
    reads, writes = pipe
    reader = FrameReader(reads, spin=0.05)

    def write_later(delay: float) -> None:
        threading.Timer(delay, os.write, (writes, encode({"op": "reset"}))).start()

    write_later(0.2)
    assert reader.next() == {"op": "reset"}  # polled its 50 ms, then slept: the request came 200 ms later
    start = time.thread_time()
    for _ in range(2):
        write_later(0.2)
        assert reader.next() == {"op": "reset"}
    # Polling would have cost about 50 ms of this thread's time per wait; sleeping costs next to none.
    assert time.thread_time() - start < 0.02
