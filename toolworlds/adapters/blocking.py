"""A world driven from synchronous code: Gymnasium's `step`, a TRL environment's tool methods.

Episodes are asynchronous (`toolworlds.episode`), and a model-written world lives in a sandbox pool that must
stay open between calls. An event loop in a thread of its own holds the world, and its sandbox, for the
object's life; every call waits there for its answer.
"""

from __future__ import annotations

import queue
import threading
import weakref
from collections.abc import AsyncIterator, Iterator
from contextlib import AbstractContextManager, ExitStack, asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import anyio
from anyio.from_thread import BlockingPortal

from toolworlds.core import Finish, StepResult, Task, ToolCall
from toolworlds.episode import Episode, Grade, LocalWorld, World
from toolworlds.registry import is_model_written, load_world
from toolworlds.sandbox import SandboxPool, SandboxSettings
from toolworlds.untrusted.worlds import load_world_file


@asynccontextmanager
async def opened_world(spec: str) -> AsyncIterator[World]:
    """The world `spec` names (`toolworlds.registry.load_world`): a trusted one in this process, or a bare
    `.py` file, model-written, in a sandbox pool of its own for the context's life."""
    if not is_model_written(spec):
        yield LocalWorld(load_world(spec))
        return
    if not Path(spec).is_file():
        raise FileNotFoundError(f"no such world file: {spec}")
    async with SandboxPool(SandboxSettings(zygotes=1)) as pool:
        yield await load_world_file(pool, Path(spec))


@contextmanager
def daemon_portal() -> Iterator[BlockingPortal]:
    """An event loop in a daemon thread, reached through a portal. Not anyio's `start_blocking_portal`: its
    worker thread is joined at interpreter exit, so an environment its user never closed would hang the exit."""
    ready: queue.Queue[BlockingPortal | BaseException] = queue.Queue()

    async def serve() -> None:
        try:
            async with BlockingPortal() as portal:
                ready.put(portal)
                await portal.sleep_until_stopped()
        except BaseException as error:  # handed to the waiting thread
            ready.put(error)

    thread = threading.Thread(target=anyio.run, args=(serve,), name="spadework-world", daemon=True)
    thread.start()
    started = ready.get()
    if isinstance(started, BaseException):
        raise started
    try:
        yield started
    finally:
        started.call(started.stop)
        thread.join(timeout=30)


class BlockingWorld(AbstractContextManager["BlockingWorld"]):
    """`spec`'s world, opened in a thread of its own; `open()` gives episodes whose calls block. Closed by
    `close()`, or at the latest when the object is collected or the interpreter exits."""

    def __init__(self, spec: str) -> None:
        self._stack = ExitStack()
        self._portal: BlockingPortal = self._stack.enter_context(daemon_portal())
        try:
            self.world: World = self._stack.enter_context(self._portal.wrap_async_context_manager(opened_world(spec)))
        except BaseException:
            self._stack.close()
            raise
        self._closer = weakref.finalize(self, self._stack.close)

    def open(self) -> BlockingEpisode:
        return BlockingEpisode(self._portal, self._portal.call(self.world.open))

    def close(self) -> None:
        self._closer()

    def __exit__(self, *exc: object) -> None:
        self.close()


class BlockingEpisode:
    """One episode of a `BlockingWorld`: the `Episode` calls, each waiting for its answer."""

    def __init__(self, portal: BlockingPortal, episode: Episode) -> None:
        self._portal, self._episode = portal, episode

    def reset(self, seed: int) -> Task:
        return self._portal.call(self._episode.reset, seed)

    def step(self, action: ToolCall | Finish) -> StepResult:
        return self._portal.call(self._episode.step, action)

    def grade(self) -> Grade:
        return self._portal.call(self._episode.grade)

    def solution(self) -> list[ToolCall | Finish]:
        return self._portal.call(self._episode.solution)

    def snapshot(self) -> dict[str, Any]:
        return self._portal.call(self._episode.snapshot)

    def close(self) -> None:
        self._portal.call(self._episode.close)
