"""The official reward of one tau2 simulation (`evaluator.evaluate_simulation`, evaluation type `all`).

A simulation that did not end by the agent's or the user's stop scores 0. Otherwise the reward is the product
of the checks the task's `reward_basis` names:
- DB: the database the agent left equals the one its gold actions make from the initial database (SHA-256 of
  the sorted dump; a gold action that fails is skipped, as the official logs and skips it). The official
  rebuilds the agent's database by replaying its state-changing calls; the calls are deterministic, so the
  live database is that replay.
- COMMUNICATE: every `communicate_info` string appears, case-insensitively, in one agent message with its
  commas removed.
- NL_ASSERTION: an LLM judge (the official's prompt, temperature 0) says every assertion is met, reading the
  whole trajectory as `role: content` lines.
ACTION and ENV_ASSERTION, which no airline or retail task uses, are refused rather than guessed.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any, Literal

from benchmarks.tau2.data import VENDORED, DomainData, Tau2Task
from benchmarks.tau2.toolkit import Toolkit

if TYPE_CHECKING:  # the toolworlds (world.py) read the checks, and `toolworld` commands never load the engine
    from benchmarks.parties import Party
    from engine.trajectory import EpisodeKey

Termination = Literal["agent_stop", "user_stop", "max_steps", "too_many_errors"]


@dataclass(frozen=True)
class Said:
    """One message of the official trajectory."""

    role: Literal["assistant", "user", "tool"]
    content: str | None
    tool_calls: list[dict[str, Any]] | None = None


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
    """What a task's gold actions do from the initial database: the state-changing calls that succeed, and the
    hash of the database they leave (the same for every simulation of the task, so computed once)."""

    writes: list[tuple[str, dict[str, Any]]]
    db_hash: str


def gold_play(domain: DomainData, task: Tau2Task) -> GoldPlay:
    key = (domain.name, task.id)
    if key not in _GOLD_PLAYS:
        toolkit = domain.fresh_toolkit()
        writes = []
        for action in task.gold_actions:
            if action.requestor != "assistant":
                raise ValueError(f"tau2 {domain.name} task {task.id}: a user action ({action.name}) needs user tools")
            if not toolkit.call(action.name, dict(action.arguments)).error and toolkit.mutates(action.name):
                writes.append((action.name, dict(action.arguments)))
        _GOLD_PLAYS[key] = GoldPlay(writes, toolkit.db_hash())
    return _GOLD_PLAYS[key]


_GOLD_PLAYS: dict[tuple[str, str], GoldPlay] = {}


async def evaluate(domain: DomainData, task: Tau2Task, termination: Termination | None, said: list[Said],
                   toolkit: Toolkit, judge: Party | None, key: EpisodeKey) -> dict[str, Any]:  # fmt: skip
    """The reward and what made it, as the official `RewardInfo` reports them."""
    if termination not in ("agent_stop", "user_stop"):
        return {"reward": 0.0, "termination": termination, "note": "terminated prematurely"}
    criteria = task.evaluation_criteria
    if criteria is None:
        return {"reward": 1.0, "termination": termination, "note": "no evaluation criteria"}
    basis = set(criteria.reward_basis)
    unsupported = basis - {"DB", "COMMUNICATE", "NL_ASSERTION"}
    if unsupported:
        raise ValueError(f"tau2 task {task.id}: reward basis {sorted(unsupported)} is not reproduced")
    card: dict[str, Any] = {"termination": termination, "reward_basis": criteria.reward_basis}
    reward = 1.0
    if "DB" in basis:
        match = criteria.actions is None or toolkit.db_hash() == gold_play(domain, task).db_hash
        card["db_match"] = match
        reward *= float(match)
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
