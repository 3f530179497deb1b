"""The official reward of one tau2 simulation (`evaluator.evaluate_simulation`, evaluation type `all`).

A simulation that did not end by the agent's or the user's stop scores 0. Otherwise the reward is the product
of the checks the task's `reward_basis` names:
- DB: both databases (the agent's, and the user's phone in telecom) equal those the gold actions make from the
  task's initial state (SHA-256 of the sorted dump; a gold action that fails is skipped, as the official logs
  and skips it). The simulation's side is rebuilt as the official rebuilds it: the initial state, then every
  state-changing call of the trajectory again, each required to answer as it did.
- ENV_ASSERTION: each assertion function (telecom's "mobile data is on", "an MMS can be sent", ...) gives its
  expected value on that rebuilt environment.
- ACTION: each gold action is matched by some call of the agent's or the user's (`Action.matches`).
- COMMUNICATE: every `communicate_info` string appears, case-insensitively, in one agent message with its
  commas removed.
- NL_ASSERTION: an LLM judge (the official's prompt, temperature 0) says every assertion is met, reading the
  whole trajectory as `role: content` lines.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any, Literal

from benchmarks.tau2.data import VENDORED, Action, DomainData, Tau2Task
from benchmarks.tau2.domain_env import DomainEnv, Requestor

if TYPE_CHECKING:  # the toolworlds (world.py) read the checks, and `toolworld` commands never load the engine
    from benchmarks.parties import Party
    from engine.trajectory import EpisodeKey

Termination = Literal["agent_stop", "user_stop", "max_steps", "too_many_errors"]


@dataclass(frozen=True)
class Said:
    """One message of the official trajectory."""

    role: Literal["assistant", "user", "tool"]
    content: str | None
    tool_calls: list[dict[str, Any]] | None = None  # each {"name", "arguments"}; the message's role made them


@cache
def _judge_prompts() -> dict[str, str]:
    prompts: dict[str, str] = json.loads((VENDORED / "judge_prompts.json").read_text("utf-8"))
    return prompts


def communicate_checks(said: list[Said], infos: list[str]) -> list[dict[str, Any]]:
    checks = []
    for info in infos:
        met = any(
            message.role == "assistant"
            and message.content is not None
            and message.content.strip() != ""
            and info.lower() in message.content.lower().replace(",", "")
            for message in said
        )
        checks.append({"info": info, "met": met})
    return checks


def judge_messages(said: list[Said], assertions: list[str]) -> list[dict[str, str]]:
    prompts = _judge_prompts()
    trajectory = "\n".join(f"{message.role}: {message.content}" for message in said)
    user = prompts["nl_assertions_user"].format(trajectory=trajectory, assertions=str(assertions))
    return [{"role": "system", "content": prompts["nl_assertions_system"]}, {"role": "user", "content": user}]


async def judge_checks(judge: Party, key: EpisodeKey, said: list[Said], assertions: list[str]) -> list[dict[str, Any]]:
    """The judge's verdict on each assertion; a reply that is not the JSON asked for is an infrastructure failure
    (the official evaluator raises)."""
    from engine.transport import EndpointFailure  # here: see the imports

    answer = await judge.answer(key, judge_messages(said, assertions))
    try:
        results = json.loads(str(answer.get("content") or "")).get("results", [])
        return [{"assertion": row["expectedOutcome"], "met": bool(row["metExpectation"])} for row in results]
    except (json.JSONDecodeError, AttributeError, KeyError, TypeError) as error:
        raise EndpointFailure("bad_response", f"the judge's verdict is not the JSON asked for: {error}",
                              retryable=False) from None  # fmt: skip


@dataclass(frozen=True)
class GoldPlay:
    """What a task's gold actions do from its initial state: the agent's state-changing calls that succeed, and
    the hashes of the databases they leave (the same for every simulation of the task, so computed once). As
    the official's gold environment, the actions run without a sync between them, and a failing one is skipped."""

    writes: list[tuple[str, dict[str, Any]]]
    db_hash: str
    user_db_hash: str | None = None


def gold_play(domain: DomainData, task: Tau2Task) -> GoldPlay:
    key = (domain.name, task.id)
    if key not in _GOLD_PLAYS:
        env = domain.fresh_env(task)
        writes = []
        for action in task.gold_actions:
            toolkit = env.toolkit(action.requestor)
            failed = toolkit.call(action.name, dict(action.arguments)).error
            if not failed and action.requestor == "assistant" and toolkit.mutates(action.name):
                writes.append((action.name, dict(action.arguments)))
        _GOLD_PLAYS[key] = GoldPlay(writes, env.db_hash(), env.user_db_hash())
    return _GOLD_PLAYS[key]


_GOLD_PLAYS: dict[tuple[str, str], GoldPlay] = {}


def calls_made(said: list[Said]) -> list[tuple[Said, dict[str, Any], Said | None]]:
    """Every call of the trajectory (the agent's and the user's), with the message that made it and its result."""
    made = []
    for place, message in enumerate(said):
        for index, call in enumerate(message.tool_calls or []):
            answer = said[place + 1 + index] if place + 1 + index < len(said) else None
            made.append((message, call, answer if answer is not None and answer.role == "tool" else None))
    return made


def replay(domain: DomainData, task: Tau2Task, said: list[Said]) -> DomainEnv:
    """The environment the trajectory leaves, rebuilt as the official evaluator rebuilds it: the task's initial
    state, then every state-changing call again (unknown tools skipped), each answer required to be the one the
    simulation got (its strict replay; a difference is an error, not a score)."""
    env = domain.fresh_env(task)
    for message, call, answer in calls_made(said):
        name, arguments = call["name"], call["arguments"]
        if not env.has_tool(name) or not env.mutates(name):
            continue
        requestor: Requestor = "user" if message.role == "user" else "assistant"
        content = env.call(name, dict(arguments), requestor).content
        if answer is None or _decoded(content) != _decoded(answer.content or ""):
            raise ValueError(f"tau2 task {task.id}: replaying {name} gave {content!r}, the simulation got "
                             f"{None if answer is None else answer.content!r}")  # fmt: skip
    return env


def _decoded(content: str) -> Any:
    try:
        return json.loads(content)
    except json.JSONDecodeError:
        return content


def environment_checks(domain: DomainData, task: Tau2Task, said: list[Said]) -> dict[str, Any]:
    """The official `EnvironmentEvaluator`: both databases as the gold actions leave them, and the assertions
    on the end state (in order, each followed by a sync)."""
    criteria = task.evaluation_criteria
    if criteria is None or (criteria.actions is None and criteria.env_assertions is None):
        return {"db_match": True, "env_assertions": [], "db_reward": 1.0, "env_reward": 1.0}
    env = replay(domain, task, said)
    gold = gold_play(domain, task)
    match = env.db_hash() == gold.db_hash and env.user_db_hash() == gold.user_db_hash
    checks = [{"func_name": assertion.func_name, "arguments": assertion.arguments,
               "met": env.check(assertion.env_type, assertion.func_name, dict(assertion.arguments),
                                assertion.assert_value)}
              for assertion in criteria.env_assertions or []]  # fmt: skip
    return {
        "db_match": match,
        "env_assertions": checks,
        "db_reward": float(match),
        "env_reward": float(all(check["met"] for check in checks)),
    }


def action_checks(said: list[Said], actions: list[Action]) -> list[dict[str, Any]]:
    """The official `ActionEvaluator`: each gold action matched by some call of either party."""
    calls = [(call["name"], call["arguments"]) for _, call, _ in calls_made(said)]
    return [{"action": action.name, "requestor": action.requestor,
             "met": any(action.matches(name, arguments) for name, arguments in calls)}
            for action in actions]  # fmt: skip


async def evaluate(domain: DomainData, task: Tau2Task, termination: Termination | None, said: list[Said],
                   judge: Party | None, key: EpisodeKey) -> dict[str, Any]:  # fmt: skip
    """The reward and what made it, as the official `RewardInfo` reports them (evaluation type `all`)."""
    if termination not in ("agent_stop", "user_stop"):
        return {"reward": 0.0, "termination": termination, "note": "terminated prematurely"}
    criteria = task.evaluation_criteria
    if criteria is None:
        return {"reward": 1.0, "termination": termination, "note": "no evaluation criteria"}
    basis = set(criteria.reward_basis)
    card: dict[str, Any] = {"termination": termination, "reward_basis": criteria.reward_basis}
    environment = environment_checks(domain, task, said)  # computed whatever the basis, as the official does
    reward = 1.0
    if "DB" in basis:
        card["db_match"] = environment["db_match"]
        reward *= environment["db_reward"]
    if "ENV_ASSERTION" in basis:
        card["env_assertions"] = environment["env_assertions"]
        reward *= environment["env_reward"]
    if "ACTION" in basis and criteria.actions:
        checks = action_checks(said, criteria.actions)
        card["action_checks"] = checks
        reward *= float(all(check["met"] for check in checks))
    if "COMMUNICATE" in basis:
        checks = communicate_checks(said, criteria.communicate_info or [])
        card["communicate_checks"] = checks
        reward *= float(all(check["met"] for check in checks))
    if "NL_ASSERTION" in basis and criteria.nl_assertions:
        if judge is None:
            raise ValueError(f"tau2 task {task.id} needs a judge for its natural-language assertions")
        verdicts = await judge_checks(judge, key, said, criteria.nl_assertions)
        card["nl_assertions"] = verdicts
        reward *= float(all(verdict["met"] for verdict in verdicts))
    return {"reward": reward, **card}
