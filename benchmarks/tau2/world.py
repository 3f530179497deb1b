"""tau2's domains as toolworlds, for training: the `train` split only, one instruction, no simulated user.

A toolworld has one instruction and ends when the agent finishes, so a tau2 task becomes a ticket: the
customer's situation as the task's user scenario states it (what they want, what they know, how they
behave), the domain's policy as the world's description, the official tools answering as they do in the
benchmark, and `finish` carrying the agent's last message to the customer. The seed picks a task of the
release's `train` split; the `test` split, which `spadework bench tau2 --split test` measures, is never
reachable from these worlds.

The grade gives partial credit: the database ends as the gold actions leave it (the benchmark's DB check,
half the weight), each gold state-changing call that succeeds was made with the same arguments, and each
`communicate_info` string is in the final message. Natural-language assertions, which need a judge, are not
graded, so the tasks only they judge (refusals: the reference calls no state-changing tool and says nothing
checkable) are left out. The hint names the tools the reference resolution calls, in order, without their arguments.
This is spadework's adaptation, not the benchmark: its scores are not tau2 scores.

Telecom becomes the official's own solo mode: the agent reads the task's ticket, has the customer's phone
tools beside its own (a phone tool's call goes to the phone, as the official routes it) and works under the
solo policy. Its grade: the task's end-state assertions, judged on the state rebuilt from the calls (the
benchmark's ENV_ASSERTION, half the weight), and each gold action made, successfully and with the reference's
arguments (stricter than the benchmark's ACTION match, which an argument-less call satisfies); each
state-changing call beyond the reference's halves the credit (the phone's fixes mostly take no arguments, and
calling every toggle would otherwise earn their goals: 0.33 on average, against 0.06 for doing nothing).
"""

from __future__ import annotations

import json
import random
from collections import Counter
from dataclasses import dataclass, field
from functools import cache, cached_property
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, TypeAdapter, create_model

from benchmarks.tau2.data import Domain, DomainData, Tau2Task, load_domain
from benchmarks.tau2.domain_env import DomainEnv, Requestor
from benchmarks.tau2.evaluator import Said, communicate_checks, gold_play
from benchmarks.tau2.prompts import agent_system_prompt
from benchmarks.tau2.toolkit import Toolkit
from toolworlds.core import Brief, Finish, ToolCall, ToolWorld
from toolworlds.scoring import Scorecard
from toolworlds.tool import ArgumentProblem, OpenAITool, ToolSpec

SPLIT = "train"


class _Arguments(BaseModel):
    model_config = ConfigDict(extra="allow")


@dataclass(frozen=True)
class OfficialTool(ToolSpec):
    """A tau2 tool as the official environment offers it: its own JSON schema, and any JSON object as
    arguments (the official tools check their arguments themselves, and a bad one is an error the agent reads)."""

    schema: dict[str, Any] = field(default_factory=dict)

    @cached_property
    def input_schema(self) -> dict[str, Any]:
        return self.schema

    def validate(self, arguments: object) -> tuple[BaseModel | None, list[ArgumentProblem]]:
        if not isinstance(arguments, dict):
            kind = type(arguments).__name__
            return None, [ArgumentProblem(field="(arguments)", problem=f"must be a JSON object, got {kind}")]
        return self.arguments.model_validate(arguments), []


@cache
def _gradable(domain: Domain) -> list[Tau2Task]:
    data = load_domain(domain)
    gradable = []
    for task in data.split(SPLIT):
        criteria = task.evaluation_criteria
        infos = criteria.communicate_info if criteria else None
        asserted = criteria.env_assertions if criteria else None
        if infos or asserted or any(data.toolkit.mutates_tool(action.name) for action in task.gold_actions):
            gradable.append(task)
    return gradable


class Tau2State(BaseModel):
    task_id: str
    calls: list[tuple[str, dict[str, Any], bool]] = []  # every call made: name, arguments, whether it failed


class Tau2World(ToolWorld[Tau2State]):
    """Base of the tau2 domain worlds; a subclass names its `domain`."""

    domain: ClassVar[Domain]
    max_steps = 30

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        data = load_domain(cls.domain)
        # the benchmark's system prompt, what transfers (with the solo policy where the agent works the phone)
        cls.description = agent_system_prompt(data.solo_policy or data.policy)
        entries = [*data.tools, *(data.user_tools or [])]
        cls.tool_specs = {entry["function"]["name"]: _official_tool(entry) for entry in entries}
        for spec in cls.tool_specs.values():
            setattr(cls, spec.method_name, _dispatcher(spec.name))

    @classmethod
    def data(cls) -> DomainData:
        return load_domain(cls.domain)

    @classmethod
    def tasks(cls) -> list[Tau2Task]:
        """The `train` tasks this world can grade: those whose reference changes the database or tells the
        customer something (the rest, refusals, are judged only by natural-language assertions)."""
        return _gradable(cls.domain)

    def build(self, rng: random.Random) -> Brief:
        task = rng.choice(self.tasks())
        self.state = Tau2State(task_id=task.id)
        self.env: DomainEnv = self.data().fresh_env(task)
        names = [action.name for action in task.gold_actions]
        hint = ("The reference resolution calls, in order: " + ", ".join(names) + ".") if names else (
            "The reference resolution changes nothing in the database.")  # fmt: skip
        return Brief(instruction=_ticket(task), hint=hint, variant=task.id)

    @property
    def toolkit(self) -> Toolkit:
        """The agent's own tools."""
        return self.env.tools

    @property
    def task_data(self) -> Tau2Task:
        return next(task for task in self.data().tasks if task.id == self.state.task_id)

    def _requestor(self, name: str) -> Requestor:
        """Whose tool `name` is: the phone's go to the phone (the official solo mode's routing)."""
        phone = self.env.user_tools
        return "user" if phone is not None and name in phone.tool_names else "assistant"

    def _dispatch(self, name: str, arguments: dict[str, Any]) -> str:
        result = self.env.call(name, arguments, self._requestor(name))
        self.state.calls.append((name, arguments, result.error))
        return result.content

    def grade(self) -> Scorecard:
        gold = gold_play(self.data(), self.task_data)
        card = Scorecard().goal("the database ends as the reference leaves it", self.toolkit.db_hash() == gold.db_hash,
                                weight=max(1.0, len(gold.writes)))  # fmt: skip
        made = [(name, arguments) for name, arguments, failed in self.state.calls if not failed]
        for name, arguments in gold.writes:
            card.goal(f"{name} made as the reference makes it", (name, arguments) in made)
        criteria = self.task_data.evaluation_criteria
        infos = [] if criteria is None else list(criteria.communicate_info or [])
        for check in communicate_checks([Said("assistant", self.answer)], infos):
            card.goal(f"told the customer {check['info']}", check["met"])
        return card

    def solution(self) -> list[ToolCall | Finish]:
        task = self.task_data
        criteria = task.evaluation_criteria
        infos = [] if criteria is None else list(criteria.communicate_info or [])
        plan: list[ToolCall | Finish] = [ToolCall(name=action.name, arguments=action.arguments)
                                         for action in task.gold_actions]  # fmt: skip
        return [*plan, Finish(answer=" ".join(infos) or "Your request is handled.")]


FREE_TEXT = ("summary",)  # a transfer's summary is the agent's own words: not compared


def _checked(arguments: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in arguments.items() if key not in FREE_TEXT}


def _call_key(name: str, arguments: dict[str, Any]) -> str:
    return f"{name} {json.dumps(_checked(arguments), sort_keys=True)}"


def _dispatcher(name: str) -> Any:
    def run(self: Tau2World, **arguments: Any) -> str:
        return self._dispatch(name, arguments)

    return run


# Where an official description names a status by its Python enum name, which no result shows, the worlds say
# the status as the tools show it (the benchmark keeps the official text).
SHOWN_AS = {"AWAITING_PAYMENT": "'Awaiting Payment'", "already PAID": "already 'Paid'"}


def _official_tool(entry: OpenAITool) -> OfficialTool:
    function = entry["function"]
    name = function["name"]
    description = function.get("description", "")
    for code, shown in SHOWN_AS.items():
        description = description.replace(code, shown)
    arguments = create_model(f"{name}_arguments", __base__=_Arguments)
    return OfficialTool(name, description, arguments, TypeAdapter(str), f"_tau2_{name}",
                        schema=function["parameters"])  # fmt: skip


def _ticket(task: Tau2Task) -> str:
    if task.ticket is not None:  # telecom: the official solo agent's ticket
        return (
            f"{task.ticket}\n\nYou cannot talk to the customer: you work their phone yourself with its tools "
            "(check_status_bar, toggle_airplane_mode, ...), beside your own. Resolve the ticket by the policy, "
            "then call `finish`."
        )
    return (
        "A customer has contacted you. Their situation, as they would tell it:\n\n"
        f"{task.user_scenario.instructions}\n\n"
        "Resolve it by the policy, with the tools. Then call `finish` with your last message to the customer, "
        "stating anything they asked to know."
    )


class AirlineWorld(Tau2World):
    """tau2 airline (train split): a customer-service agent over flights, users and reservations."""

    name = "tau2-airline"
    domain = "airline"


class RetailWorld(Tau2World):
    """tau2 retail (train split): a customer-service agent over products, users and orders."""

    name = "tau2-retail"
    domain = "retail"


class TelecomWorld(Tau2World):
    """tau2 telecom (train split), solo: a tech-support agent over the carrier's records and the customer's phone."""

    name = "tau2-telecom"
    domain = "telecom"
    max_steps = 40

    def grade(self) -> Scorecard:
        data, task = self.data(), self.task_data
        env = data.fresh_env(task)  # the end state rebuilt from the calls, so grading changes nothing it reads
        for name, arguments, _failed in self.state.calls:
            env.call(name, dict(arguments), self._requestor(name))
        criteria = task.evaluation_criteria
        assertions = list(criteria.env_assertions or []) if criteria else []
        actions = task.gold_actions
        card = Scorecard()
        for assertion in assertions:
            met = env.check(assertion.env_type, assertion.func_name, dict(assertion.arguments), assertion.assert_value)
            card.goal(f"{assertion.func_name}({assertion.arguments}) holds", met,
                      weight=max(1.0, len(actions)) / max(1, len(assertions)))  # fmt: skip
        made = [(name, _checked(arguments)) for name, arguments, failed in self.state.calls if not failed]
        for action in actions:  # exactly, and it must succeed: the benchmark's lenient match would pay any empty call
            card.goal(f"{action.name} made as the reference makes it",
                      (action.name, _checked(action.arguments)) in made)  # fmt: skip
        # Most phone fixes take no arguments, so calling every toggle would meet their goals: each state-changing
        # call beyond the reference's (by name and arguments) is a harm, and halves the credit.
        wanted = Counter(_call_key(action.name, action.arguments) for action in actions if env.mutates(action.name))
        surplus = Counter(_call_key(name, arguments) for name, arguments in made if env.mutates(name)) - wanted
        for key, count in sorted(surplus.items()):
            for _ in range(count):
                card.harm(f"{key.split(' ', 1)[0]} beyond what the reference does", True)
        return card
