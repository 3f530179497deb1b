"""Toolworlds: executable environments an agent solves by calling tools.

Write one by subclassing `ToolWorld`; see `toolworlds.core` for the contract and `toolworlds/examples/library.py`
for a complete small world.
"""

from toolworlds.core import (
    Action,
    Brief,
    Finish,
    StepResult,
    Task,
    ToolCall,
    ToolError,
    ToolWorld,
    WorldBugError,
    call,
)
from toolworlds.scoring import Scorecard, mentions, mentions_amount
from toolworlds.tool import ToolSpec, tool

__all__ = [
    "Action",
    "Brief",
    "Finish",
    "Scorecard",
    "StepResult",
    "Task",
    "ToolCall",
    "ToolError",
    "ToolSpec",
    "ToolWorld",
    "WorldBugError",
    "call",
    "mentions",
    "mentions_amount",
    "tool",
]
