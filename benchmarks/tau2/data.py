"""tau2's vendored release (data/SOURCE.txt): each domain's tasks, splits, policy, tools and databases.

A task's user scenario becomes the user simulator's instructions exactly as the official `str(UserScenario)`
writes them; its evaluation criteria say which gold actions give the target database and which checks make
the reward (`reward_basis`). Splits are the release's own: `base` (every task, what the leaderboard plays),
`train` and `test` (disjoint; spadework trains only on `train`). Telecom's user has tools too (a phone, with
its own database), and its tasks start with initialization actions and are judged by assertions on the end state.
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
from benchmarks.tau2.domain_env import DomainEnv, Requestor
from benchmarks.tau2.retail import RetailDB, RetailTools
from benchmarks.tau2.telecom import TelecomTools, load_telecom_db
from benchmarks.tau2.telecom_env import sync_tools
from benchmarks.tau2.telecom_user import TelecomUserTools, load_user_db
from benchmarks.tau2.toolkit import Toolkit

if TYPE_CHECKING:  # the toolworlds (world.py) load this module, and `toolworld` commands never load the engine
    from engine.messages import OpenAITool

VENDORED = Path(__file__).with_name("data")
DOMAINS = ("airline", "retail", "telecom")
SPLITS = ("base", "train", "test")
Domain = Literal["airline", "retail", "telecom"]
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
    requestor: Requestor = "assistant"
    name: str
    arguments: dict[str, Any]
    compare_args: list[str] | None = None

    def matches(self, name: str, arguments: dict[str, Any]) -> bool:
        """Whether a call counts as this action (the official `compare_with_tool_call`: who called is not
        compared, and without `compare_args` the arguments compared are the CALL's, so a call that leaves some
        out still matches)."""
        if name != self.name:
            return False
        keys = list(arguments) if self.compare_args is None else self.compare_args
        if not keys:
            return True
        wanted = {key: value for key, value in self.arguments.items() if key in keys}
        return {key: value for key, value in arguments.items() if key in keys} == wanted


class EnvFunctionCall(BaseModel):
    """A function of the agent's or the user's toolkit, called by name (an initialization action)."""

    model_config = ConfigDict(extra="allow")

    env_type: Requestor
    func_name: str
    arguments: dict[str, Any]


class EnvAssertion(EnvFunctionCall):
    assert_value: bool = True
    message: str | None = None


class InitialState(BaseModel):
    model_config = ConfigDict(extra="allow")

    initialization_data: dict[str, Any] | None = None
    initialization_actions: list[EnvFunctionCall] | None = None
    message_history: list[dict[str, Any]] | None = None


class EvaluationCriteria(BaseModel):
    model_config = ConfigDict(extra="allow")

    actions: list[Action] | None = None
    env_assertions: list[EnvAssertion] | None = None
    communicate_info: list[str] | None = None
    nl_assertions: list[str] | None = None
    reward_basis: list[RewardType] = Field(default_factory=lambda: list(DEFAULT_BASIS))


class Tau2Task(BaseModel):
    model_config = ConfigDict(extra="allow")

    id: str
    user_scenario: UserScenario
    ticket: str | None = None  # the customer's request as a ticket (telecom; what the official solo agent reads)
    initial_state: InitialState | None = None
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
    user_tools: list[OpenAITool] | None = None  # the user's, where the user has tools (telecom)
    solo_policy: str | None = None  # the policy for an agent that has the user's tools too (telecom's solo mode)

    def split(self, name: str) -> list[Tau2Task]:
        if name not in self.splits:
            raise ValueError(f"tau2 {self.name} has no split {name!r} (it has {', '.join(self.splits)})")
        wanted = set(self.splits[name])
        return [task for task in self.tasks if task.id in wanted]

    def fresh_toolkit(self) -> Toolkit:
        """The domain's tools over a copy of its initial database, private to one episode (parsed afresh: as
        fast as a deep copy of the models, and nothing is shared)."""
        if self.name == "telecom":
            return TelecomTools(load_telecom_db())
        db_model = FlightDB if self.name == "airline" else RetailDB
        return self.toolkit(db_model.model_validate_json(_db_bytes(self.name)))

    def fresh_env(self, task: Tau2Task | None = None) -> DomainEnv:
        """A fresh environment (both toolkits, private to one episode), set up as `task`'s initial state says
        (the official `set_state` with the task's initialization actions, each followed by a sync)."""
        if self.name == "telecom":
            env = DomainEnv(self.fresh_toolkit(), TelecomUserTools(load_user_db()), sync_tools)
        else:
            env = DomainEnv(self.fresh_toolkit())
        env.sync()  # the official environment syncs once built
        state = None if task is None else task.initial_state
        for action in (state.initialization_actions if state else None) or []:
            env.run(action.env_type, action.func_name, dict(action.arguments))
        env.sync()
        return env


@cache
def _db_bytes(domain: Domain) -> bytes:
    return (VENDORED / domain / "db.json").read_bytes()


_TOOLKITS: dict[str, type[Toolkit]] = {"airline": AirlineTools, "retail": RetailTools, "telecom": TelecomTools}


def _policy(domain: Domain, solo: bool = False) -> str:
    """The agent's policy; telecom's joins its main policy (the solo version for an agent that works the phone
    itself) and its tech-support manual as the official does."""
    folder = VENDORED / domain
    if domain != "telecom":
        return (folder / "policy.md").read_text("utf-8")
    main_name = "main_policy_solo.md" if solo else "main_policy.md"
    main, manual = ((folder / name).read_text("utf-8") for name in (main_name, "tech_support_manual.md"))
    return f"<main_policy>\n{main}\n</main_policy>\n<tech_support_policy>\n{manual}\n</tech_support_policy>"


@cache
def load_domain(domain: Domain) -> DomainData:
    if domain not in DOMAINS:
        raise ValueError(f"no tau2 domain {domain!r} (there are {', '.join(DOMAINS)})")
    folder = VENDORED / domain
    user_tools = folder / "user_tools.json"
    tasks = [Tau2Task.model_validate(row) for row in json.loads((folder / "tasks.json").read_text("utf-8"))]
    for task in tasks:  # checked once here, not at every episode's start
        state = task.initial_state
        if state is not None and (state.initialization_data or state.message_history):
            raise ValueError(f"tau2 {domain} task {task.id}: initialization data and message histories are not "
                             "reproduced (no airline, retail or telecom task has them)")  # fmt: skip
    return DomainData(
        name=domain,
        policy=_policy(domain),
        tasks=tasks,
        splits=json.loads((folder / "split_tasks.json").read_text("utf-8")),
        tools=json.loads((folder / "tools.json").read_text("utf-8"))["tools"],
        toolkit=_TOOLKITS[domain],
        user_tools=json.loads(user_tools.read_text("utf-8"))["tools"] if user_tools.exists() else None,
        solo_policy=_policy(domain, solo=True) if domain == "telecom" else None,
    )


def user_guidelines(with_tools: bool = False) -> str:
    """The user simulator's global guidelines (no persona guidelines); a user with tools gets the version that
    tells it how to use them."""
    name = "simulation_guidelines_tools.md" if with_tools else "simulation_guidelines.md"
    return (VENDORED / name).read_text("utf-8").replace("<PERSONA_GUIDELINES>", "")
