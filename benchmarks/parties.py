"""The models that play a benchmark's other parts: the simulated user, an LLM judge.

A benchmark asks them as its reference pipeline does (its own sampling settings; ACEBench's user samples at
temperature 0.001 with 1,000 tokens, tau2's user and judge at temperature 0), through the engine's endpoint
pool (retries, limits), under the episode's own header with their role, so a scripted server can tell them
from the agent. Scores depend on which model plays them, so a run records it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from engine.endpoints import EndpointPool
from engine.trajectory import Caller, EpisodeKey
from engine.transport import EndpointFailure


@dataclass(frozen=True)
class Party:
    pool: EndpointPool
    model: str
    run: str
    world: str
    role: Caller = "user"
    timeout_s: float = 600.0
    sampling: dict[str, Any] = field(default_factory=dict)  # temperature, max_tokens... as the reference sends them

    async def answer(self, key: EpisodeKey, messages: list[dict[str, Any]],
                     tools: list[Any] | None = None) -> dict[str, Any]:  # fmt: skip
        """The reply message (`choices[0].message`) to the chat `messages`, for the episode `key`; a party with
        `tools` (tau2's telecom user) may answer with calls."""
        body = {"model": self.model, "messages": messages, **self.sampling}
        if tools:
            body |= {"tools": tools, "tool_choice": "auto"}
        headers = key.model_copy(update={"role": self.role, "world": self.world}).header(self.run)
        with self.pool.sticky() as endpoint:
            answer = await self.pool.post(endpoint, "/chat/completions", body, headers, self.timeout_s)
        try:
            message = answer.body["choices"][0]["message"]
        except (KeyError, IndexError, TypeError):
            message = None
        if not isinstance(message, dict):
            raise EndpointFailure("bad_response", f"the {self.role}'s answer has no choices[0].message",
                                  retryable=False)  # fmt: skip
        return message

    async def reply(self, seed: int, messages: list[dict[str, Any]]) -> str:
        """The text of the reply to `messages`, for the episode of `seed` ("" for none)."""
        message = await self.answer(EpisodeKey(world=self.world, seed=seed), messages)
        return str(message.get("content") or "")
