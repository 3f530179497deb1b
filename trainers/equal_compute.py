"""Equal agent compute across the arms of a comparison, in episodes and in sampled tokens.

Filling every arm to the same number of tasks (`agent.fill_reference`) makes agent episodes equal by
construction, but not the tokens the agent samples: the arms' policies diverge and reply at different
lengths, and a designed world's plays are not as long as a reference task's (the first whole comparison
sampled -13% to +26% of the spade arm's tokens at equal episodes). With `agent.compute_from`, an arm follows
another run (the spade arm of its seed, which ran first): after each iteration's own plays, it plays
reference tasks one at a time while one more brings its sampled agent tokens so far closer to that run's
through the same iteration, its episodes held within `TOLERANCE` of that run's. Both are counted the way
`train.jsonl` counts them (`IterationReport.agent_episodes`, `agent_tokens`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import accumulate
from pathlib import Path
from typing import Protocol

TOLERANCE = 0.10  # the bound: agent episodes and tokens of every arm within 10% of spade's


class Recorded(Protocol):
    """What a `train.jsonl` line says of the agent's compute (`trainers.selfplay.IterationReport`)."""

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
    tolerance: float = TOLERANCE

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

    def wants_more(self, iteration: int, done: Compute, task_episodes: int) -> bool:
        """Whether one more task of `task_episodes` plays should be played in `iteration`, given the compute
        `done` so far (earlier iterations and this one's plays). It is, while the episodes are short of the
        lower bound; never past the upper bound; in between, when the tokens one more task is expected to
        sample (this run's mean per episode) bring the total closer to the target's."""
        target = self.after[iteration]
        if done.episodes < (1 - self.tolerance) * target.episodes:
            return True
        if done.episodes + task_episodes > (1 + self.tolerance) * target.episodes:
            return False
        expected = done.tokens / done.episodes * task_episodes if done.episodes else 0.0
        return abs(done.tokens + expected - target.tokens) < abs(done.tokens - target.tokens)
