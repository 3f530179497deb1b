"""The MCP server through the official SDK client, over stdio and over streamable HTTP."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from jsonschema import Draft202012Validator
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from tests.servers import SPADEWORK
from toolworlds.core import Finish, ToolWorld
from toolworlds.examples import EXAMPLE_WORLD
from toolworlds.examples.library import LibraryWorld
from toolworlds.hosting.export import export_world
from toolworlds.hosting.serving import launched
from toolworlds.registry import builtin_worlds

WORLDS = builtin_worlds()
pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def schemas(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folders = {}
    for name, world in WORLDS.items():
        folders[name] = tmp_path_factory.mktemp(f"mcp-export-{name}")
        export_world(world, folders[name])
    return folders


@asynccontextmanager
async def stdio_session(world: str) -> AsyncIterator[ClientSession]:
    parameters = StdioServerParameters(command=SPADEWORK[0], args=[*SPADEWORK[1:], "toolworld", "serve", world, "--mcp",
                                                                    "--transport", "stdio"])  # fmt: skip
    async with stdio_client(parameters) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


@asynccontextmanager
async def http_session(url: str) -> AsyncIterator[ClientSession]:
    async with streamable_http_client(f"{url}/mcp") as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


def _text(result: types.CallToolResult) -> str:
    return "".join(block.text for block in result.content if isinstance(block, types.TextContent))


async def _play_oracle(session: ClientSession, world: str | type[ToolWorld[Any]], seed: int, export_dir: Path) -> float:
    task = await session.call_tool("start_task", {"seed": seed})
    assert not task.is_error and task.structured_content is not None
    assert task.structured_content["seed"] == seed and task.structured_content["hint"] is None
    reference = (WORLDS[world] if isinstance(world, str) else world)()
    reference.reset(seed)
    for action in reference.solution():
        if isinstance(action, Finish):
            end = await session.call_tool("finish", {"answer": action.answer})
            assert end.structured_content is not None
            return float(end.structured_content["score"])
        result = await session.call_tool(action.name, action.arguments)
        assert not result.is_error, _text(result)
        assert result.structured_content is not None
        schema = json.loads((export_dir / "schemas" / f"{action.name}.output.json").read_text())
        Draft202012Validator(schema).validate(result.structured_content["result"])
    raise AssertionError("plan did not finish")


async def test_stdio_lists_the_worlds_tools_and_plays_whole_tasks(schemas: dict[str, Path]) -> None:
    async with stdio_session("banking") as session:
        tools = {tool.name: tool for tool in (await session.list_tools()).tools}
        world_tools = {spec.name: spec for spec in WORLDS["banking"].tools()}
        assert set(tools) == set(world_tools) | {"start_task", "finish", "get_score"}
        for name, spec in world_tools.items():
            assert tools[name].input_schema == spec.input_schema
        for seed in range(4):
            assert await _play_oracle(session, "banking", seed, schemas["banking"]) == 1.0


async def test_stdio_refusals_are_error_results() -> None:
    async with stdio_session("orders") as session:
        early = await session.call_tool("get_score", {})
        assert early.is_error and "start_task" in _text(early)
        await session.call_tool("start_task", {"seed": 0})
        spec = next(s for s in WORLDS["orders"].tools() if s.input_schema.get("required"))
        field = spec.input_schema["required"][0]
        bad = await session.call_tool(spec.name, {field: {"wrong": "type"}})
        assert bad.is_error
        refusal = json.loads(_text(bad))
        assert refusal["result"]["error"]["fields"][0]["field"] == field
        await session.call_tool("finish", {})
        late = await session.call_tool(spec.name, {})
        assert late.is_error and json.loads(_text(late))["error"]["code"] == "episode_over"


async def test_a_world_whose_code_fails_ends_its_episode_as_over_http() -> None:
    """The world's failure was a JSON-RPC error with code 0, and the (half-changed) episode played on."""
    async with stdio_session("tests/worlds/flawed.py:GradeCrash") as session:
        await session.call_tool("start_task", {"seed": 0})
        scored = await session.call_tool("get_score", {})
        assert scored.is_error and json.loads(_text(scored))["error"]["code"] == "world_error"
        assert "the world's grade raised KeyError: 'on_loan' (in grade, flawed.py line" in _text(scored)
        after = await session.call_tool("search", {"title": "Emma"})
        assert after.is_error and json.loads(_text(after))["error"]["code"] == "episode_failed"
        again = await session.call_tool("start_task", {"seed": 1})  # a new episode starts afresh
        assert not again.is_error


@pytest.mark.parametrize("world", sorted(WORLDS))
async def test_streamable_http_plays_whole_tasks_with_isolated_sessions(world: str, schemas: dict[str, Path]) -> None:
    with launched(world, "--mcp") as url:
        async with http_session(url) as first, http_session(url) as second:
            await second.call_tool("start_task", {"seed": 9})
            assert await _play_oracle(first, world, 9, schemas[world]) == 1.0
            untouched = await second.call_tool("get_score", {})
            assert untouched.structured_content == {**untouched.structured_content, "score": 0.0, "steps": 0}

            scores: list[float] = []

            async def play(session: ClientSession, seed: int) -> None:
                scores.append(await _play_oracle(session, world, seed, schemas[world]))

            async with anyio.create_task_group() as group:
                group.start_soon(play, first, 3)
                group.start_soon(play, second, 4)
            assert scores == [1.0, 1.0]


async def test_hint_is_given_only_when_asked(schemas: dict[str, Path]) -> None:
    with launched("ticketing", "--mcp") as url:
        async with http_session(url) as session:
            hinted = await session.call_tool("start_task", {"seed": 2, "include_hint": True})
            task: dict[str, Any] | None = hinted.structured_content
            assert task is not None and task["hint"] == WORLDS["ticketing"]().reset(2).hint


async def test_a_model_written_world_serves_mcp_from_the_sandbox(tmp_path: Path) -> None:
    """A bare FILE.py is untrusted: over stdio and HTTP, its episodes live in sandbox workers."""
    path = tmp_path / "library.py"
    path.write_text(EXAMPLE_WORLD)
    export_world(LibraryWorld, tmp_path / "export")
    async with stdio_session(str(path)) as session:
        listed = {tool.name for tool in (await session.list_tools()).tools}
        assert listed == {"start_task", "search", "borrow", "finish", "get_score"}
        assert await _play_oracle(session, LibraryWorld, 2, tmp_path / "export") == 1.0
        score = await session.call_tool("get_score", {})
        assert score.structured_content is not None and score.structured_content["done"] is True
    with launched(str(path), "--mcp") as url:
        async with http_session(url) as first, http_session(url) as second:
            await second.call_tool("start_task", {"seed": 5})
            assert await _play_oracle(first, LibraryWorld, 5, tmp_path / "export") == 1.0
            untouched = await second.call_tool("get_score", {})
            assert untouched.structured_content is not None and untouched.structured_content["steps"] == 0
