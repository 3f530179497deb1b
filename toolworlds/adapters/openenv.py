"""Spadework's worlds over OpenEnv's protocol: `spadework toolworld serve NAME --openenv`.

OpenEnv (0.4.1) serves one `Environment` per WebSocket session (`/ws`: reset, step, state, close) and the same
session's tools over its JSON-RPC (`/mcp`: tools/list, tools/call). Here an environment is one episode of the
world at a time: `reset(seed=S)` opens task S (`hinted=True` adds the privileged hint) and answers its
instruction; `ListToolsAction` lists the world's tools and `finish` with their own JSON Schemas;
`CallToolAction(tool_name, arguments)` is one call, answered with the world's observation (an error
observation is a result the agent reads, not a transport error); the call that ends the episode (`finish`,
or the world's step limit) has `done` and the world's grade as its reward, the scorecard in its metadata.
Every other step's reward is 0. A model-written world runs in the sandbox (`BlockingWorld`), never in the
server's process.
"""

from __future__ import annotations

import json
from typing import Any, ClassVar

from openenv.core.env_server import (
    CallToolAction,
    CallToolObservation,
    Environment,
    ListToolsAction,
    ListToolsObservation,
    Observation,
    State,
    Tool,
    ToolError,
    ToolErrorType,
    create_fastapi_app,
)

from toolworlds.adapters.blocking import BlockingEpisode, BlockingWorld
from toolworlds.core import action_of, named_call
from toolworlds.tool import FINISH_FUNCTION


class TaskObservation(Observation):  # type: ignore[misc]  # OpenEnv's classes are untyped
    """What `reset` answers: the task. (No field may be called `tools` or `tool_name`: OpenEnv's MCP client
    tells observations apart by those keys.)"""

    world: str
    seed: int
    instruction: str
    hint: str | None = None
    max_steps: int


class EpisodeState(State):  # type: ignore[misc]
    """`state`: OpenEnv's episode id and step count, and which task, whether it ended and its score."""

    world: str = ""
    seed: int | None = None
    done: bool = False
    score: float | None = None


class ToolworldOpenEnv(Environment):  # type: ignore[misc]  # OpenEnv's classes are untyped
    """One session's episodes of a world; `openenv_app` makes a subclass per served world."""

    SUPPORTS_CONCURRENT_SESSIONS = True  # every session has its own episode
    world: ClassVar[BlockingWorld]
    tools: ClassVar[list[Tool]]

    def __init__(self) -> None:
        super().__init__()
        self._episode: BlockingEpisode | None = None
        self._state = EpisodeState(world=self.world.world.name)

    def reset(self, seed: int | None = None, episode_id: str | None = None, hinted: bool = False,
              **_: Any) -> TaskObservation:  # fmt: skip
        self.close()
        self._episode = self.world.open()
        task = self._episode.reset(seed or 0)
        named = {"episode_id": episode_id} if episode_id else {}
        self._state = EpisodeState(world=task.world, seed=task.seed, **named)
        return TaskObservation(world=task.world, seed=task.seed, instruction=task.instruction, max_steps=task.max_steps,
                               hint=task.hint if hinted else None)  # fmt: skip

    def step(self, action: Any, timeout_s: float | None = None, **_: Any) -> Observation:
        if isinstance(action, ListToolsAction):
            return ListToolsObservation(tools=self.tools, done=self._state.done, reward=self._state.score)
        if not isinstance(action, CallToolAction):
            raise ValueError(f"a {type(action).__name__} is not a tool action: send ListToolsAction or CallToolAction")
        if self._episode is None or self._state.done:
            why = "call reset first" if self._episode is None else "the episode has ended; reset for another"
            error = ToolError(error_type=ToolErrorType.EXECUTION_ERROR, message=why)
            return CallToolObservation(tool_name=action.tool_name, done=self._state.done, reward=self._state.score,
                                       error=error)  # fmt: skip
        name, arguments = action.tool_name, dict(action.arguments)
        result = self._episode.step(action_of(name, arguments))
        self._state.step_count += 1
        text = json.dumps(result.observation, ensure_ascii=False)
        is_error = isinstance(result.observation, dict) and "error" in result.observation
        observation = CallToolObservation(
            tool_name=name, result={"content": [{"type": "text", "text": text}], "data": result.observation,
                                    "is_error": is_error}, reward=0.0, done=result.done)  # fmt: skip
        if result.done:
            grade = self._episode.grade()
            self._state.done, self._state.score = True, grade.score
            observation.reward = grade.score
            observation.metadata = {"scorecard": grade.scorecard, "truncated": result.truncated}
        return observation

    @property
    def state(self) -> EpisodeState:
        return self._state

    def close(self) -> None:
        if self._episode is not None:
            episode, self._episode = self._episode, None
            episode.close()


def openenv_app(world: str, max_sessions: int = 64) -> Any:
    """OpenEnv's FastAPI app serving `world` (a registered name, `file.py:Class`, a spec, or a model-written
    `.py`, sandboxed) to at most `max_sessions` sessions at once."""
    opened = BlockingWorld(world)
    tools = [Tool(name=entry["function"]["name"], description=entry["function"].get("description", ""),
                  input_schema=entry["function"].get("parameters") or {"type": "object", "properties": {}})
             for entry in [*opened.world.openai_tools(), FINISH_FUNCTION]]  # fmt: skip
    environment = type(f"{opened.world.name.title().replace('_', '')}OpenEnv", (ToolworldOpenEnv,),
                       {"world": opened, "tools": tools})  # fmt: skip
    return create_fastapi_app(environment, CallToolAction, CallToolObservation, max_concurrent_envs=max_sessions,
                              env_name=opened.world.name)  # fmt: skip


def main(argv: list[str] | None = None) -> None:
    """`python -m toolworlds.adapters.openenv WORLD [SEED]`: `spadework toolworld serve WORLD --openenv` started,
    then WORLD's reference solution played through OpenEnv's own client, call by call."""
    import sys

    from openenv.core import GenericEnvClient

    from toolworlds.hosting.serving import launched

    args = sys.argv[1:] if argv is None else argv
    world, seed = (args[0] if args else "banking"), int(args[1]) if len(args) > 1 else 0
    with BlockingWorld(world) as opened:
        episode = opened.open()
        episode.reset(seed)
        plan = episode.solution()
        episode.close()
    with launched(world, "--openenv", timeout=120) as url, GenericEnvClient(base_url=url).sync() as env:
        print(f"OpenEnv server: {url}")
        task = env.reset(seed=seed).observation
        print(f"task: {task['instruction']}")
        for call in plan:
            name, arguments = named_call(call)
            result = env.step({"type": "call_tool", "tool_name": name, "arguments": arguments})
            print(f"> {name}({json.dumps(arguments)})\n< {json.dumps(result.observation['result']['data'])[:160]}")
        print(f"done: {result.done}, reward (the world's grade): {result.reward}")


if __name__ == "__main__":
    main()
