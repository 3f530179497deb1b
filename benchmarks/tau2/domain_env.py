"""A tau2 domain's environment: the agent's tools, the user's tools (telecom's phone), and what keeps them in step.

The official `Environment` answers a tool call with the toolkit of whoever made it (the agent's or the
user's), then runs the domain's `sync_tools` (telecom copies the line's status, roaming, data allowance and
bills into the user's surroundings) and only then serialises the result; a failure anywhere in that is the
error text the caller reads. Initialization actions and evaluation assertions are functions of either toolkit
called by name (tools or not), each followed by a sync. The database hashes cover both sides.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from benchmarks.tau2.toolkit import Toolkit, ToolResult

Requestor = Literal["user", "assistant"]


@dataclass
class DomainEnv:
    """One episode's environment: `tools` the agent's, `user_tools` the user's (None where the user has none)."""

    tools: Toolkit
    user_tools: Toolkit | None = None
    syncing: Callable[[DomainEnv], None] | None = None  # the domain's `sync_tools`, if it has one

    def sync(self) -> None:
        if self.syncing is not None:
            self.syncing(self)

    def toolkit(self, requestor: Requestor) -> Toolkit:
        if requestor == "assistant":
            return self.tools
        if self.user_tools is None:
            raise ValueError("User tools not available")  # the official's words
        return self.user_tools

    def call(self, name: str, arguments: dict[str, Any], requestor: Requestor = "assistant") -> ToolResult:
        """One tool call, answered as the official `Environment.get_response` answers it."""
        try:
            toolkit = self.toolkit(requestor)
        except ValueError as failure:
            return ToolResult(f"Error: {failure}", True)
        return toolkit.call(name, arguments, after=self.sync)

    def run(self, env_type: Requestor, func_name: str, arguments: dict[str, Any]) -> Any:
        """An environment function (an initialization action or an assertion) called by name, then a sync: the
        official `run_env_function_call` (its exceptions propagate)."""
        result = getattr(self.toolkit(env_type), func_name)(**arguments)
        self.sync()
        return result

    def check(self, env_type: Requestor, func_name: str, arguments: dict[str, Any], expected: bool) -> bool:
        """Whether an assertion function gives `expected` (the official `run_env_assertion`, not raising)."""
        result = self.run(env_type, func_name, arguments)
        if not isinstance(result, bool):
            raise ValueError(f"Function {func_name} returned {type(result)} instead of bool")
        return result == expected

    def has_tool(self, name: str) -> bool:
        return name in self.tools.tool_names or (self.user_tools is not None and name in self.user_tools.tool_names)

    def mutates(self, name: str) -> bool:
        """Whether the tool `name` changes state, looked up in the agent's toolkit first (the official
        `_is_mutating_tool`: by name alone, whoever calls it)."""
        for toolkit in (self.tools, self.user_tools):
            if toolkit is not None and name in toolkit.tool_names:
                return toolkit.mutates(name)
        return True

    def db_hash(self) -> str:
        return self.tools.db_hash()

    def user_db_hash(self) -> str | None:
        return None if self.user_tools is None else self.user_tools.db_hash()
