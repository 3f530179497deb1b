"""Every spadework world as a Gymnasium environment: `gymnasium.make("spadework/banking")`.

Importing this module registers `spadework/<name>` for each world `spadework toolworld list` shows, and
`spadework/world` for any other (`gymnasium.make("spadework/world", world="worlds/a1b2.py")`: a spec file,
`file.py:Class`, or a model-written file, which runs only in the sandbox). Observations and actions are
text. `reset` shows the task (with its hint when `hinted=True`) and puts the offered tools, in OpenAI's
format, in `info["tools"]`; an action is one call as JSON, `{"name": "transfer", "arguments": {...}}`,
`finish` (with `answer` when the task asks a question) ending the episode; its observation is the tool's
result as JSON. The reward is 0 until the episode ends, then the world's grade (partial credit in [0, 1]).
"""

from __future__ import annotations

import json
import string
from typing import Any, SupportsFloat

import gymnasium
from gymnasium import spaces

from toolworlds.adapters.blocking import BlockingEpisode, BlockingWorld
from toolworlds.core import Finish, StepResult, Task, ToolCall, action_of, error_observation, named_call
from toolworlds.registry import available_worlds
from toolworlds.tool import FINISH_FUNCTION

MAX_TEXT = 1 << 20  # characters in an observation or an action


class Utf8Text(spaces.Text):
    """Any text a world can show or an agent can write (spaces.Text admits only its charset): a string of at most
    `max_length` characters that UTF-8 can carry. Samples are printable ASCII."""

    def __init__(self, max_length: int = MAX_TEXT) -> None:
        super().__init__(max_length=max_length, min_length=0, charset=string.printable)

    def contains(self, x: Any) -> bool:
        if not isinstance(x, str) or len(x) > self.max_length:
            return False
        try:
            x.encode()
        except UnicodeEncodeError:  # a lone surrogate
            return False
        return True


class ToolworldEnv(gymnasium.Env[str, str]):
    """One world's episodes, a seed's task each `reset` (a random one when no seed is given)."""

    metadata = {"render_modes": ["ansi"], "render_fps": 1}  # noqa: RUF012  # gymnasium's class attribute

    def __init__(self, world: str = "banking", hinted: bool = False, render_mode: str | None = None) -> None:
        if render_mode not in (None, "ansi"):
            raise ValueError(f"render_mode {render_mode!r}: this environment renders text only ('ansi')")
        self.render_mode = render_mode
        self.hinted = hinted
        self.observation_space = Utf8Text()
        self.action_space = Utf8Text()
        self._world = BlockingWorld(world)
        self._episode: BlockingEpisode | None = None
        self._task: Task | None = None
        self._steps = 0
        self._shown = ""

    @property
    def tools(self) -> list[dict[str, Any]]:
        """The tools an agent may call, in OpenAI's format, `finish` last."""
        return [*map(dict, self._world.world.openai_tools()), dict(FINISH_FUNCTION)]

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        if self._episode is not None:
            self._episode.close()
        chosen = seed if seed is not None else int(self.np_random.integers(0, 2**31 - 1))
        self._episode = self._world.open()
        task = self._task = self._episode.reset(chosen)
        self._steps = 0
        self._shown = task.instruction if not self.hinted else f"{task.instruction}\n\nHint: {task.hint}"
        info = {"tools": self.tools, "world": task.world, "seed": chosen, "max_steps": task.max_steps}
        return self._shown, info

    def step(self, action: str) -> tuple[str, SupportsFloat, bool, bool, dict[str, Any]]:
        if self._episode is None or self._task is None:
            raise RuntimeError("call reset() before step()")
        self._steps += 1
        parsed = parse_action(action)
        # An unreadable action is not sent to the world, but it counts as a step.
        result = self._unread(parsed) if isinstance(parsed, str) else self._episode.step(parsed)
        self._shown = json.dumps(result.observation, ensure_ascii=False)
        return self._shown, result.reward, result.terminated, result.truncated, dict(result.info)

    def _unread(self, problem: str) -> StepResult:
        assert self._episode is not None and self._task is not None
        observation = error_observation("malformed_action", problem)
        if self._steps < self._task.max_steps:
            return StepResult(observation=observation, reward=0.0, terminated=False, truncated=False)
        grade = self._episode.grade()  # out of steps: the episode ends on the state reached
        info = {"score": grade.score, "scorecard": grade.scorecard}
        return StepResult(observation=observation, reward=grade.score, terminated=False, truncated=True, info=info)

    def solution_actions(self) -> list[str]:
        """The reference play of the task the last `reset` chose, as actions (replayed, it scores 1.0)."""
        if self._episode is None:
            raise RuntimeError("call reset() first")
        return [action_text(action) for action in self._episode.solution()]

    def render(self) -> str | None:
        return self._shown if self.render_mode == "ansi" else None

    def close(self) -> None:
        if self._episode is not None:
            self._episode.close()
            self._episode = None
        self._world.close()


def parse_action(action: str) -> ToolCall | Finish | str:
    """One call from an action's JSON text, or what is wrong with it."""
    try:
        call = json.loads(action)
    except (json.JSONDecodeError, TypeError) as error:
        return f'an action is one JSON object {{"name": ..., "arguments": {{...}}}}: {error}'
    if not isinstance(call, dict) or not isinstance(call.get("name"), str):
        return 'an action is one JSON object with a "name" (a tool) and "arguments" (an object)'
    arguments = call.get("arguments", {})
    if not isinstance(arguments, dict):
        return f'"arguments" of {call["name"]} must be a JSON object'
    return action_of(call["name"], arguments)


def action_text(action: ToolCall | Finish) -> str:
    """An action as an agent writes it."""
    name, arguments = named_call(action)
    return json.dumps({"name": name, "arguments": arguments}, ensure_ascii=False)


def register() -> None:
    """`spadework/<name>` for every world listed, and `spadework/world` for one named by `world=`."""
    entry = f"{__name__}:ToolworldEnv"
    for name in available_worlds():
        if f"spadework/{name}" not in gymnasium.registry:
            gymnasium.register(id=f"spadework/{name}", entry_point=entry, kwargs={"world": name})
    if "spadework/world" not in gymnasium.registry:
        gymnasium.register(id="spadework/world", entry_point=entry)


register()


def main(argv: list[str] | None = None) -> None:
    """`python -m toolworlds.adapters.gym WORLD [SEED]`: gymnasium's own checker on WORLD's environment, then its
    reference solution played through `gymnasium.make`, step by step."""
    import sys

    from gymnasium.utils.env_checker import check_env

    args = sys.argv[1:] if argv is None else argv
    world, seed = (args[0] if args else "banking"), int(args[1]) if len(args) > 1 else 0
    made = f"spadework/{world}" if world in available_worlds() else "spadework/world"
    env = gymnasium.make(made) if made != "spadework/world" else gymnasium.make(made, world=world)
    check_env(env.unwrapped)
    print(f"check_env passed: {made} ({world})")
    observation, info = env.reset(seed=seed)
    print(f"task: {observation}\ntools: {', '.join(tool['function']['name'] for tool in info['tools'])}")
    total = 0.0
    for action in env.unwrapped.solution_actions():  # type: ignore[attr-defined]
        observation, reward, terminated, truncated, _ = env.step(action)
        total += float(reward)
        print(f"> {action}\n< {observation[:160]}")
        if terminated or truncated:
            break
    print(f"return: {total}")
    env.close()


if __name__ == "__main__":
    main()
