"""tau2's own prompts: the agent's system prompt (`LLMAgent`, with the domain's policy) and the user
simulator's (`UserSimulator`: its global guidelines, the version for a user with tools where it has them, then
the task's scenario), word for word."""

from __future__ import annotations

from benchmarks.tau2.data import Tau2Task, user_guidelines

AGENT_INSTRUCTION = """You are a customer service agent that helps the user according to the <policy> provided below.
In each turn you can either:
- Send a message to the user.
- Make a tool call.
You cannot do both at the same time.

Try to be helpful and always follow the policy. Always make sure you generate valid JSON only."""
AGENT_SYSTEM = "<instructions>\n{instruction}\n</instructions>\n<policy>\n{policy}\n</policy>"
USER_SYSTEM = "{guidelines}\n\n<scenario>\n{instructions}\n</scenario>"


def agent_system_prompt(policy: str) -> str:
    return AGENT_SYSTEM.format(instruction=AGENT_INSTRUCTION, policy=policy)


def user_system_prompt(task: Tau2Task, with_tools: bool = False) -> str:
    return USER_SYSTEM.format(guidelines=user_guidelines(with_tools), instructions=str(task.user_scenario))
