"""Hint-based regret and the designer's reward.

A world is played K times without its privileged hint and K times with it. Regret is the mean score with
the hint minus the mean without: large when the task is solvable (the hint shows the way) but not yet
solved unaided, which is the frontier the designer should aim at. Plays that failed for infrastructure
reasons (the endpoint, the sandbox) say nothing about the world: they are masked, never scored as 0.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

RewardMode = Literal["regret", "blend"]


@dataclass(frozen=True)
class Play:
    """One finished play of a world: its score, or None when infrastructure failed it."""

    hinted: bool
    score: float | None


@dataclass(frozen=True)
class Regret:
    plain: list[float]
    hinted: list[float]
    masked: int
    solve_threshold: float = 1.0

    @property
    def mean_plain(self) -> float:
        return statistics.fmean(self.plain) if self.plain else 0.0

    @property
    def mean_hinted(self) -> float:
        return statistics.fmean(self.hinted) if self.hinted else 0.0

    @property
    def value(self) -> float:
        """Mean score with the hint minus mean score without; negative when the hint misleads."""
        return self.mean_hinted - self.mean_plain

    @property
    def solve_rate_plain(self) -> float:
        return sum(score >= self.solve_threshold for score in self.plain) / len(self.plain) if self.plain else 0.0


def regret_of(plays: Iterable[Play], solve_threshold: float = 1.0) -> Regret:
    plays = list(plays)
    return Regret(
        plain=[p.score for p in plays if not p.hinted and p.score is not None],
        hinted=[p.score for p in plays if p.hinted and p.score is not None],
        masked=sum(p.score is None for p in plays),
        solve_threshold=solve_threshold,
    )


@dataclass(frozen=True)
class RewardSettings:
    """How the designer is paid. `blend` adds `plateau_weight` when the unaided solve rate is in the plateau."""

    mode: RewardMode = "regret"
    plateau: tuple[float, float] = (0.4, 0.6)
    plateau_weight: float = 0.5
    invalid_penalty: float = -1.0
    min_plays: int = 2  # per side; fewer unmasked plays than this and the world's reward is masked too

    def __post_init__(self) -> None:
        low, high = self.plateau
        if not 0.0 <= low <= high <= 1.0:
            raise ValueError(f"plateau must satisfy 0 <= low <= high <= 1, got {self.plateau}")


def designer_reward(regret: Regret | None, settings: RewardSettings) -> float | None:
    """The designer's reward for one world: the penalty if it was invalid (`regret` None), None if masked."""
    if regret is None:
        return settings.invalid_penalty
    if min(len(regret.plain), len(regret.hinted)) < settings.min_plays:
        return None  # too many infrastructure failures to judge: leave it out of the group
    reward = max(0.0, regret.value)
    if settings.mode == "blend":
        low, high = settings.plateau
        reward += settings.plateau_weight * (low <= regret.solve_rate_plain <= high)
    return reward
