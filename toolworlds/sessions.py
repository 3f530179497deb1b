"""Many independent episodes of one world, keyed by session id: what the HTTP and MCP servers share."""

from __future__ import annotations

import secrets
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, Field, JsonValue

from toolworlds.core import Finish, StepResult, Task, ToolCall, ToolWorld


class SessionError(Exception):
    """A request about a session that cannot be served; `status` is the HTTP status it maps to."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message


class PublicTask(BaseModel):
    """The task as a client sees it: the hint only when the client asked for it."""

    world: str
    seed: int
    instruction: str
    max_steps: int
    hint: str | None = None

    @classmethod
    def of(cls, task: Task, include_hint: bool) -> PublicTask:
        return cls(
            world=task.world,
            seed=task.seed,
            instruction=task.instruction,
            max_steps=task.max_steps,
            hint=task.hint if include_hint else None,
        )


class ScoreReport(BaseModel):
    score: float = Field(ge=0, le=1)
    done: bool
    steps: int
    scorecard: str

    @classmethod
    def of(cls, world: ToolWorld[Any]) -> ScoreReport:
        """The score of the world's state as it is now, with the scorecard that explains it."""
        card = world.grade()
        return cls(score=card.score, done=world.done, steps=world.steps_taken, scorecard=card.summary())


@dataclass
class Session:
    world: ToolWorld[Any]
    public_task: PublicTask


class SessionStore:
    """Holds up to `capacity` sessions. When full, the least recently used *finished* one makes room;
    live episodes are never dropped: creating one more is refused instead."""

    def __init__(self, world_class: type[ToolWorld[Any]], capacity: int = 10_000) -> None:
        self.world_class = world_class
        self.capacity = capacity
        self._sessions: OrderedDict[str, Session] = OrderedDict()

    def __len__(self) -> int:
        return len(self._sessions)

    def create(self, seed: int, include_hint: bool = False) -> tuple[str, PublicTask]:
        if len(self._sessions) >= self.capacity:
            self._evict_one_finished()
        world = self.world_class()
        public = PublicTask.of(world.reset(seed), include_hint)
        session_id = secrets.token_urlsafe(12)
        self._sessions[session_id] = Session(world=world, public_task=public)
        return session_id, public

    def get(self, session_id: str) -> Session:
        session = self._sessions.get(session_id)
        if session is None:
            raise SessionError(404, "unknown_session", f"no session {session_id!r}; create one with POST /sessions")
        self._sessions.move_to_end(session_id)
        return session

    def step(self, session_id: str, action: ToolCall | Finish) -> StepResult:
        """Apply an action; a finished session refuses further actions with 409 instead of stepping."""
        world = self.get(session_id).world
        if world.done:
            message = "the episode has ended; read its score or create a new session"
            raise SessionError(409, "episode_over", message)
        return world.step(action)

    def call_tool(self, session_id: str, name: str, arguments: dict[str, JsonValue]) -> StepResult:
        return self.step(session_id, ToolCall(name=name, arguments=arguments))

    def score(self, session_id: str) -> ScoreReport:
        return ScoreReport.of(self.get(session_id).world)

    def delete(self, session_id: str) -> None:
        self.get(session_id)
        del self._sessions[session_id]

    def _evict_one_finished(self) -> None:
        for session_id, session in self._sessions.items():
            if session.world.done:
                del self._sessions[session_id]
                return
        raise SessionError(503, "too_many_sessions", f"all {self.capacity} sessions are still playing; finish some")
