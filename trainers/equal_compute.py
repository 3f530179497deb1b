"""Equal agent compute across the arms of a comparison, in episodes and in sampled tokens.

Filling every arm to the same number of tasks (`agent.fill_reference`) makes agent episodes equal by
construction, but not the tokens the agent samples: the arms' policies diverge and reply at different
lengths, and a designed world's plays are not as long as a reference task's (the first whole comparison
sampled -13% to +26% of the spade arm's tokens at equal episodes). With `agent.compute_from`, an arm follows
another run (the spade arm of its seed, which ran first): after each iteration's designed worlds, every
reference task it plays is one that brings its compute so far closer to that run's through the same
iteration, closeness being the sum of the squared relative gaps in episodes and in tokens (`gap`). Neither
count is a hard bound: when the arm's replies are longer or shorter than spade's, both cannot be matched, and
the rule settles between them rather than matching one and giving up the other. (The second whole comparison
played `reference_tasks` in every iteration before the rule had a say, and held episodes within 10%: one arm,
whose replies grew long in the last iteration as spade's grew short, sampled 19% more tokens.) Both are
counted the way `train.jsonl` counts them (`IterationReport.agent_episodes`, `agent_tokens`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import accumulate
from pathlib import Path
from typing import Protocol

TOLERANCE = 0.10  # the bound, checked by the comparison: episodes and tokens within 10% of spade's


class Recorded(Protocol):
    """What a `train.jsonl` line says of the agent's compute (`trainers.run_records.IterationReport`)."""

    iteration: int
    agent_episodes: int | None
    agent_tokens: int | None


class ComputeTargetError(ValueError):
    """`agent.compute_from` names a run this one cannot follow; the message says why."""


@dataclass(frozen=True)
class Compute:
    """The agent's training plays so far and the tokens it sampled in them."""

    episodes: int = 0
    tokens: int = 0

    def __add__(self, other: Compute) -> Compute:
        return Compute(self.episodes + other.episodes, self.tokens + other.tokens)


@dataclass(frozen=True)
class ComputeTarget:
    """Another run's agent compute, cumulative after each of its iterations."""

    source: Path
    after: list[Compute]  # after[i]: through iteration i

    @classmethod
    def of_reports(cls, source: Path, reports: Sequence[Recorded], iterations: int) -> ComputeTarget:
        """The compute of the run in `source` from its `train.jsonl` reports, which must cover `iterations`."""
        if len(reports) < iterations:
            raise ComputeTargetError(
                f"agent.compute_from={source}: it recorded {len(reports)} iterations, this run needs {iterations}"
            )
        missing = [r.iteration for r in reports if r.agent_episodes is None or r.agent_tokens is None]
        if missing:
            raise ComputeTargetError(
                f"agent.compute_from={source}: iterations {missing} do not record agent episodes and tokens"
            )
        steps = [Compute(r.agent_episodes or 0, r.agent_tokens or 0) for r in reports]
        return cls(source, list(accumulate(steps)))

    def wants_more(self, iteration: int, done: Compute, task_episodes: int, tokens_per_episode: float | None
                   ) -> bool:  # fmt: skip
        """Whether one more task of `task_episodes` plays should be played in `iteration`, given the compute
        `done` so far (earlier iterations and this one's plays): whether it brings `gap` down, its tokens
        expected at `tokens_per_episode` (the caller's estimate of this run's replies; without one, the
        target's own rate)."""
        target = self.after[iteration]
        if tokens_per_episode is None:
            tokens_per_episode = target.tokens / target.episodes if target.episodes else 0.0
        expected = Compute(task_episodes, round(tokens_per_episode * task_episodes))
        return gap(done + expected, target) < gap(done, target)


def gap(done: Compute, target: Compute) -> float:
    """How far `done` is from `target`: the sum of the squared relative differences in episodes and tokens, so
    that a gap of 10% in one costs as much as 10% in the other, and two small gaps less than one large."""
    return sum(((have - want) / want) ** 2 for have, want in
               ((done.episodes, target.episodes), (done.tokens, target.tokens)) if want)  # fmt: skip
