"""The toolworld contract: a small environment an agent solves by calling tools.

A world holds hidden state in `self.state` (a pydantic model), exposes tools as `@tool` methods, and
implements three things: `build` (make the state and the task for a seed), `grade` (partial credit read
from the state and the answer) and `solution` (a reference play). The base class does the rest with
Gym-style `reset`/`step`: argument validation, error observations, step limits and rewards.

Every way a step can go wrong has a defined outcome, and only bugs in the world itself raise:

| what the agent did               | observation                              | episode      |
|----------------------------------|------------------------------------------|--------------|
| called a tool that succeeded     | the tool's JSON result                   | continues    |
| called a tool that refused       | `{"error": {"code": <tool's code>, ...}}`| continues    |
| unknown tool                     | `{"error": {"code": "unknown_tool"}}`     | continues    |
| bad or missing arguments         | `{"error": {"code": "invalid_arguments", "fields": [...]}}` | continues |
| finished (with or without answer)| `{"finished": true}`, reward = score     | terminated   |
| used its last allowed step       | that step's observation, reward = score  | truncated    |
| anything after the end           | `{"error": {"code": "episode_over"}}`     | stays ended  |

Rewards are 0 on every step but the last, which carries the score, so a play's return is its score.
"""

from __future__ import annotations

import inspect
import random
from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Annotated, Any, ClassVar, Generic, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Discriminator, Field, JsonValue, Tag, TypeAdapter

from toolworlds.scoring import Scorecard
from toolworlds.tool import FINISH_TOOL, ArgumentProblem, OpenAITool, ToolSpec, build_spec, is_tool, listing


class Brief(BaseModel):
    """What `build` returns: the task in words, and a privileged hint for the hinted plays."""

    instruction: str
    hint: str
    variant: str = "default"


class Task(Brief):
    """The task of one episode. Only `instruction` is shown to the agent; `hint` is privileged."""

    model_config = ConfigDict(frozen=True)

    world: str
    seed: int
    max_steps: int


class ToolCall(BaseModel):
    """Call the tool `name` with `arguments`."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["tool_call"] = "tool_call"
    name: str
    arguments: dict[str, JsonValue] = Field(default_factory=dict)


class Finish(BaseModel):
    """End the episode, answering the task's question if it asked one."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["finish"] = "finish"
    answer: str | None = None


def _action_kind(value: Any) -> str | None:
    """`kind` when given; otherwise a call if it names a tool, else a finish (as the JSON Schema says)."""
    if isinstance(value, dict):
        return value.get("kind") or ("tool_call" if "name" in value else "finish")
    return getattr(value, "kind", None)


Action = Annotated[
    Annotated[ToolCall, Tag("tool_call")] | Annotated[Finish, Tag("finish")],
    Discriminator(_action_kind),
]
ACTION_ADAPTER: TypeAdapter[ToolCall | Finish] = TypeAdapter(Action)


def named_call(action: ToolCall | Finish) -> tuple[str, dict[str, JsonValue]]:
    """An action as the function call an agent makes: a finish is `finish` with its answer, if any."""
    if isinstance(action, Finish):
        return FINISH_TOOL, {} if action.answer is None else {"answer": action.answer}
    return action.name, dict(action.arguments)


def action_of(name: str, arguments: dict[str, JsonValue]) -> ToolCall | Finish:
    """The action a function call names: `finish` ends the episode (answering, if it says), any other a tool."""
    if name == FINISH_TOOL:
        answer = arguments.get("answer")
        return Finish(answer=None if answer is None else str(answer))
    return ToolCall(name=name, arguments=arguments)


def call(name: str, /, **arguments: JsonValue) -> ToolCall:
    """Shorthand for solutions: `call("transfer", amount=5.0)`."""
    return ToolCall(name=name, arguments=arguments)


class StepResult(BaseModel):
    observation: JsonValue
    reward: float
    terminated: bool
    truncated: bool
    info: dict[str, JsonValue] = Field(default_factory=dict)

    @property
    def done(self) -> bool:
        return self.terminated or self.truncated


class ToolError(Exception):
    """Raised by a tool to refuse a call the way a real service would (the episode goes on)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class WorldBugError(RuntimeError):
    """A world's own code failed: a bug to fix, never the agent's fault."""

    fatal: ClassVar[bool] = False  # True where the world cannot be called again (the sandbox killed it)


class ErrorBody(BaseModel):
    code: str
    message: str
    fields: list[ArgumentProblem] | None = None


class ErrorObservation(BaseModel):
    """The observation of every refused step; its schema is part of every tool's output schema."""

    error: ErrorBody


class Finished(BaseModel):
    finished: Literal[True] = True


def error_observation(code: str, message: str, fields: list[ArgumentProblem] | None = None) -> JsonValue:
    body = ErrorBody(code=code, message=message, fields=fields)
    return ErrorObservation(error=body).model_dump(mode="json", exclude_none=True)


StateT = TypeVar("StateT", bound=BaseModel)


class ToolWorld(ABC, Generic[StateT]):
    """Base class of every toolworld. Subclasses set `name`, write tools, and implement the three methods."""

    name: ClassVar[str]
    # What the agent is told about the world (its system prompt): written for someone who sees only the
    # tools, never the code. Defaults to the class docstring; either way cleaned of its indentation.
    description: ClassVar[str] = ""
    max_steps: ClassVar[int] = 30
    tool_specs: ClassVar[dict[str, ToolSpec]] = {}

    state: StateT
    task: Task
    answer: str | None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        specs = dict(getattr(cls, "tool_specs", {}))
        for attribute, value in vars(cls).items():
            if is_tool(value):
                specs[attribute] = build_spec(value)
        cls.tool_specs = specs
        own = vars(cls).get("description", cls.__doc__)
        if own is not None:  # a subclass that says nothing keeps its parent's description
            cls.description = inspect.cleandoc(own)

    def __init__(self) -> None:
        self._steps = 0
        self._done = False
        self._reset_called = False

    # -- what a world implements -------------------------------------------------------------

    @abstractmethod
    def build(self, rng: random.Random) -> Brief:
        """Create `self.state` and the task from `rng`; only `rng` may be a source of randomness."""

    @abstractmethod
    def grade(self) -> Scorecard:
        """Partial credit for the current state (and `self.answer` when the task asks a question)."""

    @abstractmethod
    def solution(self) -> list[ToolCall | Finish]:
        """A reference play from the state right after `reset`; replaying it scores 1.0."""

    # -- the Gym-style API -------------------------------------------------------------------

    @classmethod
    def tools(cls) -> list[ToolSpec]:
        return list(cls.tool_specs.values())

    @classmethod
    def openai_tools(cls) -> list[OpenAITool]:
        return [spec.openai_function() for spec in cls.tools()]

    def reset(self, seed: int) -> Task:
        """Start a fresh episode; the same seed always gives the same state and task."""
        self._steps = 0
        self._done = False
        self.answer = None
        brief = self.build(random.Random(seed))
        if not isinstance(getattr(self, "state", None), BaseModel):
            raise WorldBugError(f"{type(self).__name__}.build must set self.state to a pydantic model")
        self.task = Task(world=self.name, seed=seed, max_steps=self.max_steps, **brief.model_dump())
        self._reset_called = True
        return self.task

    def step(self, action: ToolCall | Finish | dict[str, Any]) -> StepResult:
        """Apply one action. Agent mistakes become error observations; see the module docstring."""
        if not self._reset_called:
            raise RuntimeError("call reset(seed) before step()")
        if self._done:
            message = "the episode has ended; call reset(seed) to start another"
            return StepResult(
                observation=error_observation("episode_over", message),
                reward=0.0,
                terminated=True,
                truncated=False,
                info={"step": self._steps, "error": "episode_over"},
            )
        if isinstance(action, dict):
            action = ACTION_ADAPTER.validate_python(action)
        self._steps += 1
        if isinstance(action, Finish):
            self.answer = action.answer
            return self._end(Finished().model_dump(mode="json"), terminated=True, info={})
        observation, info = self._call(action)
        if self._steps >= self.max_steps:
            return self._end(observation, terminated=False, info=info)
        return StepResult(observation=observation, reward=0.0, terminated=False, truncated=False, info=info)

    def score(self) -> float:
        """The current score in [0, 1]."""
        return self._checked_grade().score

    def _checked_grade(self) -> Scorecard:
        card = self.grade()
        if not isinstance(card, Scorecard) or not card.goals:
            raise WorldBugError(f"{self.name}: grade() must return a Scorecard with at least one goal")
        return card

    def snapshot(self) -> dict[str, JsonValue]:
        """Everything about the episode as JSON, hidden state included: for debugging and export."""
        return {
            "task": self.task.model_dump(mode="json") if self._reset_called else None,
            "steps": self._steps,
            "done": self._done,
            "answer": self.answer if self._reset_called else None,
            "state": self.state.model_dump(mode="json") if self._reset_called else None,
        }

    @property
    def steps_taken(self) -> int:
        return self._steps

    @property
    def done(self) -> bool:
        return self._done

    # -- internals ---------------------------------------------------------------------------

    def _call(self, action: ToolCall) -> tuple[JsonValue, dict[str, JsonValue]]:
        info: dict[str, JsonValue] = {"step": self._steps, "tool": action.name}
        spec = self.tool_specs.get(action.name)
        if spec is None:
            known = ", ".join(sorted(self.tool_specs))
            info["error"] = "unknown_tool"
            message = f"there is no tool named {action.name!r}; the tools are: {known}"
            return error_observation("unknown_tool", message), info
        arguments, problems = spec.validate(action.arguments)
        if arguments is None:
            info["error"] = "invalid_arguments"
            message = f"invalid arguments for {spec.name}: {listing(problems)}"
            return error_observation("invalid_arguments", message, problems), info
        method = getattr(self, spec.method_name)
        try:
            result = method(**dict(arguments))
        except ToolError as refusal:
            info["error"] = refusal.code
            return error_observation(refusal.code, refusal.message), info
        except Exception as bug:
            raise WorldBugError(f"{self.name}.{spec.name} crashed on {action.arguments!r}: {bug!r}") from bug
        return spec.dump_result(result), info

    def _end(self, observation: JsonValue, *, terminated: bool, info: dict[str, JsonValue]) -> StepResult:
        self._done = True
        card = self._checked_grade()
        info.update(score=card.score, scorecard=card.summary())
        return StepResult(
            observation=observation, reward=card.score, terminated=terminated, truncated=not terminated, info=info
        )


def replay(world: ToolWorld[Any], seed: int, actions: Sequence[ToolCall | Finish]) -> list[StepResult]:
    """Reset `world` to `seed` and apply `actions` in order, stopping when the episode ends."""
    world.reset(seed)
    results = []
    for action in actions:
        results.append(world.step(action))
        if results[-1].done:
            break
    return results
