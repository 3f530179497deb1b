"""The rule an arm of a comparison follows to match the spade arm's agent compute (`agent.compute_from`),
on hand-computed cases, and a run it cannot follow refused with the reason. Through the loop itself, against
the scripted model: `test_train_loop.py`."""

from __future__ import annotations

from pathlib import Path

import pytest

from trainers import journal
from trainers.config import ConfigError, load_config
from trainers.equal_compute import Compute, ComputeTarget, ComputeTargetError, gap
from trainers.run_records import IterationReport
from trainers.selfplay import compute_target


def report(iteration: int, episodes: int | None, tokens: int | None) -> IterationReport:
    return IterationReport(iteration=iteration, rows={}, skipped={}, agent_return=None, designer_reward=None,
                           valid_worlds=0, agent_episodes=episodes, agent_tokens=tokens, seconds={})  # fmt: skip


def test_the_target_is_the_source_runs_compute_through_each_iteration() -> None:
    target = ComputeTarget.of_reports(Path("s"), [report(0, 40, 4000), report(1, 40, 5000)], iterations=2)
    assert target.after == [Compute(40, 4000), Compute(80, 9000)]


@pytest.mark.parametrize(
    ("done", "rate", "wanted", "why"),
    [
        # target through iteration 0: 40 episodes, 4000 tokens; a task is 4 episodes
        (Compute(36, 3600), 100, True, "one more task (40, 4000) lands on the target"),
        (Compute(40, 3900), 100, False, "one more (44, 4300): 0.10^2 + 0.075^2 is further than 0.025^2"),
        (Compute(40, 3700), 100, False, "one more (44, 4100): 0.10^2 + 0.025^2 = 0.0106 > 0.075^2 = 0.0056"),
        (Compute(36, 3000), 100, True, "one more (40, 3400): 0.15^2 = 0.0225 < 0.10^2 + 0.25^2"),
        (Compute(32, 4400), 150, False, "(36, 5000): 0.10^2 + 0.25^2 = 0.0725 > 0.20^2 + 0.10^2 = 0.05"),
        (Compute(32, 2800), 50, True, "episodes and tokens short: (36, 3000) is closer in both"),
        (Compute(0, 0), None, True, "nothing played yet, at the target's own rate: closer"),
    ],
)
def test_one_more_task_is_played_while_it_brings_episodes_and_tokens_closer_together(
    done: Compute, rate: float | None, wanted: bool, why: str
) -> None:
    target = ComputeTarget.of_reports(Path("s"), [report(0, 40, 4000)], iterations=1)
    assert target.wants_more(0, done, task_episodes=4, tokens_per_episode=rate) is wanted, why


def test_the_second_whole_comparisons_last_iteration_is_settled_between_episodes_and_tokens() -> None:
    """Seed 1 of the second whole comparison: spade's three iterations made 120 episodes and 14,730 tokens; the
    frozen designer's arm was level after two (88 episodes, 11,546 tokens), then sampled 149 tokens a play in
    the last: its designed worlds' 16 plays and three reference tasks played regardless, 128 episodes and 17,501
    tokens (+19%) in all. The rule plays one reference task (8 episodes) and stops: 112 and 15,122, each
    within 10%."""
    target = ComputeTarget.of_reports(Path("s"), [report(0, 40, 6207), report(1, 40, 5338), report(2, 40, 3185)],
                                      iterations=3)  # fmt: skip
    done = Compute(88 + 16, 11_546 + 16 * 149)
    assert target.wants_more(2, done, task_episodes=8, tokens_per_episode=149)
    done += Compute(8, 8 * 149)
    assert not target.wants_more(2, done, task_episodes=8, tokens_per_episode=149)
    assert abs(done.episodes / 120 - 1) < 0.1 and abs(done.tokens / 14_730 - 1) < 0.1


def test_the_gap_weighs_relative_differences_in_episodes_and_tokens_alike() -> None:
    assert gap(Compute(40, 4000), Compute(40, 4000)) == 0
    assert gap(Compute(44, 4000), Compute(40, 4000)) == pytest.approx(gap(Compute(40, 4400), Compute(40, 4000)))
    assert gap(Compute(42, 4200), Compute(40, 4000)) < gap(Compute(44, 4000), Compute(40, 4000))


def test_a_run_that_cannot_be_followed_is_refused_with_the_reason(tmp_path: Path) -> None:
    config = load_config("cpu-tiny", ["run.iterations=2", "agent.fill_reference=true",
                                      f"agent.compute_from={tmp_path}"])  # fmt: skip
    with pytest.raises(ComputeTargetError, match=r"no train\.jsonl there"):
        compute_target(config)
    journal.append(tmp_path / "train.jsonl", [report(0, 40, 4000)])
    with pytest.raises(ComputeTargetError, match="it recorded 1 iterations, this run needs 2"):
        compute_target(config)
    journal.append(tmp_path / "train.jsonl", [report(1, None, None)])  # written before the counts existed
    with pytest.raises(ComputeTargetError, match=r"iterations \[1\] do not record agent episodes and tokens"):
        compute_target(config)
    with pytest.raises(ConfigError, match=r"agent\.compute_from decides how many reference tasks fill"):
        load_config("cpu-tiny", [f"agent.compute_from={tmp_path}"])
