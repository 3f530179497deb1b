"""Spadework's worlds as a verifiers environment: `load_environment("banking")`, scored by the world's grade.

verifiers (0.4) builds an environment from a taskset (rows to tasks; a task's `setup` runs before each rollout,
its `@vf.reward`s after) and a harness (the agent's program; it may run in this process as long as every model
call goes through the rollout's endpoint, where verifiers records it). Here a task is one seed of a world:
`setup` opens its episode, the harness plays it over the chat API (the world's tools with their own JSON
Schemas, and `finish`), and the one reward is the world's own grade of the state reached, its scorecard in the
trace's info. A model-written world runs in the sandbox (`BlockingWorld`), never in this process.

verifiers finds a taskset by the name of a top-level module; this one registers itself as `spadework_toolworlds`
when imported, so `load_environment` (and verifiers' `run_eval` in the same process) finds it.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import Iterator
from typing import Any, ClassVar

import verifiers.v1 as vf
from openai import APIStatusError, AsyncOpenAI
from pydantic import PrivateAttr
from verifiers.v1.runtimes import ProgramResult, SubprocessConfig

from toolworlds.adapters.blocking import BlockingEpisode, BlockingWorld
from toolworlds.core import action_of, error_observation
from toolworlds.tool import FINISH_FUNCTION

PLUGIN_ID = "spadework_toolworlds"  # the top-level name verifiers imports a taskset by
_WORLDS: dict[str, BlockingWorld] = {}  # one opened world (and sandbox) per spec, for the process's life


def _world(spec: str) -> BlockingWorld:
    if spec not in _WORLDS:
        _WORLDS[spec] = BlockingWorld(spec)
    return _WORLDS[spec]


class ToolworldData(vf.TaskData):  # type: ignore[misc]  # verifiers' classes are untyped to mypy
    """One row: a world and the seed of its task, and whether the agent sees the privileged hint."""

    world: str
    seed: int = 0
    hinted: bool = False


class ToolworldState(vf.State):  # type: ignore[misc]
    """One rollout's episode (live objects in private attributes: nothing tries to serialise them)."""

    _episode: BlockingEpisode | None = PrivateAttr(default=None)
    _score: float | None = PrivateAttr(default=None)  # the grade the ending step gave


class ToolworldTask(vf.Task[ToolworldData, ToolworldState]):  # type: ignore[misc]
    async def setup(self, trace: vf.Trace, runtime: vf.Runtime) -> None:
        """Before the harness runs: this rollout's episode of the row's task."""
        episode = await asyncio.to_thread(_world(self.data.world).open)
        await asyncio.to_thread(episode.reset, self.data.seed)
        trace.state._episode = episode

    @vf.reward  # type: ignore[untyped-decorator]
    async def world_grade(self, trace: vf.Trace) -> float:
        """The world's grade (partial credit in [0, 1]) of the state the rollout reached."""
        state: ToolworldState = trace.state
        if state._episode is None:
            return 0.0
        grade = await asyncio.to_thread(state._episode.grade)
        trace.info["scorecard"] = grade.scorecard
        return float(grade.score) if state._score is None else state._score


class ToolworldHarness(vf.Harness[vf.HarnessConfig]):  # type: ignore[misc]
    """The agent's loop in this process: chat completions with the world's tools, each call stepped in the
    episode, until the model stops calling tools, calls `finish`, or the episode ends."""

    APPENDS_SYSTEM_PROMPT: ClassVar[bool] = True
    EXECUTES_CODE: ClassVar[bool] = False
    NEEDS_CONTAINER: ClassVar[bool] = False

    async def launch(self, ctx: Any, trace: vf.Trace, runtime: vf.Runtime, endpoint: str, secret: str,
                     mcp_urls: dict[str, str], data: ToolworldData, **_: Any) -> ProgramResult:  # fmt: skip
        state: ToolworldState = trace.state
        episode = state._episode
        assert episode is not None, "the task's setup opens the episode"
        world = _world(data.world).world
        tools: list[Any] = [*world.openai_tools(), FINISH_FUNCTION]  # the SDK's own TypedDicts, written as ours
        messages: list[Any] = [{"role": "system", "content": data.system_prompt or world.description},
                                          {"role": "user", "content": data.prompt}]  # fmt: skip
        async with AsyncOpenAI(base_url=endpoint, api_key=secret, max_retries=0) as client:
            while state._score is None:
                try:
                    completion = await client.chat.completions.create(model=ctx.model, messages=messages, tools=tools)
                except APIStatusError:
                    if trace.stop_condition is not None:  # verifiers refused the turn (max_turns, a stop)
                        break
                    raise
                message = completion.choices[0].message
                messages.append(message.model_dump(exclude_none=True))
                if not message.tool_calls:
                    break
                for call in message.tool_calls:
                    if call.type != "function":  # a custom (free-text) tool call: no world tool takes one
                        text = json.dumps(error_observation("unknown_tool", "only the function tools listed exist"))
                    else:
                        text = await asyncio.to_thread(self._step, state, call.function.name, call.function.arguments)
                    messages.append({"role": "tool", "tool_call_id": call.id, "content": text})
        return ProgramResult(exit_code=0, stdout="", stderr="")

    @staticmethod
    def _step(state: ToolworldState, name: str, arguments: str | None) -> str:
        assert state._episode is not None
        if state._score is not None:
            return json.dumps(error_observation("episode_over", "the episode has ended; no tool can be called"))
        try:
            parsed = json.loads(arguments or "{}")
        except json.JSONDecodeError as error:
            return json.dumps(error_observation("bad_arguments", f"arguments are not JSON: {error}"))
        if not isinstance(parsed, dict):
            return json.dumps(error_observation("bad_arguments", "arguments must be a JSON object"))
        result = state._episode.step(action_of(name, parsed))
        if result.done:
            state._score = float(result.reward)  # the world's grade, given on the ending step
        return json.dumps(result.observation, ensure_ascii=False)

    async def cleanup(self, trace: vf.Trace, runtime: vf.Runtime) -> None:
        """After scoring, and after a failure too: the episode closes (idempotent)."""
        state: ToolworldState = trace.state
        if state._episode is not None:
            episode, state._episode = state._episode, None
            await asyncio.to_thread(episode.close)


class ToolworldTasksetConfig(vf.TasksetConfig):  # type: ignore[misc]
    """`--env.taskset.*`: which world, which of its tasks, and whether the hint is shown."""

    world: str = "banking"
    tasks: int = 8
    first_seed: int = 0
    hinted: bool = False


class ToolworldTaskset(vf.Taskset[ToolworldTask, ToolworldTasksetConfig]):  # type: ignore[misc]
    def load(self) -> Iterator[ToolworldTask]:
        """Task `seed` of the world for each seed; its prompt is the task's instruction (and the hint, when
        the hint is shown)."""
        world = _world(self.config.world)
        for seed in range(self.config.first_seed, self.config.first_seed + self.config.tasks):
            episode = world.open()
            try:
                task = episode.reset(seed)
            finally:
                episode.close()
            prompt = task.instruction if not self.config.hinted else f"{task.instruction}\n\nHint: {task.hint}"
            data = ToolworldData(prompt=prompt, id=f"{world.world.name}-{seed}", world=self.config.world, seed=seed,
                                 hinted=self.config.hinted)  # fmt: skip
            yield ToolworldTask(data, self.config.task)


__all__ = ["ToolworldHarness", "ToolworldTaskset"]  # what verifiers reads a taskset plugin's classes from
sys.modules.setdefault(PLUGIN_ID, sys.modules[__name__])


def load_environment(world: str = "banking", tasks: int = 8, first_seed: int = 0, hinted: bool = False,
                     max_turns: int | None = None) -> vf.Env:  # fmt: skip
    """A verifiers environment over `tasks` tasks of `world` (a registered name, `file.py:Class`, a spec, or
    a model-written `.py`, sandboxed), played by the harness above, rewarded by the world's grade."""
    taskset = ToolworldTasksetConfig(id=PLUGIN_ID, world=world, tasks=tasks, first_seed=first_seed, hinted=hinted)
    agent = vf.AgentConfig(runtime=SubprocessConfig(), **({"max_turns": max_turns} if max_turns else {}))
    return vf.load_environment(vf.SingleAgentEnvConfig(taskset=taskset, agent=agent))


def main(argv: list[str] | None = None) -> None:
    """`python -m toolworlds.adapters.verifiers [WORLD] [TASKS] [BASE_URL]`: verifiers' own evaluation (what
    `vf-eval` runs) of TASKS tasks of WORLD, against BASE_URL or, without one, the embedded model
    (`spadework serve`, started here); each trace's reward is the world's grade."""
    from contextlib import ExitStack
    from tempfile import mkdtemp

    from verifiers.v1.cli.eval.runner import run_eval
    from verifiers.v1.configs.cli.eval import EvalConfig

    from toolworlds.hosting.serving import launched_command

    args = sys.argv[1:] if argv is None else argv
    world, tasks = (args[0] if args else "banking"), int(args[1]) if len(args) > 1 else 2
    with ExitStack() as stack:
        base_url = args[2] if len(args) > 2 else stack.enter_context(launched_command("serve", "--port", "0"))
        print(f"model endpoint: {base_url}")
        os.environ.setdefault("SPADEWORK_ENDPOINT_KEY", "none")  # a local server takes any key
        client = vf.EvalClientConfig(base_url=base_url, api_key_var="SPADEWORK_ENDPOINT_KEY")
        config = EvalConfig(env=load_environment(world, tasks=tasks, max_turns=6).config, model="policy", client=client,
                            sampling=vf.SamplingConfig(max_tokens=256), num_rollouts=1, push=False, rich=None,
                            output_dir=mkdtemp(prefix="verifiers-"))  # fmt: skip
        for episode in asyncio.run(run_eval(config)):
            for trace in episode.traces:
                print(f"{trace.task.data.id}: reward {trace.reward} ({trace.num_turns} turns, {trace.stop_condition})")


if __name__ == "__main__":
    main()
