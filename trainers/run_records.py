"""The self-play run's own journals: `train.jsonl` (one `IterationReport` per iteration) and `eval.jsonl`
(one `HeldOut` per held-out evaluation), and how each reads back."""

from __future__ import annotations

import statistics
from pathlib import Path

from pydantic import BaseModel

from trainers import journal


class IterationReport(BaseModel):
    """One line of `train.jsonl`."""

    iteration: int
    rows: dict[str, int]
    skipped: dict[str, int]
    agent_return: float | None
    designer_reward: float | None
    valid_worlds: int
    sampled_tokens: int | None = None  # the model's own tokens in the iteration's rows (not tool results)
    groups: int | None = None  # GRPO groups among the rows
    zero_spread_groups: int | None = None  # of those, groups whose rewards were all equal (no learning signal)
    trained_tokens: int | None = None  # tokens (prompt + completion) of the rows the update trained on
    agent_episodes: int | None = None  # the agent's training plays (what equal agent compute counts)
    agent_tokens: int | None = None  # the tokens the agent sampled in them (its rows' own tokens)
    seconds: dict[str, float]

    @property
    def zero_spread_share(self) -> float | None:
        return self.zero_spread_groups / self.groups if self.groups and self.zero_spread_groups is not None else None


class TaskResult(BaseModel):
    """One held-out task of the suite and the score its plain play got."""

    world: str
    seed: int
    reward: float | None  # None: the play failed for infrastructure reasons (no score)

    @property
    def task(self) -> str:
        return f"{self.world}/{self.seed}"


class HeldOut(BaseModel):
    """One line of `eval.jsonl`: the held-out suite's tasks (one plain play each), and success on the full
    reference tasks per world, without and with the hint."""

    after_iteration: int  # -1: before training
    suite: str | None = None  # the suite's name/version
    tasks: list[TaskResult] = []
    success_plain: dict[str, float]  # empty when `run.eval_seeds` is 0
    success_hinted: dict[str, float]
    mean_plain: float | None  # None: no full reference tasks were played
    mean_hinted: float | None
    seconds: float = 0.0
    elapsed_s: float | None = None  # since the training process started
    peak_rss_gb: float | None = None  # so far: this process and the ones it started, summed (`trainers.memory`)

    @property
    def scored(self) -> list[TaskResult]:
        return [task for task in self.tasks if task.reward is not None]

    def successes(self) -> dict[str, float]:
        """Per scored task: 1.0 if its play solved it, else 0.0."""
        return {task.task: float((task.reward or 0.0) >= 1.0) for task in self.scored}

    def credits(self) -> dict[str, float]:
        """Per scored task: its partial credit."""
        return {task.task: task.reward or 0.0 for task in self.scored}

    @property
    def success(self) -> float:
        return statistics.fmean(self.successes().values()) if self.scored else 0.0

    @property
    def partial_credit(self) -> float:
        return statistics.fmean(self.credits().values()) if self.scored else 0.0


def read_iterations(out: Path) -> list[IterationReport]:
    """`train.jsonl` read back: one report per completed iteration."""
    return journal.read(out / "train.jsonl", IterationReport)


def read_held_out(out: Path) -> list[HeldOut]:
    """`eval.jsonl` read back: the held-out results in the order they were measured."""
    return journal.read(out / "eval.jsonl", HeldOut)
