"""`spadework train-compare` end to end on tiny sizes: the three arms train (the scripted mock model over HTTP,
the real sandbox, GRPO updates of a LoRA adapter), the fixed pool plays reference tasks in place of the
designs, the ablations share spade's before-measurement, and a second call on the same directory reads the
finished arms back instead of training them again."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from engine.local_models import default_gguf
from tests.engine.conftest import mock_model
from tests.servers import SPADEWORK
from tests.trainers.test_train_run import TINY
from toolworlds.examples import EXAMPLE_WORLD

ENV = {**os.environ, "COLUMNS": "400"}
pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


def test_the_arms_run_at_equal_agent_compute_and_a_second_call_only_reads_them(tmp_path: Path) -> None:
    designs = tmp_path / "library.py"
    designs.write_text(EXAMPLE_WORLD)
    out = tmp_path / "compare"
    settings = [f"policy.tokenizer={default_gguf()}", *TINY, "run.iterations=1", "agent.archive_tasks=0"]
    with mock_model("--tokenizer", str(default_gguf()), "--design", str(designs)) as url:
        command = [*SPADEWORK, "train-compare", "--out", str(out), "--seeds", "1", "--endpoint", url]
        command += [item for setting in settings for item in ("--set", setting)]
        first = subprocess.run(command, capture_output=True, text=True, timeout=800, env=ENV)
        assert first.returncode == 0, first.stderr[-3000:]
        written = {path: path.stat().st_mtime_ns for path in out.rglob("train.jsonl")}
        again = subprocess.run(command, capture_output=True, text=True, timeout=300, env=ENV)
    assert again.returncode == 0, again.stderr[-3000:]
    assert {path: path.stat().st_mtime_ns for path in out.rglob("train.jsonl")} == written and len(written) == 3

    result = json.loads((out / "compare.json").read_text())
    arms = {arm: result["arms"][f"seed-0/{arm}"] for arm in ("spade", "fixed-pool", "frozen-designer")}
    assert {arm["iterations"] for arm in arms.values()} == {1}
    spade, fixed, frozen = arms["spade"], arms["fixed-pool"], arms["frozen-designer"]
    assert spade["validity"] == [[2, 2]] and len(spade["regrets"][0]) == 2 and fixed["validity"] == []
    assert frozen["validity"] == [[2, 2]]  # the frozen designer still writes worlds
    # one reference task beside two worlds; three for the fixed pool; 2 plays x 2 ways each: 12 episodes
    assert len(list((out / "seed-0" / "spade" / "reference").iterdir())) == 1
    assert len(list((out / "seed-0" / "fixed-pool" / "reference").iterdir())) == 3
    assert spade["agent_episodes"] == fixed["agent_episodes"] == frozen["agent_episodes"] == 12
    assert not (out / "seed-0" / "fixed-pool" / "designs.jsonl").exists()
    befores = {arm: (out / "seed-0" / arm / "eval.jsonl").read_text().splitlines()[0] for arm in arms}
    assert len(set(befores.values())) == 1  # one measurement of the untrained policy, shared
    assert not (out / "seed-0" / "fixed-pool" / "eval" / "after--1-banking").exists()
    for arm in arms:
        state = json.loads((out / "seed-0" / arm / "checkpoints" / "state.json").read_text())
        assert state["trainer_checkpoint"] == "trainer/checkpoint-1"  # one update of the same size each
        assert arms[arm]["lift_ci95"] is not None
    assert result["spade_minus_ci95"]["fixed-pool"] is not None
    assert result["spade_minus_ci95"]["frozen-designer"] is not None
    assert "frozen-designer" in again.stdout and "no designer" in again.stdout
