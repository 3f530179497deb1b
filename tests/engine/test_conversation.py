"""Conversations: the user speaks again after the agent ends its turn, and may reveal a tool as they do.

A banking world whose user, once the agent finishes, asks once more and reveals `audit`. Played against the
scripted mock over HTTP in each mode: in `chat` the new tool joins the request's `tools`; in `tokens` it is
written into the user message (the rendered tool list never changes) and the trace stays exact.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from engine.conversation import NEW_TOOLS_HEADER, Conversation, UserTurn
from engine.endpoints import EndpointPool
from engine.environments import opening_messages
from engine.rollout import RolloutPlan, run_rollout
from engine.settings import EpisodeSettings, Mode
from engine.store import TrajectoryStore, read_records
from engine.templates import load_template
from engine.trajectory import EpisodeRecord
from tests.engine.conftest import mock_model
from toolworlds.core import Finish, StepResult, Task, ToolCall
from toolworlds.episode import Grade, LocalWorld
from toolworlds.registry import load_world
from toolworlds.tool import FINISH_FUNCTION

AUDIT = {"type": "function", "function": {"name": "audit", "description": "Audit the account.",
                                         "parameters": {"type": "object", "properties": {}}}}  # fmt: skip
FOLLOW_UP = "Anything else on my account?"


class FollowUp(Conversation):
    finish_tool = True

    def __init__(self, world: LocalWorld) -> None:
        self._source = world
        self.name, self.description, self.tools = world.name, world.description, world.openai_tools()
        self.replies: list[str] = []

    async def reset(self, seed: int) -> Task:
        self._world = await self._source.open()
        return await self._world.reset(seed)

    def opening(self, task: Task, hinted: bool, mode: Mode) -> list[dict[str, Any]]:
        return opening_messages(self._source, task, hinted, mode)

    async def step(self, action: ToolCall | Finish) -> StepResult:
        return await self._world.step(action)

    async def user_turn(self, reply: str) -> UserTurn | None:
        self.replies.append(reply)
        return UserTurn(content=FOLLOW_UP, tools=[AUDIT]) if len(self.replies) == 1 else None

    async def grade(self) -> Grade:
        return await self._world.grade()

    async def close(self) -> None:
        await self._world.close()


async def play(out: Path, url: str, mode: Mode, **settings: Any) -> EpisodeRecord:
    world = LocalWorld(load_world("banking"))
    plan = RolloutPlan(run="talk", world="banking", tasks=1, settings=EpisodeSettings(mode=mode, **settings))
    with TrajectoryStore.open(out, plan) as store:
        async with EndpointPool.open([url]) as pool:
            await run_rollout(plan, store, pool, lambda: FollowUp(world), 1)
    (record,) = read_records(out)
    return record


def user_turns(record: EpisodeRecord) -> list[str]:
    return [m["content"] for m in record.messages[1:] if m["role"] == "user" and "<tool_response>" not in m["content"]]


@pytest.mark.anyio
async def test_in_chat_mode_a_revealed_tool_joins_the_requests_tools(tmp_path: Path) -> None:
    with mock_model() as url:
        record = await play(tmp_path, url, "chat")
        offered = httpx.get(url.removesuffix("/v1") + "/stats").json()["offered"]["talk/agent/banking/0/plain/0"]
    assert record.status == "ok" and record.reward is not None  # the dialogue ended when the user had no more
    assert user_turns(record)[-1] == FOLLOW_UP  # the tool is not written into the message
    first_after = next(i for i, names in enumerate(offered) if "audit" in names)
    assert first_after > 0 and all("audit" not in names for names in offered[:first_after])
    assert all("audit" in names and "finish" in names for names in offered[first_after:])


@pytest.mark.anyio
async def test_in_tokens_mode_a_revealed_tool_is_written_into_the_turn_and_the_trace_stays_exact(
    tmp_path: Path,
) -> None:
    with mock_model("--tokenizer", "bytes") as url:
        record = await play(tmp_path, url, "tokens", tokenizer="bytes")
    said = user_turns(record)[-1]
    assert said.startswith(NEW_TOOLS_HEADER) and '"name": "audit"' in said and said.endswith(FOLLOW_UP)
    trace = record.tokens
    assert record.status == "ok" and trace is not None and trace.exact and trace.rerender_matches
    tools = [*load_world("banking").openai_tools(), FINISH_FUNCTION]  # the opening's list, unchanged by the reveal
    held = trace.prompt_ids + trace.completion_ids
    assert held == load_template("bytes").render(record.messages, tools)[: len(held)]


def test_a_revealed_tool_is_listed_where_no_tools_field_carries_it() -> None:
    turn = UserTurn(content="go on", tools=[AUDIT])
    assert turn.text("chat") == "go on"
    for mode in ("tokens", "constrained"):
        assert turn.text(mode).startswith(NEW_TOOLS_HEADER) and "Audit the account." in turn.text(mode)
