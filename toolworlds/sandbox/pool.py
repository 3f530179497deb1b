"""The sandbox pool: untrusted worlds run in pre-started, confined worker processes, never in this one.

Every call has a deadline the pool keeps itself; a worker that overruns one, dies, or breaks the protocol
has its whole process group killed and is replaced, and the world that was running is quarantined (every
later call on it fails at once). Episodes that shared the dead worker are lost, which the engine counts as
an infrastructure failure, never as a score. A world is loaded lazily on whichever worker an episode is
placed on, so many episodes of one world spread over the pool.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import shutil
import tempfile
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import anyio
import anyio.abc
import structlog
from pydantic import BaseModel, Field, TypeAdapter, ValidationError

from toolworlds.core import Action, Finish, StepResult, Task, ToolCall
from toolworlds.sandbox.workers import (
    SandboxError,
    SandboxStartError,
    WorkerCrashed,
    WorkerProcess,
    WorkerSettings,
    WorldTimeout,
)
from toolworlds.tool import openai_function

log = structlog.get_logger()


def default_workers() -> int:
    return max(2, min(8, 2 * (os.cpu_count() or 1)))


@dataclass(frozen=True)
class Deadlines:
    """Seconds each kind of call may take inside a worker before the pool kills it."""

    load: float = 10.0
    reset: float = 2.0
    step: float = 1.0
    grade: float = 2.0
    other: float = 2.0

    def of(self, op: str) -> float:
        return float(getattr(self, op, self.other))


@dataclass(frozen=True)
class SandboxSettings:
    workers: int = field(default_factory=default_workers)
    worker: WorkerSettings = field(default_factory=WorkerSettings)
    deadlines: Deadlines = field(default_factory=Deadlines)
    require: frozenset[str] = frozenset()  # confinement layers that must hold, or the pool refuses to start


class WorldLoadError(SandboxError):
    reason = "load_error"


class WorldCodeError(SandboxError):
    """The world's own code raised; the world stays usable, the episode decides what to do."""

    reason = "world_bug"
    fatal = False


class WorldQuarantined(SandboxError):
    reason = "quarantined"


@dataclass(frozen=True)
class WorldInfo:
    """What a loaded world declares: its name, description and tools, as JSON."""

    id: int
    name: str
    class_name: str
    description: str
    max_steps: int
    tools: list[dict[str, Any]]

    def openai_tools(self) -> list[dict[str, Any]]:
        return [openai_function(t["name"], t["description"], t["input_schema"]) for t in self.tools]


@dataclass
class _World:
    source: str
    filename: str
    info: WorldInfo | None = None
    quarantined: str | None = None


class SandboxPool:
    """Run untrusted toolworld code in confined worker processes. Use as `async with SandboxPool() as pool`."""

    def __init__(self, settings: SandboxSettings | None = None) -> None:
        self.settings = settings or SandboxSettings()
        self.confinement: dict[str, Any] = {}
        self.restarts = 0
        self._workers: list[WorkerProcess] = []
        self._worlds: dict[int, _World] = {}
        self._ids = itertools.count(1)
        self._root = Path()
        self._respawn = anyio.Lock()
        self._exit = AsyncExitStack()
        self._readers: anyio.abc.TaskGroup | None = None

    async def __aenter__(self) -> SandboxPool:
        self._root = Path(tempfile.mkdtemp(prefix="spadework-sandbox-"))
        self._root.chmod(0o711)  # workers dropped to nobody must reach their own dirs inside
        self._exit.callback(shutil.rmtree, self._root, True)
        self._readers = await self._exit.enter_async_context(anyio.create_task_group())
        self._exit.push_async_callback(self._stop_workers)
        try:
            async with anyio.create_task_group() as starting:
                for _ in range(self.settings.workers):
                    starting.start_soon(self._add_worker)
        except BaseException as error:
            await self._exit.aclose()
            if isinstance(error, BaseExceptionGroup):  # show the first worker's reason, not a group of them
                raise _first_leaf(error) from None
            raise
        self.confinement = self._workers[0].confinement
        layers, missing = sorted(self.confinement["layers"]), self.confinement["missing"]
        log.info("sandbox pool ready", workers=len(self._workers), layers=layers, missing=missing)
        return self

    @property
    def worker_pids(self) -> list[int]:
        """The live workers' process ids (each is also its process group and session): for monitoring."""
        return [worker.process.pid for worker in self._workers if worker.alive]

    async def __aexit__(self, *exc_info: object) -> None:
        await self._exit.aclose()

    async def _stop_workers(self) -> None:
        for worker in self._workers:
            await worker.kill()
        self._workers.clear()
        if self._readers is not None:
            self._readers.cancel_scope.cancel()

    # -- worlds ------------------------------------------------------------------------------

    async def load(self, source: str, filename: str = "<world>") -> WorldInfo:
        """Load model-written world code; raises `WorldLoadError` (with the reason) if it does not load."""
        world_id = next(self._ids)
        self._worlds[world_id] = _World(source, filename)
        worker = await self._pick_worker()
        info = await self._load_on(worker, world_id)
        assert info is not None
        return info

    def quarantined(self, world: WorldInfo) -> str | None:
        """Why the world is quarantined, or None while it is usable."""
        return self._worlds[world.id].quarantined

    async def unload(self, world: WorldInfo) -> None:
        self._worlds.pop(world.id, None)
        for worker in self._workers:
            if world.id in worker.loaded and worker.alive:
                worker.loaded.discard(world.id)
                await self._call(worker, {"op": "unload", "world": world.id}, None)

    async def open(self, world: WorldInfo) -> SandboxEpisode:
        """A fresh episode of `world` on the least busy worker."""
        if world.id not in self._worlds:
            raise LookupError(f"world {world.id} ({world.name}) was unloaded from this pool; load it again")
        self._check_usable(world.id)
        worker = await self._pick_worker()
        if world.id not in worker.loaded:
            await self._load_on(worker, world.id)
        episode = SandboxEpisode(self, worker, world, next(self._ids))
        await self._call(worker, {"op": "open", "world": world.id, "env": episode.id}, world.id)
        worker.episodes += 1
        return episode

    async def _load_on(self, worker: WorkerProcess, world_id: int) -> WorldInfo | None:
        world = self._worlds[world_id]
        worker.loaded.add(world_id)  # before the await: a second episode placed here meanwhile queues behind
        request = {"op": "load", "world": world_id, "source": world.source, "filename": world.filename}
        try:
            reply = await self._call(worker, request, world_id)
        except WorldCodeError as error:
            worker.loaded.discard(world_id)
            raise WorldLoadError(str(error)) from None
        if world.info is None:
            world.info = WorldInfo(id=world_id, **reply)
        return world.info

    # -- calls -------------------------------------------------------------------------------

    def _check_usable(self, world_id: int | None) -> None:
        world = self._worlds.get(world_id) if world_id is not None else None
        if world is not None and world.quarantined:
            raise WorldQuarantined(f"world {world_id} is quarantined: {world.quarantined}")

    async def _call(self, worker: WorkerProcess, request: dict[str, Any], world_id: int | None) -> Any:
        """One request under the op's deadline; a world whose request kills its worker is quarantined."""
        self._check_usable(world_id)
        op = request["op"]
        try:
            reply = await worker.request(request, self.settings.deadlines.of(op))
        except (WorldTimeout, WorkerCrashed) as failure:
            self.restarts += 1
            if world_id in self._worlds:
                self._worlds[world_id].quarantined = str(failure)
            log.warning("sandbox worker killed", op=op, world=world_id, reason=failure.reason, detail=str(failure))
            raise
        return self._unwrap(reply, op)

    @staticmethod
    def _unwrap(reply: Any, op: str) -> Any:
        if isinstance(reply, dict) and "ok" in reply:
            return reply["ok"]
        error = reply.get("error") if isinstance(reply, dict) else None
        if not isinstance(error, dict):
            raise WorldCodeError(f"the worker sent a malformed reply to {op}")
        message = str(error.get("message", "?"))
        if error.get("kind") == "load_error":
            raise WorldLoadError(message)
        raise WorldCodeError(f"{op}: {message}")

    # -- workers -----------------------------------------------------------------------------

    async def _pick_worker(self) -> WorkerProcess:
        """The live worker with the fewest episodes, after replacing any that died."""
        if any(not worker.alive for worker in self._workers):
            async with self._respawn:
                dead = [worker for worker in self._workers if not worker.alive]
                self._workers = [worker for worker in self._workers if worker.alive]
                for _ in dead:
                    await self._add_worker()
        return min(self._workers, key=lambda worker: worker.episodes)

    async def _add_worker(self) -> None:
        settings = self.settings
        worker = await WorkerProcess.spawn(self._root, settings.worker)
        lacking = settings.require - set(worker.confinement["layers"])
        if lacking:
            await worker.kill()
            missing = {layer: worker.confinement["missing"].get(layer, "not attempted") for layer in lacking}
            raise SandboxStartError(f"required sandbox layers are missing: {missing}")
        assert self._readers is not None
        self._readers.start_soon(worker.read_replies)
        self._readers.start_soon(worker.write_backlog)
        self._workers.append(worker)


def _first_leaf(group: BaseExceptionGroup[BaseException]) -> BaseException:
    first = group.exceptions[0]
    return _first_leaf(first) if isinstance(first, BaseExceptionGroup) else first


class SandboxEpisode:
    """One episode of a sandboxed world: the same calls as a `ToolWorld`, each a round trip to its worker."""

    def __init__(self, pool: SandboxPool, worker: WorkerProcess, world: WorldInfo, episode_id: int) -> None:
        self._pool = pool
        self._worker = worker
        self.world = world
        self.id = episode_id
        self.closed = False

    async def _request(self, op: str, **fields: Any) -> Any:
        return await self._pool._call(self._worker, {"op": op, "env": self.id, **fields}, self.world.id)

    async def reset(self, seed: int) -> Task:
        return _parsed(_TASK, await self._request("reset", seed=seed), "reset")

    async def step(self, action: ToolCall | Finish) -> StepResult:
        reply = await self._request("step", action=action.model_dump(mode="json"))
        return _parsed(_STEP, reply, "step")

    async def grade(self) -> tuple[float, str]:
        reply = _parsed(_GRADE, await self._request("grade"), "grade")
        return reply.score, reply.summary

    async def solution(self) -> list[ToolCall | Finish]:
        return _parsed(_SOLUTION, await self._request("solution"), "solution")

    async def snapshot(self) -> dict[str, Any]:
        return _parsed(_SNAPSHOT, await self._request("snapshot"), "snapshot")

    async def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        self._worker.episodes -= 1
        if self._worker.alive and self._pool.quarantined(self.world) is None:
            with contextlib.suppress(SandboxError):  # best effort: a dead worker holds no episode anyway
                await self._request("close")


class _Grade(BaseModel):
    score: float = Field(ge=0, le=1)
    summary: str


T = TypeVar("T")
_TASK = TypeAdapter(Task)
_STEP = TypeAdapter(StepResult)
_GRADE = TypeAdapter(_Grade)
_SOLUTION: TypeAdapter[list[ToolCall | Finish]] = TypeAdapter(list[Action])
_SNAPSHOT: TypeAdapter[dict[str, Any]] = TypeAdapter(dict[str, Any])


def _parsed(adapter: TypeAdapter[T], reply: Any, op: str) -> T:
    """Replies come from untrusted code: check their shape here before anything else believes them."""
    try:
        return adapter.validate_python(reply)
    except ValidationError as error:
        raise WorldCodeError(f"{op} returned a malformed reply: {error.errors()[0]['msg']}") from None
