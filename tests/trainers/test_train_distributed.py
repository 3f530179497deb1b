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
import torch
from safetensors.torch import load_file

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


def test_a_sharded_policy_trains_pushes_whole_weights_and_resumes(tmp_path: Path) -> None:
    """FSDP2 over two processes, all weights trained, pushed as whole safetensors to vLLM's reload route; then
    resumed for a second iteration from the sharded run's checkpoint."""
    designs = tmp_path / "library.py"
    designs.write_text(EXAMPLE_WORLD)
    out = tmp_path / "run"
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2"]
    env = {**os.environ, "COLUMNS": "200", "OMP_NUM_THREADS": "1"}
    # an oracle whose calls are sometimes malformed: plays of a task score differently, so updates move the weights
    flags = ["--tokenizer", str(default_gguf()), "--design", str(designs)]
    flags += ["--fault-rate", "0.3", "--faults", "malformed"]
    with mock_model(*flags) as url:
        sharded = [f"policy.tokenizer={default_gguf()}", *TINY, "run.iterations=1", "policy.lora_rank=0",
                   "policy.weight_sync=vllm-reload", "update.sharding=fsdp2",
                   "update.rows_per_update=4"]  # a group of plain and hinted plays fits  # fmt: skip
        first = [*torchrun, "-m", "spadework", "train", "--out", str(out), "--endpoint", url]
        first += [item for setting in sharded for item in ("--set", setting)]
        completed = subprocess.run(first, capture_output=True, text=True, timeout=800, env=env)
        assert completed.returncode == 0, completed.stderr[-4000:]
        after_first = httpx.get(url.removesuffix("/v1") + "/stats", timeout=10).json()["reloads"]
        resume = [*torchrun, "-m", "spadework", "train", "--resume", str(out), "--set", "run.iterations=2"]
        resumed = subprocess.run(resume, capture_output=True, text=True, timeout=800, env=env)
        assert resumed.returncode == 0, resumed.stderr[-4000:]
        reloads = httpx.get(url.removesuffix("/v1") + "/stats", timeout=10).json()["reloads"]

    iterations = [json.loads(line) for line in (out / "train.jsonl").read_text().splitlines()]
    assert [r["iteration"] for r in iterations] == [0, 1]
    trained = [r["trained_tokens"] > 0 for r in iterations]
    assert any(trained), "the faults gave no play a different score: nothing was tested"
    assert len(after_first) == 2, "the whole policy is pushed at start and after the update"
    assert (after_first[0]["sha256"] != after_first[1]["sha256"]) == trained[0], "an update moves the pushed weights"
    assert len(reloads) == 4
    assert reloads[2]["sha256"] == after_first[1]["sha256"], "the resumed run serves the checkpoint's weights"
    assert (reloads[3]["sha256"] != reloads[2]["sha256"]) == trained[1], "so does the first update after resuming"
    checkpoint = out / "trainer" / "checkpoint-2"
    assert json.loads((checkpoint / "trainer_state.json").read_text())["global_step"] == 2
    # what the server last loaded is what the last update produced, gathered from the shards, tensor for tensor
    served = load_file(Path(reloads[3]["path"]) / "model.safetensors")
    saved = load_file(checkpoint / "model.safetensors")
    assert set(saved) <= set(served)
    for name, tensor in saved.items():
        assert torch.equal(tensor, served[name]), name
