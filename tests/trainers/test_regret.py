"""Hint-based regret and the designer's reward: masking, flooring, the plateau, the invalid penalty."""

from __future__ import annotations

import pytest

from trainers.designer.regret import Play, RewardSettings, designer_reward, regret_of


def plays(plain: list[float | None], hinted: list[float | None]) -> list[Play]:
    return [Play(False, s) for s in plain] + [Play(True, s) for s in hinted]


def test_regret_is_hinted_minus_plain_and_infra_failures_are_masked() -> None:
    regret = regret_of(plays([0.0, 0.5, None, 1.0], [1.0, 1.0, None, None]))
    assert regret.masked == 3
    assert regret.mean_plain == pytest.approx(0.5) and regret.mean_hinted == 1.0
    assert regret.value == pytest.approx(0.5)
    assert regret.solve_rate_plain == pytest.approx(1 / 3)


def test_regret_mode_floors_a_misleading_hint_at_zero() -> None:
    misleading = regret_of(plays([1.0, 1.0], [0.0, 0.5]))
    assert misleading.value == pytest.approx(-0.75)
    assert designer_reward(misleading, RewardSettings()) == 0.0


def test_blend_pays_for_the_solve_rate_plateau() -> None:
    frontier = regret_of(plays([1.0, 0.0, 1.0, 0.0], [1.0, 1.0, 1.0, 1.0]))  # solve rate 0.5, regret 0.5
    easy = regret_of(plays([1.0] * 4, [1.0] * 4))
    blend = RewardSettings(mode="blend", plateau=(0.4, 0.6), plateau_weight=0.25)
    assert designer_reward(frontier, blend) == pytest.approx(0.75)
    assert designer_reward(easy, blend) == 0.0
    assert designer_reward(frontier, RewardSettings()) == pytest.approx(0.5)


def test_invalid_worlds_get_the_penalty_and_unjudgeable_ones_are_masked() -> None:
    assert designer_reward(None, RewardSettings(invalid_penalty=-0.3)) == -0.3
    mostly_failed = regret_of(plays([None, None, 1.0], [1.0, 1.0, 1.0]))
    assert designer_reward(mostly_failed, RewardSettings(min_plays=2)) is None


def test_a_bad_plateau_is_refused() -> None:
    with pytest.raises(ValueError, match="plateau"):
        RewardSettings(plateau=(0.7, 0.3))


def test_band_is_the_official_spade_reward_on_the_unaided_win_rate_and_regret() -> None:
    """0.6 x a flat-top band on the unaided win rate (1 in [0.4, 0.6], linear to 0 within 0.25 of its edges)
    + 0.4 x regret floored at 0 over 0.15, capped at 1; hand-computed."""
    band = RewardSettings(mode="band")
    frontier = regret_of(plays([1.0, 0.0, 1.0, 0.0], [1.0, 1.0, 1.0, 0.0]))  # win rate 0.5, regret 0.25
    assert designer_reward(frontier, band) == pytest.approx(0.6 * 1.0 + 0.4 * 1.0)
    hard = regret_of(plays([1.0, 0.0, 0.0, 0.0], [1.0, 0.0, 0.0, 0.0]))  # win rate 0.25, regret 0
    assert designer_reward(hard, band) == pytest.approx(0.6 * (1 - 0.15 / 0.25))
    easy = regret_of(plays([1.0, 1.0, 1.0, 0.5], [1.0, 1.0, 1.0, 1.0]))  # solved 0.75, credit 0.875; regret 0.125
    assert designer_reward(easy, band) == pytest.approx(0.6 * (1 - 0.15 / 0.25) + 0.4 * 0.125 / 0.15)
    credit = RewardSettings(mode="band", win="credit")  # the same world by partial credit: off the band
    assert designer_reward(easy, credit) == pytest.approx(0.4 * 0.125 / 0.15)
    never = regret_of(plays([0.0] * 4, [0.0] * 4))
    assert designer_reward(never, band) == 0.0
    partial = regret_of(plays([0.5] * 4, [0.5] * 4))  # never solved, half the credit every time
    assert designer_reward(partial, band) == 0.0 and designer_reward(partial, credit) == pytest.approx(0.6)
