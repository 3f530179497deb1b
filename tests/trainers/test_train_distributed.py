"""`spadework train` under `torchrun` with two processes: the first plays, both learn one policy (data
parallel, gloo on CPU), against the scripted mock model with vLLM's LoRA routes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from engine.local_models import default_gguf
from tests.engine.conftest import mock_model
from tests.trainers.test_train_run import TINY
from toolworlds.examples import EXAMPLE_WORLD

# Two trainer processes on 2 cores plus the plays: about a minute.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


def test_two_processes_train_one_policy(tmp_path: Path) -> None:
    designs = tmp_path / "library.py"
    designs.write_text(EXAMPLE_WORLD)
    out = tmp_path / "run"
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2"]
    with mock_model("--tokenizer", str(default_gguf()), "--design", str(designs)) as url:
        settings = [f"policy.tokenizer={default_gguf()}", *TINY, "run.iterations=1"]
        command = [*torchrun, "-m", "spadework", "train", "--out", str(out), "--endpoint", url]
        command += [item for setting in settings for item in ("--set", setting)]
        completed = subprocess.run(command, capture_output=True, text=True, timeout=800,
                                   env={**os.environ, "COLUMNS": "200", "OMP_NUM_THREADS": "1"})  # fmt: skip
        stats = httpx.get(url.removesuffix("/v1") + "/stats", timeout=10).json()
    assert completed.returncode == 0, completed.stderr[-4000:]
    assert "following the first process" in completed.stderr and "rank=1" in completed.stderr

    checkpoint = out / "trainer" / "checkpoint-1"
    trainer_state = json.loads((checkpoint / "trainer_state.json").read_text())
    assert trainer_state["global_step"] == 1
    assert (checkpoint / "rng_state_0.pth").exists() and (checkpoint / "rng_state_1.pth").exists()  # both learned
    assert [r["iteration"] for r in map(json.loads, (out / "train.jsonl").read_text().splitlines())] == [0]
    assert stats["adapters"]["spadework-policy"]["loads"] == 2  # only the first process pushes: start, update
