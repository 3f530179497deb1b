"""Model-written worlds for the `toolworld` commands: loaded, played and described only through the sandbox.

A sandboxed world is known to this process by its schemas alone (`WorldInfo`); `DescribedWorld` gives it
the shape the exporters read from a world class, so `export` writes the same files for both.
"""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar

import anyio
import structlog
from jsonschema import Draft202012Validator
from starlette.applications import Starlette

from toolworlds.checks import CheckResult, check_driver
from toolworlds.hosting.http import MAX_BODY_BYTES
from toolworlds.hosting.sessions import HostedEpisode
from toolworlds.play import Transcript, play_driven
from toolworlds.policies import OraclePolicy, RandomPolicy
from toolworlds.sandbox import SandboxPool, SandboxSettings, WorldInfo, WorldLoadError
from toolworlds.tool import ArgumentProblem, openai_function, schema_problems
from toolworlds.untrusted import ExtractionError, Repair, prepare

log = structlog.get_logger()

T = TypeVar("T")
LOCAL_DEFS = "#/$defs/"


def retarget_refs(schema: Any, ref_template: str) -> Any:
    """A copy of `schema` whose local `#/$defs/Name` references follow `ref_template` instead."""
    if isinstance(schema, dict):
        moved = {key: retarget_refs(value, ref_template) for key, value in schema.items()}
        reference = moved.get("$ref")
        if isinstance(reference, str) and reference.startswith(LOCAL_DEFS):
            moved["$ref"] = ref_template.format(model=reference.removeprefix(LOCAL_DEFS))
        return moved
    if isinstance(schema, list):
        return [retarget_refs(item, ref_template) for item in schema]
    return copy.copy(schema)


class DescribedTool:
    """A tool known by its schemas, with the reading interface of `ToolSpec` that the exporters use."""

    def __init__(self, entry: dict[str, Any]) -> None:
        self.name: str = entry["name"]
        self.description: str = entry.get("description", "")
        self.input_schema: dict[str, Any] = entry["input_schema"]
        self.output_schema: dict[str, Any] = entry["output_schema"]
        self._validator = Draft202012Validator(self.input_schema)

    @property
    def required_arguments(self) -> tuple[str, ...]:
        return tuple(self.input_schema.get("required", ()))

    def input_schema_with_refs(self, ref_template: str) -> dict[str, Any]:
        return retarget_refs(self.input_schema, ref_template)  # type: ignore[no-any-return]

    def output_schema_with_refs(self, ref_template: str) -> dict[str, Any]:
        return retarget_refs(self.output_schema, ref_template)  # type: ignore[no-any-return]

    def validate(self, arguments: object) -> tuple[dict[str, Any] | None, list[ArgumentProblem]]:
        """The schema's verdict on arguments (the world's own pydantic checks run in the sandbox, at the step)."""
        if not isinstance(arguments, dict):
            kind = type(arguments).__name__
            return None, [ArgumentProblem(field="(arguments)", problem=f"must be a JSON object, got {kind}")]
        problems = schema_problems(self._validator, arguments)
        return (None, problems) if problems else (arguments, [])

    def openai_function(self) -> dict[str, Any]:
        return openai_function(self.name, self.description, self.input_schema)


class DescribedWorld:
    """A sandboxed world as the exporters see a world class: name, description, tools."""

    def __init__(self, info: WorldInfo) -> None:
        self.name = info.name
        self.description = info.description
        self.max_steps = info.max_steps
        self._tools = [DescribedTool(entry) for entry in info.tools]

    def tools(self) -> list[DescribedTool]:
        return list(self._tools)

    def openai_tools(self) -> list[dict[str, Any]]:
        return [tool.openai_function() for tool in self._tools]


def prepared_file(path: Path) -> Repair:
    """A model-written file as `validate`'s gates judge it (extracted and repaired): the code every command
    runs. The fixes are logged, so what runs is never a silent rewrite."""
    try:
        prepared = prepare(path.read_text(errors="replace"))
    except ExtractionError as error:
        raise WorldLoadError(f"{path.name}: {error}") from None
    if prepared.fixes:
        log.warning("model-written world repaired before it runs, as validate judged it", file=str(path),
                    fixes=prepared.fixes)  # fmt: skip
    return prepared


async def load_file(pool: SandboxPool, path: Path) -> WorldInfo:
    """Load a model-written file into `pool` as the gates judge it (`prepared_file`)."""
    return await pool.load(prepared_file(path).source, path.name)


def in_sandbox(path: Path, work: Callable[[SandboxPool, WorldInfo], Awaitable[T]]) -> T:
    """Load `path` into a one-zygote sandbox, run `work` on it, and tear the sandbox down."""

    async def run() -> T:
        async with SandboxPool(SandboxSettings(zygotes=1)) as pool:
            return await work(pool, await load_file(pool, path))

    return anyio.run(run)


def describe(path: Path) -> DescribedWorld:
    async def read(pool: SandboxPool, world: WorldInfo) -> DescribedWorld:
        return DescribedWorld(world)

    return in_sandbox(path, read)


def play_in_sandbox(path: Path, seed: int, policy: OraclePolicy | RandomPolicy) -> Transcript:
    (transcript,) = plays_in_sandbox(path, [seed], lambda _: policy)
    return transcript


def plays_in_sandbox(
    path: Path, seeds: Sequence[int], policy: Callable[[int], OraclePolicy | RandomPolicy]
) -> list[Transcript]:
    """One play per seed, each an episode in a sandbox process of its own (one sandbox for all of them)."""

    async def play_all(pool: SandboxPool, world: WorldInfo) -> list[Transcript]:
        transcripts = []
        for seed in seeds:
            episode = await pool.open(world)
            try:
                transcripts.append(await play_driven(episode, seed, policy(seed), world.tools))
            finally:
                await episode.close()
        return transcripts

    return in_sandbox(path, play_all)


def check_in_sandbox(path: Path, seeds: Sequence[int]) -> list[CheckResult]:
    """The contract checks (`toolworlds.checks`) of a model-written file, played in the sandbox."""
    from toolworlds.untrusted.validate import SandboxDriver

    async def checked(pool: SandboxPool, world: WorldInfo) -> list[CheckResult]:
        return (await check_driver(SandboxDriver(pool, world), list(seeds)))[0]

    return in_sandbox(path, checked)


class SandboxedEpisodes:
    """Episodes of one model-written world, opened in a pool that lives while `running()` is entered.

    Servers enter `running()` in their lifespan (the world is loaded again there) and call the object for
    each new session's episode.
    """

    def __init__(self, path: Path) -> None:
        self.source = prepared_file(path).source
        self.filename = path.name
        self._pool: SandboxPool | None = None
        self._world: WorldInfo | None = None

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        async with SandboxPool(SandboxSettings(quarantine=False)) as pool:  # one slow call must not end the rest
            self._pool, self._world = pool, await pool.load(self.source, self.filename)
            try:
                yield
            finally:
                self._pool = self._world = None

    async def __call__(self) -> HostedEpisode:
        if self._pool is None or self._world is None:
            raise RuntimeError("the sandbox is not running: enter running() first")
        episode: HostedEpisode = await self._pool.open(self._world)
        return episode


def sandboxed_app(
    path: Path, world: DescribedWorld, capacity: int = 10_000, max_body_bytes: int = MAX_BODY_BYTES
) -> Starlette:
    """The HTTP session API of a model-written world: each session is an episode in a sandbox process of its own."""
    from toolworlds.hosting.http import create_app

    episodes = SandboxedEpisodes(path)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with episodes.running():
            yield

    return create_app(world, capacity, episodes=episodes, lifespan=lifespan, max_body_bytes=max_body_bytes)
