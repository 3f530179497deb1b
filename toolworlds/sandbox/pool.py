"""The sandbox pool: untrusted worlds run in confined processes, one process per episode, never in this one.

A few zygotes (confined fork servers that never run world code) fork one process per episode; the process
loads the world, plays that one episode and is killed when it closes. Nothing an episode does to its
interpreter (patched classes, module state, threads, caches) can reach another episode of any world, and
every episode starts from the same clean state. To keep an open cheap, the pool holds `spares` processes
per world that have already loaded it.

Every call has a deadline the pool keeps itself; an episode process that overruns one, dies, or breaks the
protocol is killed, and its world is quarantined (every later call on it fails at once). Only that episode
is lost, which the engine counts as an infrastructure failure, never as a score.
"""

from __future__ import annotations

import itertools
import os
import shutil
import tempfile
import time
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NotRequired, TypeVar

import anyio
import anyio.abc
import structlog
from pydantic import TypeAdapter, ValidationError
from typing_extensions import TypedDict  # pydantic takes typing's only from Python 3.12

from toolworlds.core import Action, Finish, StepResult, Task, ToolCall
from toolworlds.episode import Grade
from toolworlds.sandbox.processes import (
    EpisodeLost,
    EpisodeProcess,
    SandboxError,
    SandboxProcess,
    SandboxStartError,
    WorkerCrashed,
    WorkerSettings,
    WorldTimeout,
    Zygote,
)
from toolworlds.tool import OpenAITool, openai_function

log = structlog.get_logger()
# How often deadlines are checked: a request is killed at most this late.
WATCHDOG_SECONDS = 0.05


def default_zygotes() -> int:
    """One fork server per four cores: a fork costs about a millisecond of the zygote's time."""
    return max(1, min(4, (os.cpu_count() or 1) // 4))


@dataclass(frozen=True)
class Deadlines:
    """Seconds each kind of call may take inside a sandbox process before the pool kills it."""

    load: float = 10.0
    reset: float = 2.0
    step: float = 1.0
    grade: float = 2.0
    other: float = 2.0

    def of(self, op: str) -> float:
        return float(getattr(self, op, self.other))


@dataclass(frozen=True)
class SandboxSettings:
    zygotes: int = field(default_factory=default_zygotes)
    spares: int = 1  # processes per world that have loaded it and wait for an episode
    process: WorkerSettings = field(default_factory=WorkerSettings)
    deadlines: Deadlines = field(default_factory=Deadlines)
    require: frozenset[str] = frozenset()  # confinement layers that must hold, or the pool refuses to start
    # A world one of whose requests hung or killed its process is refused from then on (the designer's loops
    # stop spending on it); a server keeps serving it: only that episode fails.
    quarantine: bool = True


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

    def openai_tools(self) -> list[OpenAITool]:
        return [openai_function(t["name"], t["description"], t["input_schema"]) for t in self.tools]


@dataclass
class _World:
    source: str
    filename: str
    info: WorldInfo | None = None
    quarantined: str | None = None
    spares: list[EpisodeProcess] = field(default_factory=list)
    playing: set[EpisodeProcess] = field(default_factory=set)
    filling: int = 0


class SandboxPool:
    """Run untrusted toolworld code in confined processes. Use as `async with SandboxPool() as pool`."""

    def __init__(self, settings: SandboxSettings | None = None) -> None:
        self.settings = settings or SandboxSettings()
        self.confinement: dict[str, Any] = {}
        self.killed = 0  # sandbox processes killed (or found dead) for a failure
        self._zygotes: list[Zygote] = []
        self._worlds: dict[int, _World] = {}
        self._episodes: set[EpisodeProcess] = set()
        self._ids = itertools.count(1)
        self._root = Path()
        self._respawn = anyio.Lock()
        self._exit = AsyncExitStack()
        self._tasks: anyio.abc.TaskGroup | None = None
        self._stopping = False

    async def __aenter__(self) -> SandboxPool:
        self._root = Path(tempfile.mkdtemp(prefix="spadework-sandbox-"))
        self._root.chmod(0o711)  # processes dropped to nobody must reach their own dirs inside
        self._exit.callback(shutil.rmtree, self._root, True)
        self._tasks = await self._exit.enter_async_context(anyio.create_task_group())
        self._exit.push_async_callback(self._stop)
        self._tasks.start_soon(self._watch_deadlines)
        try:
            async with anyio.create_task_group() as starting:
                for _ in range(self.settings.zygotes):
                    starting.start_soon(self._add_zygote)
            self.confinement = await self._probe()
        except BaseException as error:
            await self._exit.aclose()
            if isinstance(error, BaseExceptionGroup):  # show the first zygote's reason, not a group of them
                raise _first_leaf(error) from None
            raise
        layers, missing = sorted(self.confinement["layers"]), self.confinement["missing"]
        log.info("sandbox pool ready", zygotes=len(self._zygotes), layers=layers, missing=missing)
        return self

    async def _probe(self) -> dict[str, Any]:
        """The layers an episode process actually holds (what world code runs under), checked against `require`."""
        process = await self._fork(await self._pick_zygote(), None)
        try:
            report = self._unwrap(await process.first_frame(), "probe")["confinement"]
        finally:
            self._close(process)
        lacking = self.settings.require - set(report["layers"])
        if lacking:
            missing = {layer: report["missing"].get(layer, "not attempted") for layer in lacking}
            raise SandboxStartError(f"required sandbox layers are missing: {missing}")
        return dict(report)

    @property
    def zygote_pids(self) -> list[int]:
        """The live zygotes' process ids; each leads the session that holds all its episode processes."""
        return [zygote.process.pid for zygote in self._zygotes if zygote.alive]

    async def __aexit__(self, *exc_info: object) -> None:
        await self._exit.aclose()

    async def _stop(self) -> None:
        self._stopping = True
        for process in list(self._episodes):
            self._close(process)
        for zygote in self._zygotes:
            await zygote.stop()  # it waits for its episode processes to die, so none is left a zombie
        self._zygotes.clear()
        if self._tasks is not None:
            self._tasks.cancel_scope.cancel()

    async def _watch_deadlines(self) -> None:
        """Kill every process whose request has overrun its deadline: one clock for all, not a timer per call."""
        while True:
            await anyio.sleep(WATCHDOG_SECONDS)
            now = time.monotonic()
            for process in [*self._zygotes, *self._episodes]:
                process.overdue(now)

    # -- worlds ------------------------------------------------------------------------------

    async def load(self, source: str, filename: str = "<world>") -> WorldInfo:
        """Load model-written world code; raises `WorldLoadError` (with the reason) if it does not load.

        The process that loaded it is kept as the world's first spare.
        """
        world_id = next(self._ids)
        world = self._worlds[world_id] = _World(source, filename)
        process = await self._spawn(world_id)
        world.spares.append(process)
        self._top_up(world)
        assert world.info is not None
        return world.info

    def quarantined(self, world: WorldInfo) -> str | None:
        """Why the world is quarantined, or None while it is usable."""
        return self._worlds[world.id].quarantined

    async def unload(self, world: WorldInfo) -> None:
        state = self._worlds.pop(world.id, None)
        if state is not None:  # its open episodes end with it
            for process in [*state.spares, *state.playing]:
                self._close(process)
        for zygote in self._zygotes:
            if world.id in zygote.compiled and zygote.alive:
                zygote.compiled.discard(world.id)
                await self._call(zygote, {"op": "forget", "world": world.id}, None)

    async def open(self, world: WorldInfo) -> SandboxEpisode:
        """A fresh episode of `world` in a process of its own (a spare when one is ready)."""
        state = self._worlds.get(world.id)
        if state is None:
            raise LookupError(f"world {world.id} ({world.name}) was unloaded from this pool; load it again")
        self._check_usable(world.id)
        while state.spares and not state.spares[0].alive:
            state.spares.pop(0)
        process = state.spares.pop(0) if state.spares else await self._spawn(world.id)
        state.playing.add(process)
        self._top_up(state)
        return SandboxEpisode(self, process, world)

    def _top_up(self, world: _World) -> None:
        """Start loading spares in the background until the world has `spares` of them."""
        assert self._tasks is not None
        for _ in range(self.settings.spares - len(world.spares) - world.filling):
            world.filling += 1
            self._tasks.start_soon(self._add_spare, world)

    async def _add_spare(self, world: _World) -> None:
        assert world.info is not None
        try:
            process = await self._spawn(world.info.id)
        except SandboxError as error:  # the next open meets the same error, if it is the world's
            if not self._stopping:
                log.warning("sandbox spare failed", world=world.info.id, reason=error.reason, detail=str(error))
            return
        finally:
            world.filling -= 1
        if world.quarantined or self._worlds.get(world.info.id) is not world:
            self._close(process)
        else:
            world.spares.append(process)

    # -- processes ---------------------------------------------------------------------------

    async def _spawn(self, world_id: int) -> EpisodeProcess:
        """A new episode process that has loaded the world."""
        world = self._worlds.get(world_id)
        if world is None:
            raise EpisodeLost(f"world {world_id} was unloaded")
        zygote = await self._pick_zygote()
        if world_id not in zygote.compiled:
            zygote.compiled.add(world_id)  # before the await: a second spawn placed here meanwhile queues behind
            request = {"op": "compile", "world": world_id, "source": world.source, "filename": world.filename}
            try:
                await self._call(zygote, request, world_id, deadline="load")
            except SandboxError:
                zygote.compiled.discard(world_id)
                raise
        process = await self._fork(zygote, world_id)
        try:
            first = await self._failing(process.first_frame(), world_id, "load")
            payload = self._unwrap(first, "load")
        except BaseException:
            self._close(process)
            raise
        if world.info is None:
            world.info = WorldInfo(id=world_id, **payload["world"])
        return process

    async def _fork(self, zygote: Zygote, world_id: int | None) -> EpisodeProcess:
        """Have `zygote` fork an episode process (for None, a probe that loads nothing) and take it over."""
        episode = next(self._ids)
        zygote.forking += 1
        # A fork the zygote was asked for is taken over even when the caller is cancelled meanwhile (the spawn
        # deadline bounds the wait), then closed at the caller's next checkpoint: left unclaimed, its process
        # would live on, and its descriptors would stay in flight, where the kernel caps them per user (a
        # later hand-over fails with ETOOMANYREFS).
        with anyio.CancelScope(shield=True):
            try:
                reply = await self._call(zygote, {"op": "spawn", "world": world_id, "episode": episode}, world_id)
                channel, pidfd = zygote.take_handover(episode)
            finally:
                zygote.forking -= 1
        settings = self.settings
        process = EpisodeProcess(
            channel, pidfd, int(reply["pid"]), settings.process.max_reply_bytes, settings.deadlines.load
        )
        if self._stopping:  # forked while the pool stops, after it closed every episode it knew
            process.close()
            raise EpisodeLost("the sandbox pool is stopping")
        self._episodes.add(process)
        return process

    def _close(self, process: EpisodeProcess, world: int | None = None) -> None:
        process.close()
        self._episodes.discard(process)
        if world in self._worlds:
            self._worlds[world].playing.discard(process)

    # -- calls -------------------------------------------------------------------------------

    def _check_usable(self, world_id: int | None) -> None:
        world = self._worlds.get(world_id) if world_id is not None else None
        if world is not None and world.quarantined:
            raise WorldQuarantined(f"world {world_id} is quarantined: {world.quarantined}")

    async def _call(
        self, process: SandboxProcess, request: dict[str, Any], world_id: int | None, deadline: str = ""
    ) -> Any:
        """One request under the op's deadline; a world whose request kills its process is quarantined."""
        self._check_usable(world_id)
        op = request["op"]
        reply = await self._failing(process.request(request, self.settings.deadlines.of(deadline or op)), world_id, op)
        return self._unwrap(reply, op)

    async def _failing(self, call: Any, world_id: int | None, op: str) -> Any:
        """Await `call`; a timeout or crash it ends in quarantines the world it was for."""
        try:
            return await call
        except (WorldTimeout, WorkerCrashed) as failure:
            self.killed += 1
            if world_id in self._worlds and self.settings.quarantine:
                world = self._worlds[world_id]
                world.quarantined = str(failure)
                for spare in world.spares:  # no episode will take them now
                    self._close(spare)
                world.spares.clear()
            log.warning("sandbox process killed", op=op, world=world_id, reason=failure.reason, detail=str(failure))
            raise

    @staticmethod
    def _unwrap(reply: Any, op: str) -> Any:
        if isinstance(reply, dict) and "ok" in reply:
            return reply["ok"]
        error = reply.get("error") if isinstance(reply, dict) else None
        if not isinstance(error, dict):
            raise WorldCodeError(f"the sandbox sent a malformed reply to {op}")
        message = str(error.get("message", "?"))
        if error.get("kind") == "load_error":
            raise WorldLoadError(message)
        raise WorldCodeError(f"{op}: {message}")

    # -- zygotes -----------------------------------------------------------------------------

    async def _pick_zygote(self) -> Zygote:
        """The live zygote with the fewest forks in flight, after replacing any that died."""
        if any(not zygote.alive for zygote in self._zygotes):
            async with self._respawn:
                dead = [zygote for zygote in self._zygotes if not zygote.alive]
                self._zygotes = [zygote for zygote in self._zygotes if zygote.alive]
                for _ in dead:
                    await self._add_zygote()
        return min(self._zygotes, key=lambda zygote: zygote.forking)

    async def _add_zygote(self) -> None:
        self._zygotes.append(await Zygote.spawn(self._root, self.settings.process))


def _first_leaf(group: BaseExceptionGroup[BaseException]) -> BaseException:
    first = group.exceptions[0]
    return _first_leaf(first) if isinstance(first, BaseExceptionGroup) else first


class SandboxEpisode:
    """One episode of a sandboxed world: the same calls as a `ToolWorld`, each a round trip to its process."""

    def __init__(self, pool: SandboxPool, process: EpisodeProcess, world: WorldInfo) -> None:
        self._pool = pool
        self._process = process
        self.world = world
        self.id = process.pid
        self.closed = False

    async def _request(self, op: str, **fields: Any) -> Any:
        return await self._pool._call(self._process, {"op": op, **fields}, self.world.id)

    async def reset(self, seed: int) -> Task:
        return _parsed(_TASK, await self._request("reset", seed=seed), "reset")

    async def step(self, action: ToolCall | Finish) -> StepResult:
        reply = await self._request("step", action=action)  # the frame's encoder serializes the model
        return StepResult.model_construct(**_parsed(_STEP, reply, "step"))

    async def grade(self) -> Grade:
        return _parsed(_GRADE, await self._request("grade"), "grade")

    async def solution(self) -> list[ToolCall | Finish]:
        return _parsed(_SOLUTION, await self._request("solution"), "solution")

    async def snapshot(self) -> dict[str, Any]:
        return _parsed(_SNAPSHOT, await self._request("snapshot"), "snapshot")

    async def close(self) -> None:
        """Kill the episode's process: nothing of it outlives the episode."""
        if not self.closed:
            self.closed = True
            self._pool._close(self._process, self.world.id)


class _StepReply(TypedDict):
    """A `StepResult`'s shape, checked into a plain dict. The reply was decoded from JSON, so its values
    need no walk as `JsonValue` (that walk was about a quarter of this process's side of a step, by py-spy)."""

    observation: Any
    reward: float
    terminated: bool
    truncated: bool
    info: NotRequired[dict[str, Any]]


T = TypeVar("T")
_TASK = TypeAdapter(Task)
_STEP = TypeAdapter(_StepReply)
_GRADE = TypeAdapter(Grade)
_SOLUTION: TypeAdapter[list[ToolCall | Finish]] = TypeAdapter(list[Action])
_SNAPSHOT: TypeAdapter[dict[str, Any]] = TypeAdapter(dict[str, Any])


def _parsed(adapter: TypeAdapter[T], reply: Any, op: str) -> T:
    """Replies come from untrusted code: check their shape here before anything else believes them."""
    try:
        return adapter.validate_python(reply)
    except ValidationError as error:
        raise WorldCodeError(f"{op} returned a malformed reply: {error.errors()[0]['msg']}") from None
