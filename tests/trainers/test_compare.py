"""`spadework train-compare`: the arms it runs, the table it prints from their runs, and the report's list of
designed worlds. Two finished arms are recorded here through the run files' own models; the command must
read them back without training anything. (The recipe end to end, on tiny sizes with the scripted model:
`test_compare_run.py`, in `just test-slow`.)"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from tests.servers import SPADEWORK
from trainers import journal
from trainers.compare import arm_overrides
from trainers.config import load_config
from trainers.designer.generate import DesignSample
from trainers.designer.loop import DesignOutcome, IterationMetrics
from trainers.designer.memory import code_hash
from trainers.report import designed_worlds, read_run, summary, write_report
from trainers.selfplay import HeldOut, IterationReport, TaskResult

ENV = {**os.environ, "COLUMNS": "400"}


def test_the_fixed_pool_plays_as_many_tasks_as_spade_could_and_trains_as_much() -> None:
    base = load_config("cpu-tiny")
    arms = {arm: load_config("cpu-tiny", extra) for arm, extra in arm_overrides(base).items()}
    spade, fixed = arms["spade"], arms["fixed-pool"]
    assert spade == base and fixed.ablations.fixed_pool and not spade.ablations.fixed_pool
    # per iteration, the most tasks SPADE's agent can play: its reference tasks and one per designed world
    most = spade.agent.reference_tasks + spade.designer.documents * spade.designer.generations
    assert fixed.agent.reference_tasks == most == 5
    for knob in ("rows_per_update", "learning_rate", "steps_per_batch"):
        assert getattr(fixed.update, knob) == getattr(spade.update, knob)
    assert fixed.run == spade.run and fixed.agent.plays == spade.agent.plays
    # the caller's overrides reach both arms
    both = {arm: load_config("cpu-tiny", ["designer.generations=3", *extra])
            for arm, extra in arm_overrides(load_config("cpu-tiny", ["designer.generations=3"])).items()}  # fmt: skip
    assert both["fixed-pool"].agent.reference_tasks == 3 + 3


def held_out(after: int, rewards: list[float]) -> HeldOut:
    tasks = [TaskResult(world="banking", seed=10_000_000 + i, reward=reward) for i, reward in enumerate(rewards)]
    return HeldOut(after_iteration=after, suite="reference-lite/v1", tasks=tasks, success_plain={"banking": 0.0},
                   success_hinted={"banking": 0.0}, mean_plain=0.0, mean_hinted=0.0, seconds=1.0,
                   elapsed_s=60.0 * (after + 2))  # fmt: skip


SPEC = '{"name": "library"}'


def record_arm(run: Path, arm: str, before: list[float], after: list[float], regrets: list[float]) -> None:
    """A finished one-iteration run, written through the models its files are read back with."""
    overrides = ["run.iterations=1", *arm_overrides(load_config("cpu-tiny", ["run.iterations=1"]))[arm]]
    run.mkdir(parents=True)
    (run / "config.json").write_text(load_config("cpu-tiny", overrides).model_dump_json())
    journal.append(run / "eval.jsonl", [held_out(-1, before), held_out(0, after)])
    journal.append(run / "train.jsonl", [IterationReport(
        iteration=0, rows={"agent": 16, "designer": 2 if arm == "spade" else 0}, skipped={}, agent_return=0.1,
        designer_reward=None, valid_worlds=len(regrets), sampled_tokens=900, seconds={"design": 1.0})])  # fmt: skip
    if arm != "spade":
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


def test_finished_arms_are_read_back_into_one_table(tmp_path: Path) -> None:
    # held-out successes per task: spade 1 of 4 -> 3 of 4, the fixed pool 1 of 4 -> 2 of 4
    record_arm(tmp_path / "spade", "spade", [1, 0, 0, 0], [1, 1, 1, 0], regrets=[0.5])
    record_arm(tmp_path / "fixed-pool", "fixed-pool", [1, 0, 0, 0], [1, 1, 0, 0], regrets=[])
    completed = subprocess.run([*SPADEWORK, "train-compare", "--out", str(tmp_path), "--set", "run.iterations=1"],
                               capture_output=True, text=True, timeout=300, env=ENV)  # fmt: skip
    assert completed.returncode == 0, completed.stderr[-3000:]
    assert not (tmp_path / "spade" / "trainer").exists()  # finished arms are read, never trained again
    result = json.loads((tmp_path / "compare.json").read_text())
    spade, fixed = result["arms"]["spade"], result["arms"]["fixed-pool"]
    assert (spade["before"], spade["after"], fixed["after"]) == (0.25, 0.75, 0.5)
    assert spade["lift_ci95"][0] == 0.5 and fixed["lift_ci95"][0] == 0.25
    assert spade["validity"] == [[1, 2]] and spade["regrets"] == [[0.5]] and fixed["validity"] == []
    # after training, paired over the four tasks: differences 0, 0, +1, 0
    assert result["spade_minus_fixed_pool_after_ci95"] == [0.25, 0.0, 0.75]
    assert "+25.0% [+0.0%, +75.0%]" in completed.stdout and "no designer" in completed.stdout
    table = (tmp_path / "compare.md").read_text()
    assert (
        sum(line.startswith("| ") for line in table.splitlines()) == 3
        and "| spade | 25.0% -> 75.0% | +50.0%" in table
        and "+0.50" in table
    )


def test_an_arm_stopped_before_its_first_checkpoint_is_named(tmp_path: Path) -> None:
    (tmp_path / "spade").mkdir()
    (tmp_path / "spade" / "config.json").write_text("{}")
    completed = subprocess.run([*SPADEWORK, "train-compare", "--out", str(tmp_path)], capture_output=True,
                               text=True, timeout=300, env=ENV)  # fmt: skip
    assert completed.returncode == 2
    assert "spade holds an arm stopped before its first checkpoint" in " ".join(completed.stderr.split())


def test_the_report_lists_the_valid_worlds_with_their_format_and_file(tmp_path: Path) -> None:
    record_arm(tmp_path / "run", "spade", [0, 0], [0, 1], regrets=[0.5])
    record = read_run(tmp_path / "run")
    assert designed_worlds(record) == [
        ["0", "library", "spec", f"worlds/{code_hash(SPEC)[:16]}.json", "0.25", "0.75", "0.500", "0.500"]
    ]
    assert dict(summary(record))["valid worlds written"] == "1 spec"
    page = write_report(record).read_text()
    assert "Designed worlds" in page and f"worlds/{code_hash(SPEC)[:16]}.json" in page
