"""`spadework train` end to end, killed and resumed: the scripted mock model over HTTP (token ids from
SmolLM2's own tokenizer) with the real sandbox, engine, GRPO updates of a LoRA adapter, checkpoints,
held-out evaluation, and the adapter hot-loaded into the server as into vLLM (`/v1/load_lora_adapter`).

The run is SIGKILLed (with its whole process group) after iteration 1 has written its designs but before
its checkpoint, then continued with `--resume`: the finished run must read as if it had never stopped.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import torch
from safetensors.torch import load_file

from engine.local_models import default_gguf
from engine.store import read_records
from tests.engine.conftest import mock_model
from tests.servers import SPADEWORK
from tests.trackers import tensorboard_points
from toolworlds.examples import EXAMPLE_WORLD
from toolworlds.registry import builtin_worlds
from trainers.frontier import FrontierTasks, tally_groups
from trainers.suite import SUITES
from trainers.tracking import TENSORBOARD_DIR

TINY = ["run.iterations=2", "run.eval_seeds=1", "designer.documents=1", "designer.generations=2", "agent.plays=2",
        "agent.reference_tasks=1", "update.rows_per_update=2", "designer.smoke_seeds=2", "agent.archive_tasks=1",
        "run.eval_tasks=2", "agent.task_choice=frontier", "policy.lora_rank=4",
        "designer.format=python", "designer.vocabulary=free", "designer.task_text=written",
        "designer.plan_calls=3", "run.report_to=tensorboard"]  # the scripted designer writes Python worlds  # fmt: skip
ADAPTER = "spadework-policy"
ENV = {**os.environ, "COLUMNS": "200"}
# Two whole runs with two TRL updates between them: 75 s of the default suite's 13.7 minutes on 2 cores, so
# it runs with `just test-slow` (the loop itself is tested in process in test_train_loop.py).
pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def kill_when(process: subprocess.Popen[str], ready: Callable[[], bool], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not ready():
        assert process.poll() is None, f"the run ended before the kill point: {process.communicate()[1][-3000:]}"
        assert time.monotonic() < deadline, "the run never reached the kill point"
        time.sleep(0.1)
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()


@pytest.fixture(scope="module")
def resumed_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, subprocess.CompletedProcess[str]]]:
    designs = tmp_path_factory.mktemp("designs") / "library.py"
    designs.write_text(EXAMPLE_WORLD)
    out = tmp_path_factory.mktemp("run")
    with mock_model("--tokenizer", str(default_gguf()), "--design", str(designs)) as url:
        settings = [f"policy.tokenizer={default_gguf()}", *TINY]
        command = [*SPADEWORK, "train", "--out", str(out), "--endpoint", url]
        command += [item for setting in settings for item in ("--set", setting)]
        first = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV,
                                 start_new_session=True)  # fmt: skip

        def mid_iteration_1() -> bool:
            state = out / "checkpoints" / "state.json"
            saved = json.loads(state.read_text())["iteration"] if state.exists() else None
            return saved == 0 and len(lines(out / "metrics.jsonl")) == 2

        kill_when(first, mid_iteration_1, timeout=480)
        assert len(lines(out / "designs.jsonl")) == 4 and len(lines(out / "train.jsonl")) == 1
        resumed = subprocess.run([*SPADEWORK, "train", "--resume", str(out)], capture_output=True, text=True,
                                 timeout=600, env=ENV)  # fmt: skip
        (out / "server-stats.json").write_text(httpx.get(url.removesuffix("/v1") + "/stats", timeout=10).text)
    yield out, resumed


def test_a_killed_run_resumes_from_its_checkpoint(resumed_run: tuple[Path, subprocess.CompletedProcess[str]]) -> None:
    out, resumed = resumed_run
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "resuming" in resumed.stderr and "after_iteration=0" in resumed.stderr
    assert "before training" in resumed.stdout and "after iteration 1" in resumed.stdout

    # every journal holds each iteration once: what the killed iteration wrote was cut, then redone
    assert [r["iteration"] for r in lines(out / "train.jsonl")] == [0, 1]
    assert [m["iteration"] for m in lines(out / "metrics.jsonl")] == [0, 1]
    assert [d["iteration"] for d in lines(out / "designs.jsonl")] == [0, 0, 1, 1]
    assert [h["after_iteration"] for h in lines(out / "eval.jsonl")] == [-1, 1]
    for report in lines(out / "train.jsonl"):
        assert report["rows"] == {"agent": 12, "designer": 2}  # 2 worlds x 2 tasks x 2 ways + 1 reference x 2 x 2
        assert report["valid_worlds"] == 2 and report["seconds"]["update"] > 0 and report["sampled_tokens"] > 0
    held = lines(out / "eval.jsonl")[0]
    assert set(held["success_plain"]) == {"banking", "orders", "ticketing"}
    # the resumed iteration picked the task the unbroken run would have: the frontier's choice from the plays
    # of iteration 0, which the kill left in place
    played = sorted(p.name for p in (out / "reference").iterdir())
    assert [name.split("-")[0] for name in played] == ["0", "1"]
    frontier = FrontierTasks(SUITES["reference-lite"], sorted(builtin_worlds()),
                             tally_groups(read_records(out / "reference" / played[0])))  # fmt: skip
    world, seed = frontier.pick(random.Random("0/reference/1"))
    assert played[1] == f"1-0-{world}"
    assert json.loads((out / "reference" / played[1] / "run.json").read_text())["first_seed"] == seed

    # the optimiser continued: two updates in all, the second from the first's checkpoint
    state = json.loads((out / "checkpoints" / "state.json").read_text())
    assert state["iteration"] == 1 and state["trainer_checkpoint"] == "trainer/checkpoint-2"
    trainer_state = json.loads((out / "trainer" / "checkpoint-2" / "trainer_state.json").read_text())
    assert trainer_state["global_step"] == 2 and len(trainer_state["log_history"]) >= 2
    assert json.loads((out / "config.json").read_text())["update"]["rows_per_update"] == 2

    # the tracker holds the whole run on one axis, the killed iteration once: held-out before (step 0) and after
    # iteration 1 (step 2), and each iteration's TRL update under train/
    tracked = tensorboard_points(out / TENSORBOARD_DIR)
    assert set(tracked["eval/success"]) == {0, 2} and set(tracked["train/loss"]) == {1, 2}
    assert set(tracked["env/avg_regret"]) == {1, 2} and set(tracked["actor/all_zero_std"]) == {1, 2}


def test_the_adapter_trains_and_reaches_the_server(resumed_run: tuple[Path, subprocess.CompletedProcess[str]]) -> None:
    out, _ = resumed_run
    checkpoint = out / "trainer" / "checkpoint-2"
    assert (checkpoint / "adapter_config.json").exists() and not (checkpoint / "model.safetensors").exists()
    assert json.loads((checkpoint / "adapter_config.json").read_text())["r"] == 4

    # loaded at each start (before anything is sampled) and after each update: 2 before the kill, 2 after
    stats = json.loads((out / "server-stats.json").read_text())
    assert set(stats["adapters"]) == {ADAPTER} and stats["adapters"][ADAPTER]["loads"] == 4
    assert stats["prefix_cache_resets"] == 4
    assert set(stats["models"]) == {ADAPTER}, "every request must name the adapter, the base model never"
    state = json.loads((out / "checkpoints" / "state.json").read_text())
    served = Path(stats["adapters"][ADAPTER]["path"])
    assert served == (out / "weights" / f"{ADAPTER}-v00004").resolve() and state["weights_version"] == 4
    assert sorted(p.name for p in (out / "weights").iterdir()) == [served.name]  # older versions are dropped

    # what the server last loaded is the adapter the last update produced, tensor for tensor
    trained, pushed = (
        load_file(checkpoint / "adapter_model.safetensors"),
        load_file(served / "adapter_model.safetensors"),
    )
    assert trained.keys() == pushed.keys() and any("lora_B" in name for name in trained)
    for name, tensor in trained.items():
        assert torch.equal(tensor, pushed[name]), name


def test_a_resumed_run_keeps_its_config(resumed_run: tuple[Path, subprocess.CompletedProcess[str]]) -> None:
    out, _ = resumed_run
    changed = subprocess.run([*SPADEWORK, "train", "--resume", str(out), "--set", "agent.plays=4"],
                             capture_output=True, text=True, timeout=120, env=ENV)  # fmt: skip
    assert changed.returncode == 2 and "only run.* knobs (and the endpoints of a run served by them)" in changed.stderr


def test_the_report_renders_the_run(resumed_run: tuple[Path, subprocess.CompletedProcess[str]], tmp_path: Path) -> None:
    from PIL import Image

    from trainers.report import PLOTS

    out, _ = resumed_run
    completed = subprocess.run([*SPADEWORK, "report", str(out), "--out", str(tmp_path)], capture_output=True,
                               text=True, timeout=300, env=ENV)  # fmt: skip
    assert completed.returncode == 0, completed.stderr[-3000:]
    assert "iterations done" in completed.stdout and "2 of 2" in completed.stdout
    assert "designer validity (before / after repair)" in completed.stdout and "4/4 / 4/4" in completed.stdout
    page = (tmp_path / "index.html").read_text()
    for name in PLOTS:
        with Image.open(tmp_path / f"{name}.png") as image:
            assert image.format == "PNG" and image.size == (640, 360)
            assert len(image.getcolors(maxcolors=1 << 16) or range(1 << 16)) > 50, f"{name}.png looks empty"
        assert f'src="{name}.png"' in page
    worlds, iterations = page.split("<h2>Designed worlds (valid ones)</h2>")[1].split("<h2>Iterations</h2>")
    assert worlds.count("<tr><td>") == 4 and ".py</td>" in worlds  # the 4 valid Python worlds, each with its file
    assert iterations.split("</table>")[0].count("<tr><td>") == 2  # one row per iteration
