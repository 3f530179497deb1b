"""tau2's vendored release (data/SOURCE.txt): each domain's tasks, splits, policy, tools and database.

A task's user scenario becomes the user simulator's instructions exactly as the official `str(UserScenario)`
writes them; its evaluation criteria say which gold actions give the target database and which checks make
the reward (`reward_basis`). Splits are the release's own: `base` (every task, what the leaderboard plays),
`train` and `test` (disjoint; spadework trains only on `train`).
"""

from __future__ import annotations

import json
import textwrap
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from benchmarks.tau2.airline import AirlineTools, FlightDB
from benchmarks.tau2.retail import RetailDB, RetailTools
from benchmarks.tau2.toolkit import Toolkit

if TYPE_CHECKING:  # the toolworlds (world.py) load this module, and `toolworld` commands never load the engine
    from engine.messages import OpenAITool

VENDORED = Path(__file__).with_name("data")
DOMAINS = ("airline", "retail")
SPLITS = ("base", "train", "test")
Domain = Literal["airline", "retail"]
RewardType = Literal["DB", "ENV_ASSERTION", "NL_ASSERTION", "ACTION", "COMMUNICATE"]
DEFAULT_BASIS: tuple[RewardType, ...] = ("DB", "COMMUNICATE")


class StructuredInstructions(BaseModel):
    model_config = ConfigDict(extra="allow")

    domain: str
    reason_for_call: str
    known_info: str | None = None
    unknown_info: str | None = None
    task_instructions: str

    def __str__(self) -> str:
        lines = [f"Domain: {self.domain}", f"Reason for call:\n{textwrap.indent(self.reason_for_call, chr(9))}"]
        if self.known_info is not None:
            lines.append(f"Known info:\n{textwrap.indent(self.known_info, chr(9))}")
        if self.unknown_info is not None:
            lines.append(f"Unknown info:\n{textwrap.indent(self.unknown_info, chr(9))}")
        lines.append(f"Task instructions:\n{textwrap.indent(self.task_instructions, chr(9))}")
        return "\n".join(lines)


class UserScenario(BaseModel):
    model_config = ConfigDict(extra="allow")

    persona: str | None = None
    instructions: StructuredInstructions | str

    def __str__(self) -> str:
        lines = []
        if self.persona is not None:
            lines += ["Persona:", textwrap.indent(self.persona, "\t")]
        lines += ["Instructions:", textwrap.indent(str(self.instructions), "\t")]
        return "\n".join(lines)


class Action(BaseModel):
    model_config = ConfigDict(extra="allow")

    action_id: str
    requestor: Literal["user", "assistant"] = "assistant"
    name: str
    arguments: dict[str, Any]


class EvaluationCriteria(BaseModel):
    model_config = ConfigDict(extra="allow")

    actions: list[Action] | None = None
    communicate_info: list[str] | None = None
    nl_assertions: list[str] | None = None
    reward_basis: list[RewardType] = Field(default_factory=lambda: list(DEFAULT_BASIS))


class Tau2Task(BaseModel):
    model_config = ConfigDict(extra="allow")

    id: str
    user_scenario: UserScenario
    initial_state: dict[str, Any] | None = None
    evaluation_criteria: EvaluationCriteria | None = None

    @property
    def gold_actions(self) -> list[Action]:
        return [] if self.evaluation_criteria is None else list(self.evaluation_criteria.actions or [])


@dataclass(frozen=True)
class DomainData:
    """One domain's vendored data, read once."""

    name: Domain
    policy: str
    tasks: list[Tau2Task]
    splits: dict[str, list[str]]  # split -> task ids, in the release's order
    tools: list[OpenAITool]  # the agent's tools, as the official environment offers them
    toolkit: type[Toolkit]

    def split(self, name: str) -> list[Tau2Task]:
        if name not in self.splits:
            raise ValueError(f"tau2 {self.name} has no split {name!r} (it has {', '.join(self.splits)})")
        wanted = set(self.splits[name])
        return [task for task in self.tasks if task.id in wanted]

    def fresh_toolkit(self) -> Toolkit:
        """The domain's tools over a copy of its initial database, private to one episode (parsed afresh: as
        fast as a deep copy of the models, and nothing is shared)."""
        toolkit, db_model = _kinds(self.name)
        return toolkit(db_model.model_validate_json(_db_bytes(self.name)))


@cache
def _db_bytes(domain: Domain) -> bytes:
    return (VENDORED / domain / "db.json").read_bytes()


def _kinds(domain: Domain) -> tuple[type[Toolkit], type[BaseModel]]:
    """The domain's toolkit and database model."""
    if domain == "airline":
        return AirlineTools, FlightDB
    return RetailTools, RetailDB


@cache
def load_domain(domain: Domain) -> DomainData:
    if domain not in DOMAINS:
        raise ValueError(f"no tau2 domain {domain!r} (there are {', '.join(DOMAINS)})")
    folder = VENDORED / domain
    tools = json.loads((folder / "tools.json").read_text("utf-8"))["tools"]
    return DomainData(
        name=domain,
        policy=(folder / "policy.md").read_text("utf-8"),
        tasks=[Tau2Task.model_validate(row) for row in json.loads((folder / "tasks.json").read_text("utf-8"))],
        splits=json.loads((folder / "split_tasks.json").read_text("utf-8")),
        tools=tools,
        toolkit=_kinds(domain)[0],
    )


def user_guidelines() -> str:
    """The text user simulator's global guidelines (no tools, no persona)."""
    return (VENDORED / "simulation_guidelines.md").read_text("utf-8").replace("<PERSONA_GUIDELINES>", "")
