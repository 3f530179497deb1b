"""Frontier task choice: families whose plays disagree are picked, families that never do fade."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from engine.trajectory import EpisodeKey, EpisodeRecord
from trainers.frontier import FrontierTasks, Tally, choose, family_of, tally_groups
from trainers.suite import HELD_OUT_FIRST_SEED, SUITES


def play(world: str, seed: int, hinted: bool, reward: float | None) -> EpisodeRecord:
    return EpisodeRecord(run="t", key=EpisodeKey(world=world, seed=seed, sample=0, hinted=hinted), mode="tokens",
                         model="m", status="ok" if reward is not None else "infra_error", reward=reward, messages=[],
                         turns=[], started_at=0.0, duration_s=0.0)  # fmt: skip


def a_seed_of(world: str, tools: tuple[str, ...]) -> int:
    return next(seed for seed in range(10_000) if family_of(world, seed) == (world, tools))


def test_groups_are_counted_per_family_and_hint_condition() -> None:
    cancel, freeze = a_seed_of("orders", ("cancel_order",)), a_seed_of("banking", ("freeze_account",))
    records = [
        *[play("orders", cancel, False, reward) for reward in (1.0, 0.0)],  # spread
        *[play("orders", cancel, True, reward) for reward in (1.0, 1.0)],  # flat
        *[play("banking", freeze, False, reward) for reward in (0.0, None)],  # flat: None is no score
    ]
    tallies = tally_groups(records)
    assert tallies[("orders", ("cancel_order",))] == Tally(groups=2, spread=1)
    assert tallies[("banking", ("freeze_account",))] == Tally(groups=1, spread=0)


def test_a_family_that_spreads_wins_and_one_that_never_does_loses_to_the_untried() -> None:
    hot, cold, untried = ("orders", ("cancel_order",)), ("banking", ("get_account",)), ("ticketing", ("add_tag",))
    tallies = {hot: Tally(groups=4, spread=3), cold: Tally(groups=10, spread=0)}
    rng = random.Random(0)
    wins = Counter(choose([hot, cold, untried], tallies, rng) for _ in range(2000))
    assert wins[hot] > 0.9 * 2000
    against_cold = Counter(choose([cold, untried], tallies, rng) for _ in range(2000))
    assert against_cold[untried] > against_cold[cold]


@pytest.mark.slow  # 24 s: each pick scans 64 candidate seeds per world (`just test-slow`)
def test_picks_are_training_tasks_of_the_suite_and_repeat_for_the_same_rng() -> None:
    suite = SUITES["reference-lite"]
    cancel = ("orders", ("cancel_order",))
    frontier = FrontierTasks(suite, ["banking", "orders", "ticketing"], {cancel: Tally(groups=6, spread=6)})
    picks = [frontier.pick(random.Random(f"pick/{index}")) for index in range(5)]
    assert picks == [frontier.pick(random.Random(f"pick/{index}")) for index in range(5)]
    for world, seed in picks:
        assert seed < HELD_OUT_FIRST_SEED and suite.admits(world, seed)
    assert sum(family_of(world, seed) == cancel for world, seed in picks) >= 4
