"""Training past one process's memory: two processes on CPU (gloo), each holding half of the policy (FSDP2),
make the same updates as one process holding all of it, and the weight sync gets the whole policy.

`tests/trainers/sharded_update.py` runs two GRPO updates of the embedded model on fixed rows of unequal lengths;
each arm pushes the weights before and after each update. Plain data parallelism runs beside it as a second
check of how rows and tokens are split."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

# Three runs of two updates of 135M parameters on 2 cores: about a minute.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

ROOT = Path(__file__).resolve().parents[2]


def run_updates(out: Path, sharding: str, processes: int) -> dict[str, Any]:
    out.mkdir(parents=True)
    launcher = [sys.executable]
    if processes > 1:
        launcher += ["-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(processes)]
    command = [*launcher, "-m", "tests.trainers.sharded_update", str(out), sharding]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    completed = subprocess.run(command, capture_output=True, text=True, timeout=500, cwd=ROOT, env=env)
    assert completed.returncode == 0, completed.stderr[-4000:]
    result: dict[str, Any] = json.loads((out / "log.json").read_text())
    return result


@pytest.fixture(scope="module")
def one_process(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("updates") / "one"
    run_updates(out, "none", 1)
    return out


def relative_gap(out: Path, reference: Path, version: int) -> float:
    """The largest, over the policy's tensors, of |arm - reference| / |reference's update| (L2 norms)."""
    import torch

    before = torch.load(reference / "pushed-1.pt")
    ours, theirs = torch.load(out / f"pushed-{version}.pt"), torch.load(reference / f"pushed-{version}.pt")
    assert set(ours) == set(theirs)
    gaps = []
    for name, expected in theirs.items():
        moved = (expected - before[name]).norm()
        assert moved > 0, f"{name} did not move in the reference's update"
        gaps.append(float((ours[name] - expected).norm() / moved))
    return max(gaps)


@pytest.mark.parametrize("sharding", ["fsdp2", "none"])
def test_two_processes_make_the_one_process_update(tmp_path: Path, one_process: Path, sharding: str) -> None:
    two = run_updates(tmp_path / sharding, sharding, 2)
    one = json.loads((one_process / "log.json").read_text())

    assert one["held"] == 1.0
    if sharding == "fsdp2":
        assert two["held"] == pytest.approx(0.5, abs=0.01), "each process holds half of the weights"
    else:
        assert two["held"] == 1.0
    for mine, reference in zip(two["steps"], one["steps"], strict=True):
        # gradients summed over the processes instead of averaged, or rows counted twice, would fail here
        assert mine["grad_norm"] == pytest.approx(reference["grad_norm"], rel=1e-4)
        assert mine["loss"] == pytest.approx(reference["loss"], rel=1e-4, abs=1e-6)
    for version in (2, 3):  # after the first update and after the second (gathered when training ends)
        assert relative_gap(tmp_path / sharding, one_process, version) < 0.01
