"""`run.report_to`: each tracker receives a run's numbers at their steps, read back through the tracker's
own files; the names are SPADE's where SPADE logs the same measure, with the values the run measured."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.trackers import tensorboard_points, trackio_points, wandb_points
from trainers.designer.loop import DesignOutcome, IterationMetrics, IterationResult
from trainers.run_records import HeldOut, IterationReport, TaskResult
from trainers.tracking import METRICS, PROJECT, TENSORBOARD_DIR, held_out_metrics, iteration_metrics, open_tracker

STEPS = {1: {"env/avg_regret": 0.25, "eval/success": 0.5}, 2: {"env/avg_regret": 0.5, "train/loss": -0.125}}


@pytest.mark.parametrize("kind", ["trackio", "tensorboard", "wandb"])
def test_each_tracker_holds_what_was_logged_at_its_steps(tmp_path: Path, kind: str) -> None:
    out = tmp_path / f"run-{kind}"
    out.mkdir()
    tracker = open_tracker(kind, out, run_id=f"id{kind}", config={"run": {"iterations": 2}})  # type: ignore[arg-type]
    for step, metrics in STEPS.items():
        tracker.log(metrics, step)
    tracker.close()
    if kind == "trackio":
        points = trackio_points(PROJECT, out.name)
    elif kind == "tensorboard":
        points = tensorboard_points(out / TENSORBOARD_DIR)
    else:
        points = wandb_points(out)
    assert points == {"env/avg_regret": {1: 0.25, 2: 0.5}, "eval/success": {1: 0.5}, "train/loss": {2: -0.125}}


def test_a_resumed_run_adds_to_the_same_trackio_run(tmp_path: Path) -> None:
    out = tmp_path / "resumed-run"
    out.mkdir()
    first = open_tracker("trackio", out, run_id="r", config={})
    first.log({"env/avg_regret": 0.1}, 1)
    first.close()
    again = open_tracker("trackio", out, run_id="r", config={}, resume=True)
    again.log({"env/avg_regret": 0.2}, 2)
    again.close()
    assert trackio_points(PROJECT, out.name) == {"env/avg_regret": {1: 0.1, 2: 0.2}}


def _outcome(plain: float, hinted: float, solved: float) -> DesignOutcome:
    return DesignOutcome.model_construct(iteration=0, mean_plain=plain, mean_hinted=hinted, solved_plain=solved)


def test_an_iterations_numbers_carry_spades_names_and_the_measured_values() -> None:
    seconds = {"design": 10.0, "reference": 20.0, "update": 30.0}
    report = IterationReport(iteration=3, rows={"agent": 12, "designer": 2}, skipped={"no_spread": 4},
                             agent_return=0.375, designer_reward=0.5, valid_worlds=2, sampled_tokens=600, groups=8,
                             zero_spread_groups=2, seconds=seconds)  # fmt: skip
    measured = IterationMetrics(
        iteration=3, finished_at=time.time(), requested=4, replies=4, valid_before_repair=1, valid_after_repair=3,
        validity_before_repair=0.25, validity_after_repair=0.75, rejections={"smoke: reset": 1},
        regrets=[0.5, -0.25], regret_mean=0.125, negative_regrets=1, rewards=[0.4, None],
        statuses={"frontier": 1, "too_hard": 1}, vendi=1.5, answer_leak_rate=0.1, seconds={}, worlds_per_minute=2.0,
        memory={},
    )  # fmt: skip
    designed = IterationResult(measured, [_outcome(0.25, 0.75, 0.0), _outcome(0.5, 0.25, 0.5)])
    trainer_log = [{"loss": 0.5, "kl": 0.0, "step": 7, "epoch": 1.0}, {"loss": 1.5, "kl": 0.5, "step": 8}]
    metrics = iteration_metrics(report, designed, trainer_log)
    assert metrics["env/avg_regret"] == 0.125
    assert metrics["env/avg_r_hint"] == 0.5 and metrics["env/avg_r_no_hint"] == 0.375
    assert metrics["env/avg_actor_win_rate"] == 0.25
    assert metrics["env_validator/rejection_rate"] == 0.25 and metrics["env_validator/rejected/smoke: reset"] == 1
    assert metrics["actor/all_zero_std"] == 0.25 and metrics["actor/return"] == 0.375
    assert metrics["designer/reward"] == 0.5 and metrics["env/frontier_worlds"] == 1 and metrics["env/vendi"] == 1.5
    assert metrics["perf/sampled_tokens_per_s"] == 20.0, "600 tokens over the 30 s of play, the update left out"
    assert metrics["train/loss"] == 1.0 and metrics["train/kl"] == 0.25 and "train/step" not in metrics
    assert metrics["rows/agent"] == 12 and metrics["rows/skipped/no_spread"] == 4 and metrics["time/update_s"] == 30.0
    documented = {name.split("/<")[0] for line in METRICS for name in line.split(", ")}
    for name in metrics:
        assert name in documented or any(name.startswith(prefix + "/") for prefix in documented), name

    without_designer = iteration_metrics(report, None)
    assert not any(name.startswith("env") for name in without_designer)


def test_a_held_out_evaluation_logs_success_and_credit_with_their_intervals() -> None:
    tasks = [TaskResult(world="banking", seed=seed, reward=reward) for seed, reward in enumerate([1.0, 0.5, 0.0, 1.0])]
    held = HeldOut(after_iteration=1, tasks=[*tasks, TaskResult(world="orders", seed=0, reward=None)],
                   success_plain={}, success_hinted={}, mean_plain=None, mean_hinted=None, peak_rss_gb=3.5)  # fmt: skip
    metrics = held_out_metrics(held)
    assert metrics["eval/success"] == 0.5 and metrics["eval/partial_credit"] == 0.625
    assert 0.0 <= metrics["eval/success_low"] < 0.5 < metrics["eval/success_high"] <= 1.0
    assert metrics["eval/partial_credit_low"] < 0.625 < metrics["eval/partial_credit_high"]
    assert metrics["eval/peak_rss_gb"] == 3.5 and "eval/reference_plain" not in metrics


def test_the_guide_lists_every_name_a_run_logs() -> None:
    guide = (Path(__file__).parents[2] / "docs" / "guide.md").read_text()
    table = guide.split("### Watching a run", 1)[1].split("\n###", 1)[0]
    for name, what in METRICS.items():
        cells = " | ".join(f"`{part}`" for part in name.split(", ")).replace("` | `", "`, `")
        assert f"| {cells} | {what} |" in table, name
