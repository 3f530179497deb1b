"""`spadework train-compare` end to end on tiny sizes: both arms train (the scripted mock model over HTTP, the
real sandbox, GRPO updates of a LoRA adapter), the fixed pool plays the extra reference tasks, and a second
call on the same directory reads the finished arms back instead of training them again."""

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


def test_both_arms_run_at_equal_compute_and_a_second_call_only_reads_them(tmp_path: Path) -> None:
    designs = tmp_path / "library.py"
    designs.write_text(EXAMPLE_WORLD)
    out = tmp_path / "compare"
    settings = [f"policy.tokenizer={default_gguf()}", *TINY, "run.iterations=1"]
    with mock_model("--tokenizer", str(default_gguf()), "--design", str(designs)) as url:
        command = [*SPADEWORK, "train-compare", "--out", str(out), "--endpoint", url]
        command += [item for setting in settings for item in ("--set", setting)]
        first = subprocess.run(command, capture_output=True, text=True, timeout=800, env=ENV)
        assert first.returncode == 0, first.stderr[-3000:]
        written = {path: path.stat().st_mtime_ns for path in out.rglob("train.jsonl")}
        again = subprocess.run(command, capture_output=True, text=True, timeout=300, env=ENV)
    assert again.returncode == 0, again.stderr[-3000:]
    assert {path: path.stat().st_mtime_ns for path in out.rglob("train.jsonl")} == written and len(written) == 2

    result = json.loads((out / "compare.json").read_text())
    spade, fixed = result["arms"]["spade"], result["arms"]["fixed-pool"]
    assert spade["iterations"] == fixed["iterations"] == 1
    assert spade["validity"] == [[2, 2]] and len(spade["regrets"][0]) == 2 and fixed["validity"] == []
    # one reference task for SPADE beside its two worlds; three for the fixed pool, 2 plays x 2 ways each
    assert len(list((out / "spade" / "reference").iterdir())) == 1
    assert len(list((out / "fixed-pool" / "reference").iterdir())) == 3
    assert spade["agent_rows"] == fixed["agent_rows"] == 12
    assert not (out / "fixed-pool" / "designs.jsonl").exists()
    for arm in ("spade", "fixed-pool"):
        state = json.loads((out / arm / "checkpoints" / "state.json").read_text())
        assert state["trainer_checkpoint"] == "trainer/checkpoint-1"  # one update of the same size each
        assert result["arms"][arm]["lift_ci95"] is not None
    assert result["spade_minus_fixed_pool_after_ci95"] is not None
    assert "spade" in again.stdout and "fixed-pool" in again.stdout and "no designer" in again.stdout
