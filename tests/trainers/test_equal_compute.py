"""The rule an arm of a comparison follows to match the spade arm's agent compute (`agent.compute_from`),
on hand-computed cases, and a run it cannot follow refused with the reason. Through the loop itself, against
the scripted model: `test_train_loop.py`."""

from __future__ import annotations

from pathlib import Path

import pytest

from trainers import journal
from trainers.config import ConfigError, load_config
from trainers.equal_compute import Compute, ComputeTarget, ComputeTargetError
from trainers.selfplay import IterationReport, compute_target


def report(iteration: int, episodes: int | None, tokens: int | None) -> IterationReport:
    return IterationReport(iteration=iteration, rows={}, skipped={}, agent_return=None, designer_reward=None,
                           valid_worlds=0, agent_episodes=episodes, agent_tokens=tokens, seconds={})  # fmt: skip


def test_the_target_is_the_source_runs_compute_through_each_iteration() -> None:
    target = ComputeTarget.of_reports(Path("s"), [report(0, 40, 4000), report(1, 40, 5000)], iterations=2)
    assert target.after == [Compute(40, 4000), Compute(80, 9000)]


@pytest.mark.parametrize(
    ("done", "wanted", "why"),
    [
        # target through iteration 0: 40 episodes, 4000 tokens; a task is 4 episodes
        (Compute(32, 5000), True, "below 36 episodes (10% under 40): more, however many tokens"),
        (Compute(36, 3600), True, "100 tokens a play: one more task (4000) lands on the target"),
        (Compute(40, 3900), False, "one more (4290) is further from 4000 than 3900 is"),
        (Compute(40, 3700), True, "one more (4070) is closer to 4000 than 3700 is"),
        (Compute(36, 4500), False, "tokens past the target: no more, episodes are within bounds"),
        (Compute(41, 2000), False, "one more task would make 45 episodes, past 44 (10% over 40)"),
        (Compute(40, 2000), True, "44 episodes is the bound itself"),
    ],
)
def test_one_more_task_is_played_while_it_brings_the_tokens_closer_within_the_episode_bounds(
    done: Compute, wanted: bool, why: str
) -> None:
    target = ComputeTarget.of_reports(Path("s"), [report(0, 40, 4000)], iterations=1)
    assert target.wants_more(0, done, task_episodes=4) is wanted, why


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
