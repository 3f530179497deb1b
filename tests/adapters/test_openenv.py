"""`spadework toolworld serve NAME --openenv` against OpenEnv's own clients (openenv 0.4.1): the server started
as a user starts it, a task reset by its seed, the world's tools listed with their own schemas, the reference
solution played through OpenEnv's tool actions to the world's grade, for a reference world, a trusted Python
file, a spec file and a model-written file (which runs in the sandbox, never in the server's process)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from openenv.core import CallToolAction, GenericEnvClient, MCPToolClient

from toolworlds.adapters.blocking import BlockingWorld
from toolworlds.core import Finish, ToolCall, named_call
from toolworlds.examples import EXAMPLE_SPEC, EXAMPLE_WORLD
from toolworlds.hosting.serving import launched
from toolworlds.tool import FINISH_TOOL

EXAMPLES = Path(__file__).parents[2] / "toolworlds" / "examples"


@pytest.fixture(scope="module", params=["reference", "python-file", "spec-file", "model-written"])
def served(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """(the world as named on the command line, the server's URL)."""
    folder = tmp_path_factory.mktemp("worlds")
    world = {"reference": lambda: "banking",
             "python-file": lambda: f"{EXAMPLES / 'library.py'}:LibraryWorld",
             "spec-file": lambda: _written(folder / "library.json", EXAMPLE_SPEC),
             "model-written": lambda: _written(folder / "written.py", EXAMPLE_WORLD)}[request.param]()  # fmt: skip
    with launched(world, "--openenv", timeout=120) as url:
        yield world, url


def _written(path: Path, text: str) -> str:
    path.write_text(text)
    return str(path)


def _solution(world: str, seed: int) -> list[tuple[str, dict[str, object]]]:
    """The reference solution of task `seed`, as (tool, arguments) calls."""
    with BlockingWorld(world) as opened:
        episode = opened.open()
        episode.reset(seed)
        plan = episode.solution()
        episode.close()
    return [named_call(call) for call in plan]


def _score_here(world: str, seed: int, calls: list[ToolCall]) -> float:
    """The world's grade of `calls` then `finish` on task `seed`, played in this process (or its sandbox)."""
    with BlockingWorld(world) as opened:
        episode = opened.open()
        episode.reset(seed)
        for call in [*calls, Finish()]:
            result = episode.step(call)
        episode.close()
    return result.reward


def test_the_reference_solution_played_through_openenv_earns_the_worlds_grade(served: tuple[str, str]) -> None:
    world, url = served
    plan = _solution(world, seed=2)
    with GenericEnvClient(base_url=url).sync() as env:
        opened = env.reset(seed=2)
        assert opened.observation["seed"] == 2 and opened.observation["instruction"] and not opened.done
        assert opened.observation["hint"] is None, "the hint is privileged: only hinted=True shows it"
        results = [env.step({"type": "call_tool", "tool_name": name, "arguments": arguments})
                   for name, arguments in plan]  # fmt: skip
        assert all(result.reward == 0.0 and not result.done for result in results[:-1])
        last = results[-1]
        assert last.done and last.reward == 1.0
        assert last.metadata is not None and last.metadata["scorecard"] and last.metadata["truncated"] is False
        state = env.state()
        assert state["seed"] == 2 and state["done"] and state["score"] == 1.0 and state["step_count"] == len(plan)
        after = env.step({"type": "call_tool", "tool_name": FINISH_TOOL, "arguments": {}})
        assert after.done and "ended" in after.observation["error"]["message"]


def test_openenvs_mcp_client_lists_the_worlds_tools_and_calls_them(served: tuple[str, str]) -> None:
    world, url = served
    with BlockingWorld(world) as opened:
        expected = {entry["function"]["name"]: entry["function"]["parameters"] for entry in opened.world.openai_tools()}
    with MCPToolClient(base_url=url).sync() as env:
        env.reset(seed=0, hinted=True)
        tools = {tool.name: tool.input_schema for tool in env.list_tools()}
        assert tools == {**expected, FINISH_TOOL: tools[FINISH_TOOL]} and FINISH_TOOL in tools
        name, arguments = _solution(world, seed=0)[0]
        assert env.call_tool(name, **arguments) is not None
        wrong = env.call_tool(name, no_such_argument=1)
        assert wrong["error"]["code"], "a bad call is the world's error observation, for the agent to read"
        ended = env.step(CallToolAction(tool_name=FINISH_TOOL, arguments={}))
        calls = [ToolCall(name=name, arguments=arguments), ToolCall(name=name, arguments={"no_such_argument": 1})]
        assert ended.done and ended.reward == _score_here(world, 0, calls), "the grade the world gives those calls"


def test_sessions_are_episodes_of_their_own() -> None:
    with (
        launched("banking", "--openenv", "--capacity", "2", timeout=120) as url,
        GenericEnvClient(base_url=url).sync() as first,
        GenericEnvClient(base_url=url).sync() as second,
    ):
        hinted = first.reset(seed=0, hinted=True).observation
        plain = second.reset(seed=1).observation
        assert hinted["hint"] and plain["hint"] is None and hinted["instruction"] != plain["instruction"]
        ended = first.step({"type": "call_tool", "tool_name": FINISH_TOOL, "arguments": {}})
        assert ended.done and first.state()["done"] and not second.state()["done"]
        assert second.state()["seed"] == 1 and second.state()["step_count"] == 0
