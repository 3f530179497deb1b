"""Training rows for GRPO, built from what the engine stored, and their advantages per role.

A row is one sampled sequence exactly as the server produced it: the first prompt's ids, then every id
after it (the model's own tokens, and the tool results and template glue between turns), with a mask that
keeps only the model's tokens in the loss and the logprobs the server sampled them with. Nothing is
re-tokenised here: a trace that drifted (the server re-rendered history) is left out and counted, never
repaired. Rows are grouped the way GRPO compares them: the agent's plays of one world in one hint condition
that open on the same prompt ids (one reference task's K plays; a designed world's K plays on seeds 0..K-1,
which open alike when the seed changes only its hidden state), the designer's generations for one document.
Grouped by seed instead, a designed world's plays were groups of one with no advantage, and the agent never
learned from a designed world (every run up to d4ff634).

Advantages are centred within each group and scaled per role, so the designer's regret (often near 0)
and the agent's scores (0..1) each get unit scale instead of one role drowning the other.
"""

from __future__ import annotations

import hashlib
import statistics
from array import array
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel

from engine.trajectory import EpisodeRecord, Role, SampledSpan, TokenTrace

Scale = Literal["role", "group", "none"]


class TrainingRow(BaseModel):
    role: Role
    group: str
    prompt_ids: list[int]
    completion_ids: list[int]
    logprobs: list[float | None]  # the sampler's; None: not reported (no importance weight there)
    env_mask: list[int]  # 1: a sampled token (in the loss); 0: tool results and template glue
    grammar: str = ""  # the grammar each sampled reply was constrained by ("": none; `trainers.constrained`)
    spans: list[SampledSpan] = []  # or each stage's own grammar (a staged reply; `TokenTrace.spans`)
    reward: float
    advantage: float = 0.0


@dataclass
class Skipped:
    """Why records did not become rows, by reason: trainers log it, tests check it."""

    reasons: Counter[str] = field(default_factory=Counter)

    def add(self, reason: str) -> None:
        self.reasons[reason] += 1


PADDING_GROUP = "padding"


def padding_row(like: TrainingRow) -> TrainingRow:
    """A row that fills an update without moving it: one prompt token, one completion token out of the loss."""
    return TrainingRow(role=like.role, group=PADDING_GROUP, prompt_ids=like.prompt_ids[:1],
                       completion_ids=like.completion_ids[:1], logprobs=[None], env_mask=[0], reward=0.0)  # fmt: skip


def _usable(trace: TokenTrace | None, skipped: Skipped) -> TokenTrace | None:
    if trace is None or not trace.prompt_ids:
        skipped.add("no token ids (play in tokens mode, or chat mode with --token-ids)")
        return None
    if not trace.exact:
        skipped.add("token drift (the held ids are not what the server sampled)")
        return None
    if not any(trace.loss_mask):
        skipped.add("no sampled tokens")
        return None
    return trace


def _row(role: Role, group: str, trace: TokenTrace, reward: float) -> TrainingRow:
    return TrainingRow(
        role=role,
        group=group,
        prompt_ids=trace.prompt_ids,
        completion_ids=trace.completion_ids,
        logprobs=list(trace.logprobs),
        env_mask=trace.loss_mask,
        grammar=trace.grammar,
        spans=trace.spans,
        reward=reward,
    )


def agent_rows(records: Iterable[EpisodeRecord]) -> tuple[list[TrainingRow], Skipped]:
    """One row per usable agent episode; infrastructure failures are masked (skipped), never scored 0."""
    rows, skipped = [], Skipped()
    for record in records:
        if record.status == "infra_error" or record.reward is None:
            skipped.add(f"infra_error: {record.cause}")
            continue
        trace = _usable(record.tokens, skipped)
        if trace is not None:
            rows.append(_row("agent", agent_group(record, trace), trace, record.reward))
    return rows, skipped


def agent_group(record: EpisodeRecord, trace: TokenTrace) -> str:
    """The GRPO group of an agent play: its world, hint condition and opening prompt (ids, digested)."""
    opening = hashlib.blake2b(array("q", trace.prompt_ids).tobytes(), digest_size=8).hexdigest()
    return f"agent/{record.key.world}/{'hinted' if record.key.hinted else 'plain'}/{opening}"


def designer_rows(outcomes: Iterable[Any]) -> tuple[list[TrainingRow], Skipped]:
    """One row per designer turn with a reward (`DesignOutcome` lines); a masked reward (None) is skipped."""
    rows, skipped = [], Skipped()
    for outcome in outcomes:
        if outcome.reward is None:
            skipped.add("masked reward (endpoint failure, or too few plays)")
            continue
        trace = _usable(outcome.sample.tokens, skipped)
        if trace is not None:
            group = f"designer/{outcome.iteration}/{outcome.sample.document}"
            rows.append(_row("designer", group, trace, outcome.reward))
    return rows, skipped


def with_advantages(rows: list[TrainingRow], scale: Scale = "role", epsilon: float = 1e-4) -> list[TrainingRow]:
    """Copies of `rows` with advantage = (reward - group mean) / scale.

    `role`: the standard deviation of the centred rewards over all of the role's rows; `group`: the group's
    own standard deviation (GRPO's default); `none`: unscaled. A group of one, or one where every reward is
    equal, carries no signal: its advantages are 0.
    """
    groups: dict[str, list[int]] = defaultdict(list)
    for index, row in enumerate(rows):
        groups[row.group].append(index)
    centred = [0.0] * len(rows)
    for members in groups.values():
        mean = statistics.fmean(rows[i].reward for i in members)
        for i in members:
            centred[i] = rows[i].reward - mean
    divisor = [1.0] * len(rows)
    if scale == "group":
        for members in groups.values():
            spread = statistics.pstdev(rows[i].reward for i in members)
            for i in members:
                divisor[i] = spread + epsilon
    elif scale == "role":
        by_role: dict[str, list[int]] = defaultdict(list)
        for index, row in enumerate(rows):
            by_role[row.role].append(index)
        for members in by_role.values():
            spread = statistics.pstdev(centred[i] for i in members) if len(members) > 1 else 0.0
            for i in members:
                divisor[i] = spread + epsilon
    return [row.model_copy(update={"advantage": centred[i] / divisor[i]}) for i, row in enumerate(rows)]


def zero_spread_share(rows: list[TrainingRow]) -> tuple[int, int]:
    """(groups whose rewards are all equal, so they teach nothing; groups)."""
    rewards: dict[str, set[float]] = defaultdict(set)
    for row in rows:
        rewards[row.group].add(row.reward)
    return sum(len(seen) == 1 for seen in rewards.values()), len(rewards)


def rollout_batch(rows: list[TrainingRow]) -> dict[str, Any]:
    """The columns TRL's `rollout_func` returns (prompt_ids, completion_ids, logprobs, env_mask), plus the
    advantage handed over as the reward (`env_reward`) and each row's role for per-role metrics."""
    return {
        "prompt_ids": [row.prompt_ids for row in rows],
        "completion_ids": [row.completion_ids for row in rows],
        "logprobs": [row.logprobs for row in rows],
        "env_mask": [row.env_mask for row in rows],
        "env_reward": [row.advantage for row in rows],
        "role": [row.role for row in rows],
    }
