"""Hint-based regret and the designer's reward.

A world is played K times without its privileged hint and K times with it. Regret is the mean score with
the hint minus the mean without: large when the task is solvable (the hint shows the way) but not yet
solved unaided, which is the frontier the designer should aim at. Plays that failed for infrastructure
reasons (the endpoint, the sandbox) say nothing about the world: they are masked, never scored as 0.

Three rewards: `regret` (floored at 0); `blend`, regret plus a fixed weight when the unaided win rate is in
a plateau; `band`, the shape of the official SPADE designer reward (spade-rl/spade, `plateau_reward` and the
`blend` of `delayed_env_rewards.py`), 0.6 x a flat-top band on the unaided win rate (1 in the plateau,
falling linearly to 0 over 0.25 on either side) + 0.4 x regret floored at 0 over 0.15, capped at 1. The
win rate is the share of unaided plays solved (`success`) or their mean partial credit (`credit`).
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

RewardMode = Literal["regret", "blend", "band"]
WinRate = Literal["success", "credit"]
BAND_WEIGHT, REGRET_SCALE, BAND_RAMP = 0.6, 0.15, 0.25  # the official SPADE designer reward's constants


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

    def win_rate(self, kind: WinRate) -> float:
        """The agent's unaided win rate: the share of plays solved, or their mean partial credit."""
        return self.solve_rate_plain if kind == "success" else self.mean_plain


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
    """How the designer is paid (the module's docstring): `plateau` is blend's plateau and band's flat top."""

    mode: RewardMode = "regret"
    plateau: tuple[float, float] = (0.4, 0.6)
    plateau_weight: float = 0.5
    win: WinRate = "success"
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
    low, high = settings.plateau
    win = regret.win_rate(settings.win)
    if settings.mode == "band":
        return BAND_WEIGHT * band(win, low, high) + (1 - BAND_WEIGHT) * min(1.0, max(0.0, regret.value) / REGRET_SCALE)
    reward = max(0.0, regret.value)
    if settings.mode == "blend":
        reward += settings.plateau_weight * (low <= win <= high)
    return reward


def band(rate: float, low: float, high: float, ramp: float = BAND_RAMP) -> float:
    """A flat-top band: 1 for a rate in [low, high], falling linearly to 0 within `ramp` of either edge."""
    outside = max(low - rate, rate - high, 0.0)
    return max(0.0, 1.0 - outside / ramp)
