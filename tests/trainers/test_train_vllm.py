"""`spadework train --preset cpu-vllm` end to end: the run starts vLLM's CPU build on the embedded model's float
checkpoint, plays and designs through it (tokens mode: every grammar the designer's stages and the agent's calls
are sampled under goes through vLLM's structured outputs), trains both roles and reloads the full weights into
the server after each update. Slow (`just test-vllm`)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.servers import SPADEWORK

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]

SMALL = ["run.iterations=2", "run.eval_tasks=2", "designer.generations=2", "agent.plays=2", "agent.reference_tasks=1",
         "update.rows_per_update=4"]  # fmt: skip


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_two_iterations_through_vllm_train_both_roles_and_sync_the_weights(tmp_path: Path) -> None:
    out = tmp_path / "run"
    command = [*SPADEWORK, "train", "--preset", "cpu-vllm", "--out", str(out)]
    command += [item for setting in SMALL for item in ("--set", setting)]
    completed = subprocess.run(command, capture_output=True, text=True, timeout=1700,
                               env={**os.environ, "COLUMNS": "200"})  # fmt: skip
    assert completed.returncode == 0, completed.stderr[-4000:]
    assert json.loads((out / "config.json").read_text())["policy"]["server"] == "vllm"
    reports = lines(out / "train.jsonl")
    assert [report["iteration"] for report in reports] == [0, 1]
    for report in reports:
        assert report["rows"]["agent"] > 0 and report["rows"]["designer"] == 2, report["rows"]
        assert report["seconds"]["update"] > 0 and report["sampled_tokens"] > 0
    # pushed before anything was sampled, then after each update; only the served version is kept
    state = json.loads((out / "checkpoints" / "state.json").read_text())
    assert state["weights_version"] == 3
    assert sorted(path.name for path in (out / "weights").iterdir()) == ["policy-v00003"]
    assert completed.stderr.count("weights reloaded") == 3
    assert [held["after_iteration"] for held in lines(out / "eval.jsonl")] == [-1, 1]
    assert "before training" in completed.stdout and "after iteration 1" in completed.stdout
