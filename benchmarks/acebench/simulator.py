"""ACEBench's simulated user: a chat model behind an OpenAI-compatible endpoint, asked as the reference asks it.

The reference (`APIModel_user.APIUSER`) samples at temperature 0.001 with 1,000 tokens and uses gpt-4o by
default; scores depend on which model plays the user, so a run records it. Requests go through the engine's
endpoint pool (retries, limits) under the episode's own header, with role `user`, so a scripted server can
tell them from the agent's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from engine.endpoints import EndpointPool
from engine.trajectory import EpisodeKey
from engine.transport import EndpointFailure

TEMPERATURE = 0.001
MAX_TOKENS = 1000


@dataclass(frozen=True)
class UserSimulator:
    pool: EndpointPool
    model: str
    run: str
    timeout_s: float = 600.0
    temperature: float = TEMPERATURE
    max_tokens: int = MAX_TOKENS

    async def reply(self, seed: int, messages: list[dict[str, Any]]) -> str:
        """The user's next message for the simulator chat `messages` (`prompts.simulator_messages`)."""
        body = {"model": self.model, "messages": messages, "temperature": self.temperature,
                "max_tokens": self.max_tokens}  # fmt: skip
        headers = EpisodeKey(role="user", world="acebench", seed=seed).header(self.run)
        with self.pool.sticky() as endpoint:
            answer = await self.pool.post(endpoint, "/chat/completions", body, headers, self.timeout_s)
        try:
            content = answer.body["choices"][0]["message"].get("content")
        except (KeyError, IndexError, TypeError, AttributeError):
            raise EndpointFailure("bad_response", "the user simulator's answer has no choices[0].message",
                                  retryable=False) from None  # fmt: skip
        return str(content or "")
