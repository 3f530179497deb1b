"""`spadework train-compare`: the arms it runs, the table it prints from their runs, the equal-compute check,
the shared before-measurement, and the report's list of designed worlds. Finished arms are recorded here
through the run files' own models; the command must read them back without training anything. (The recipe
end to end, on tiny sizes with the scripted model: `test_compare_run.py`, in `just test-slow`; equal agent
episodes through the loop itself: `test_train_loop.py`.)"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.servers import SPADEWORK
from trainers import journal
from trainers.compare import ARM_OVERRIDES, ArmResult, compute_gaps
from trainers.config import load_config
from trainers.designer.generate import DesignSample
from trainers.designer.loop import DesignOutcome, IterationMetrics
from trainers.designer.memory import code_hash
from trainers.report import designed_worlds, read_run, summary, write_report
from trainers.run_records import HeldOut, IterationReport, TaskResult
from trainers.selfplay import BeforeUnavailable, shared_before

ENV = {**os.environ, "COLUMNS": "400"}


def test_the_arms_differ_only_in_their_ablation_and_all_fill_to_the_same_tasks() -> None:
    base = load_config("cpu-tiny")
    arms = {arm: load_config("cpu-tiny", extra) for arm, extra in ARM_OVERRIDES.items()}
    assert set(arms) == {"spade", "fixed-pool", "frozen-designer"}
    spade = arms["spade"]
    assert arms["fixed-pool"].ablations.fixed_pool and arms["frozen-designer"].ablations.frozen_designer
    assert spade.ablations == base.ablations and spade.designer == base.designer and spade.update == base.update
    for config in arms.values():
        assert config.agent.fill_reference  # a reference task in place of each design not played
        assert config.update == spade.update and config.run == spade.run and config.agent == spade.agent
        assert config.designer == spade.designer
    # the caller's overrides reach every arm
    both = {arm: load_config("cpu-tiny", ["designer.generations=3", *extra])
            for arm, extra in ARM_OVERRIDES.items()}  # fmt: skip
    assert {config.designer.generations for config in both.values()} == {3}


def held_out(after: int, rewards: list[float]) -> HeldOut:
    tasks = [TaskResult(world="banking", seed=10_000_000 + i, reward=reward) for i, reward in enumerate(rewards)]
    return HeldOut(after_iteration=after, suite="reference-lite/v1", tasks=tasks, success_plain={"banking": 0.0},
                   success_hinted={"banking": 0.0}, mean_plain=0.0, mean_hinted=0.0, seconds=1.0,
                   elapsed_s=60.0 * (after + 2))  # fmt: skip


SPEC = '{"name": "library"}'


def record_arm(run: Path, arm: str, before: list[float], after: list[float], regrets: list[float],
               seed: int = 0, agent_tokens: int = 900) -> None:  # fmt: skip
    """A finished one-iteration run, written through the models its files are read back with."""
    overrides = ["run.iterations=1", f"run.seed={seed}",
                 *ARM_OVERRIDES[arm]]  # fmt: skip
    run.mkdir(parents=True)
    (run / "config.json").write_text(load_config("cpu-tiny", overrides).model_dump_json())
    journal.append(run / "eval.jsonl", [held_out(-1, before), held_out(0, after)])
    journal.append(run / "train.jsonl", [IterationReport(
        iteration=0, rows={"agent": 16, "designer": 2 if arm == "spade" else 0}, skipped={}, agent_return=0.1,
        designer_reward=None, valid_worlds=len(regrets), sampled_tokens=900, agent_episodes=40,
        agent_tokens=agent_tokens, seconds={"design": 1.0})])  # fmt: skip
    if arm == "fixed-pool":
        return
    journal.append(run / "metrics.jsonl", [IterationMetrics(
        iteration=0, finished_at=0.0, requested=2, replies=2, valid_before_repair=len(regrets),
        valid_after_repair=len(regrets), validity_before_repair=len(regrets) / 2,
        validity_after_repair=len(regrets) / 2, rejections={}, regrets=regrets, regret_mean=sum(regrets) / 2,
        negative_regrets=0, rewards=[], statuses={}, vendi=1.0, answer_leak_rate=None, seconds={},
        worlds_per_minute=1.0, memory={})])  # fmt: skip
    digest = code_hash(SPEC)
    (run / "worlds").mkdir()
    (run / "worlds" / f"{digest[:16]}.json").write_text(SPEC)
    sample = DesignSample(key="designer/0", document="builtin/0", prompt_version="designer-spec-v5", messages=[])
    journal.append(run / "designs.jsonl", [
        DesignOutcome(iteration=0, sample=sample, verdict={"valid": True, "world": "library"}, world_hash=digest,
                      mean_plain=0.25, mean_hinted=0.75, regret=0.5, reward=0.5),
        DesignOutcome(iteration=0, sample=sample, verdict={"valid": False, "world": None}, reward=-1.0),
    ])  # fmt: skip


def test_finished_arms_are_read_back_into_one_table_pooled_over_seeds(tmp_path: Path) -> None:
    # held-out successes per task, the same before-measurement for the arms of a seed:
    #   seed 0: spade 1 of 4 -> 3 of 4, fixed pool -> 2 of 4, frozen designer -> 1 of 4
    #   seed 1: spade 0 of 4 -> 2 of 4, fixed pool -> 2 of 4, frozen designer -> 1 of 4
    afters = {0: {"spade": [1, 1, 1, 0], "fixed-pool": [1, 1, 0, 0], "frozen-designer": [1, 0, 0, 0]},
              1: {"spade": [1, 1, 0, 0], "fixed-pool": [0, 0, 1, 1], "frozen-designer": [0, 1, 0, 0]}}  # fmt: skip
    befores = {0: [1, 0, 0, 0], 1: [0, 0, 0, 0]}
    for seed, arms in afters.items():
        for arm, after in arms.items():
            regrets = [] if arm == "fixed-pool" else [0.5]
            record_arm(tmp_path / f"seed-{seed}" / arm, arm, befores[seed], after, regrets, seed=seed)
    completed = subprocess.run([*SPADEWORK, "train-compare", "--out", str(tmp_path), "--seeds", "2", "--set",
                                "run.iterations=1"], capture_output=True, text=True, timeout=300, env=ENV)  # fmt: skip
    assert completed.returncode == 0, completed.stderr[-3000:]
    assert not (tmp_path / "seed-0" / "spade" / "trainer").exists()  # finished arms are read, never trained again
    result = json.loads((tmp_path / "compare.json").read_text())
    spade, fixed = result["arms"]["seed-0/spade"], result["arms"]["seed-0/fixed-pool"]
    assert (spade["before"], spade["after"], fixed["after"]) == (0.25, 0.75, 0.5)
    assert spade["validity"] == [[1, 2]] and spade["regrets"] == [[0.5]] and fixed["validity"] == []
    # pooled over seeds, after - before per (seed, task): spade 0,1,1,0 and 1,1,0,0 -> mean 0.5
    assert result["pooled_lift_ci95"]["spade"][0] == 0.5
    assert result["pooled_lift_ci95"]["fixed-pool"][0] == round(3 / 8, 4)  # 0,1,0,0 and 0,0,1,1
    # after training, spade minus each baseline per (seed, task): fixed pool 0,0,1,0 and 1,1,-1,-1 -> 1/8
    assert result["spade_minus_ci95"]["fixed-pool"][0] == 0.125
    assert result["spade_minus_ci95"]["frozen-designer"][0] == 0.375  # 0,1,1,0 and 1,0,0,0 -> 3/8
    assert result["compute_gaps"] == []
    assert "spade - frozen-designer" in completed.stdout and "no designer" in completed.stdout
    table = (tmp_path / "compare.md").read_text()
    assert sum(line.startswith("| ") for line in table.splitlines()) == 1 + 6 + 3  # header, seed rows, pooled
    assert "| spade | 0 | 25.0% -> 75.0% | +50.0%" in table and "| spade | all | - | +50.0%" in table


def test_an_arm_that_plays_more_than_spade_is_named() -> None:
    """Equal agent compute, checked: within 10% of the spade arm of the same seed, or a line naming the gap."""

    def result(arm: str, seed: int, episodes: int, tokens: int) -> ArmResult:
        return ArmResult(arm=arm, seed=seed, iterations=1, suite=None, before=None, after=None, lift=None,
                         credit_lift=None, validity=[], regret=[], agent_rows=0, agent_episodes=episodes,
                         agent_tokens=tokens, minutes=None)  # fmt: skip

    equal = [result("spade", 0, 120, 10_000), result("fixed-pool", 0, 120, 10_900),
             result("frozen-designer", 0, 114, 9_100)]  # fmt: skip
    assert compute_gaps(equal) == []
    more = [*equal, result("spade", 1, 120, 10_000), result("fixed-pool", 1, 120, 11_200)]
    assert compute_gaps(more) == [
        "seed 1: fixed-pool has 11200 sampled agent tokens, spade 10000 (+12%, more than 10% apart)"
    ]
    fewer = [result("spade", 0, 120, 10_000), result("frozen-designer", 0, 100, 10_000)]
    assert compute_gaps(fewer) == [
        "seed 0: frozen-designer has 100 agent episodes, spade 120 (-17%, more than 10% apart)"
    ]


def test_an_arm_stopped_before_its_first_checkpoint_is_named(tmp_path: Path) -> None:
    (tmp_path / "seed-0" / "spade").mkdir(parents=True)
    (tmp_path / "seed-0" / "spade" / "config.json").write_text("{}")
    completed = subprocess.run([*SPADEWORK, "train-compare", "--out", str(tmp_path)], capture_output=True,
                               text=True, timeout=300, env=ENV)  # fmt: skip
    assert completed.returncode == 2
    assert "spade holds an arm stopped before its first checkpoint" in " ".join(completed.stderr.split())


def test_an_arm_shares_the_before_measurement_only_of_a_run_that_measured_the_same_tasks(tmp_path: Path) -> None:
    record_arm(tmp_path / "spade", "spade", [1, 0], [1, 1], regrets=[0.5])
    config = load_config("cpu-tiny", ["run.iterations=1", f"run.before_from={tmp_path / 'spade'}"])
    shared = shared_before(tmp_path / "spade", config)
    assert shared.after_iteration == -1 and shared.successes() == {"banking/10000000": 1.0, "banking/10000001": 0.0}
    other = load_config("cpu-tiny", ["run.eval_tasks=5"])
    with pytest.raises(BeforeUnavailable, match=r"its run\.eval_tasks is 30, this run's 5"):
        shared_before(tmp_path / "spade", other)
    with pytest.raises(BeforeUnavailable, match="not a run with a held-out measurement"):
        shared_before(tmp_path / "nowhere", config)
    completed = subprocess.run([*SPADEWORK, "train", "--out", str(tmp_path / "arm"), "--set", "run.eval_tasks=5",
                                "--set", f"run.before_from={tmp_path / 'spade'}"], capture_output=True, text=True,
                               timeout=300, env=ENV)  # fmt: skip
    assert completed.returncode == 2 and "its run.eval_tasks is 30, this run's 5" in " ".join(completed.stderr.split())
    assert not (tmp_path / "arm").exists()


def test_the_report_lists_the_valid_worlds_with_their_format_and_file(tmp_path: Path) -> None:
    record_arm(tmp_path / "run", "spade", [0, 0], [0, 1], regrets=[0.5])
    record = read_run(tmp_path / "run")
    assert designed_worlds(record) == [
        ["0", "library", "spec", f"worlds/{code_hash(SPEC)[:16]}.json", "0.25", "0.75", "0.500", "0.500"]
    ]
    assert dict(summary(record))["valid worlds written"] == "1 spec"
    page = write_report(record).read_text()
    assert "Designed worlds" in page and f"worlds/{code_hash(SPEC)[:16]}.json" in page
