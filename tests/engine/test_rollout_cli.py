"""`spadework rollout` as a user runs it: kill -9 and resume, Ctrl-C, and clear errors for bad input."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from engine.store import read_attempts, read_records
from tests.engine.conftest import mock_model
from tests.procfs import process_stats
from tests.servers import SPADEWORK
from toolworlds.untrusted import prepare

WIDE = {**os.environ, "COLUMNS": "250", "NO_COLOR": "1"}


@pytest.fixture(scope="module")
def slow_url() -> Iterator[str]:
    with mock_model("--latency", "0.04") as url:
        yield url


def run(command: list[str], timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """Run a command with a wide terminal, so rich does not wrap error messages across box lines."""
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=WIDE)


def rollout_command(url: str, out: Path, *extra: str) -> list[str]:
    return [*SPADEWORK, "rollout", "--world", "banking", "--endpoint", url, "--out", str(out), "--no-progress", *extra]


def wait_for_lines(path: Path, count: int, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and path.read_bytes().count(b"\n") >= count:
            return
        time.sleep(0.05)
    raise TimeoutError(f"{path} did not reach {count} lines")


def test_kill_9_mid_run_then_resume_repeats_nothing_and_loses_nothing(tmp_path: Path, slow_url: str) -> None:
    episodes = tmp_path / "episodes.jsonl"
    command = rollout_command(slow_url, tmp_path, "--tasks", "150", "--concurrency", "6")
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_for_lines(episodes, 20)
    process.send_signal(signal.SIGKILL)
    process.wait()
    before = episodes.read_bytes()
    finished_before = before.count(b"\n")
    assert finished_before < 150, "the run must be killed mid-way for this test to mean anything"

    resumed = run(command)
    assert resumed.returncode == 0, resumed.stderr
    assert f"already_done={finished_before}" in resumed.stderr
    after = episodes.read_bytes()
    complete = before[: before.rfind(b"\n") + 1]
    assert after.startswith(complete), "records written before the kill must stay as they were"
    keys = Counter(json.loads(line)["key"]["seed"] for line in after.splitlines())
    assert sorted(keys) == list(range(150)) and set(keys.values()) == {1}


def test_ctrl_c_stops_cleanly_with_a_readable_store(tmp_path: Path, slow_url: str) -> None:
    command = rollout_command(slow_url, tmp_path, "--tasks", "500", "--concurrency", "4")
    # As at a terminal: a shell without job control starts background commands with Ctrl-C ignored, and
    # a child inherits that (pytest run as `cmd &` from a script saw all 500 episodes finish).
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))  # fmt: skip
    wait_for_lines(tmp_path / "episodes.jsonl", 5)
    process.send_signal(signal.SIGINT)
    stdout, stderr = process.communicate(timeout=60)
    assert process.returncode == 130, stderr
    assert "rollout interrupted" in stderr and "finished now" in stdout
    listing = run([*SPADEWORK, "episodes", str(tmp_path), "--json"])
    records = [json.loads(line) for line in listing.stdout.splitlines()]
    assert 5 <= len(records) < 500 and all(record["status"] == "ok" for record in records)


def test_resuming_with_a_different_plan_is_refused(tmp_path: Path, oracle_url: str) -> None:
    first = run(rollout_command(oracle_url, tmp_path, "--tasks", "2"))
    assert first.returncode == 0, first.stderr
    second = run(rollout_command(oracle_url, tmp_path, "--tasks", "3"))
    assert second.returncode == 2
    assert "holds a run with a different plan (differs in: tasks)" in second.stderr


def test_unknown_world_and_bad_mode_name_the_option(tmp_path: Path, oracle_url: str) -> None:
    command = rollout_command(oracle_url, tmp_path)
    command[command.index("banking")] = "bakning"
    result = run(command)
    assert result.returncode == 2 and "--world" in result.stderr and "bakning" in result.stderr
    result = run([*rollout_command(oracle_url, tmp_path), "--mode", "tokenz"])
    assert result.returncode == 2 and "--mode" in result.stderr
    result = run([*rollout_command(oracle_url, tmp_path), "--mode", "tokens"])
    assert result.returncode == 2 and "--tokenizer" in result.stderr
    result = run([*rollout_command(oracle_url, tmp_path), "--mode", "tokens", "--tokenizer", "no/such/dir"])
    assert result.returncode == 2 and "no tokenizer at 'no/such/dir'" in result.stderr


def test_an_outage_fails_the_run_and_a_rerun_plays_what_it_cost(tmp_path: Path, oracle_url: str) -> None:
    """Episodes an unreachable endpoint cost are recorded as failed attempts, the run exits 3 saying why, and
    a rerun against a working endpoint plays them (they were never outcomes)."""
    down = run(rollout_command("http://127.0.0.1:9/v1", tmp_path, "--tasks", "3", "--retries", "1"))
    assert down.returncode == 3, down.stderr
    assert "3 of 3 episodes failed for infrastructure reasons (endpoint:connection 3)" in down.stderr
    attempts = [json.loads(line) for line in (tmp_path / "episodes.jsonl").read_text().splitlines()]
    assert [record["cause"] for record in attempts] == ["endpoint:connection"] * 3
    rerun = run(rollout_command(oracle_url, tmp_path, "--tasks", "3", "--retries", "1"))
    assert rerun.returncode == 0, rerun.stderr
    assert re.search(r"already on disk \(skipped\)\W+0\b", rerun.stdout), rerun.stdout  # the failures are played
    played = list(read_records(tmp_path))
    assert sorted(record.key.seed for record in played) == [0, 1, 2]
    assert {record.status for record in played} == {"ok"} and all(record.reward == 1.0 for record in played)
    assert len(list(read_attempts(tmp_path))) == 6  # the failed attempts stay on disk, as attempts
    again = run(rollout_command(oracle_url, tmp_path, "--tasks", "3", "--retries", "1"))
    assert again.returncode == 0 and re.search(r"already on disk \(skipped\)\W+3\b", again.stdout), again.stdout


def test_a_share_of_failures_under_the_limit_is_not_a_failed_run(tmp_path: Path) -> None:
    # Which episodes draw a fault depends on the order requests arrive in: at 0.25 a request, with about three
    # requests an episode, all 16 fail or none with odds under 1 in 5,000 (at 0.5 and 8 tasks, all failed with
    # odds near 1 in 3).
    with mock_model("--fault-rate", "0.25", "--faults", "5xx") as url:
        result = run(rollout_command(url, tmp_path, "--tasks", "16", "--retries", "0", "--max-failed-share", "1"))
    records = list(read_records(tmp_path))
    failed = sum(record.status == "infra_error" for record in records)
    assert 0 < failed < len(records) == 16
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("written", ["as is", "needing repair"])
def test_a_model_written_file_is_played_in_the_sandbox(tmp_path: Path, written: str) -> None:
    """`--world file.py` (no class) is untrusted: loaded and played only in sandbox workers, as `validate`
    judges it (a literal `{done}` in an f-string, which fails unrepaired, is escaped first)."""
    world = tmp_path / "library.py"
    source = Path("toolworlds/examples/library.py").read_text()
    if written == "needing repair":
        source = source.replace('for me."', 'for me, then say \\\\boxed{done}."')
        assert "boxed{done}" in source
    world.write_text(prepare(source).source)  # the mock learns the oracle plan from the repaired code at start-up
    with mock_model("--world", f"{world}:LibraryWorld") as url:  # (it is no engine), then the file is as written
        world.write_text(source)
        command = [*SPADEWORK, "rollout", "--world", str(world), "--endpoint", url, "--out", str(tmp_path / "run"),
                   "--no-progress", "--tasks", "6", "--hints", "both"]  # fmt: skip
        completed = run(command)
    assert completed.returncode == 0, completed.stderr
    assert "sandbox pool ready" in completed.stderr
    records = [json.loads(line) for line in (tmp_path / "run" / "episodes.jsonl").read_text().splitlines()]
    assert len(records) == 12 and {r["status"] for r in records} == {"ok"}
    assert all(r["reward"] == 1.0 for r in records)  # the oracle script solves the sandboxed world


def children_of(parent: int) -> list[int]:
    """Live (not zombie) processes whose parent is `parent`."""
    return [pid for pid, fields in process_stats() if int(fields[1]) == parent and fields[0] != "Z"]


@pytest.mark.parametrize("target", ["episodes", "zygote"])
def test_kill_9_of_a_world_process_is_an_infra_failure_and_loses_nothing(tmp_path: Path, target: str) -> None:
    """Kill the sandbox's episode processes (or their zygote) mid-run: the episodes they held (and, the world
    being quarantined, those after) end as infrastructure failures with no reward; every record written
    before stays as it was."""
    world = tmp_path / "library.py"
    world.write_text(Path("toolworlds/examples/library.py").read_text())
    episodes = tmp_path / "run" / "episodes.jsonl"
    with mock_model("--world", f"{world}:LibraryWorld", "--latency", "0.05") as url:
        command = [*SPADEWORK, "rollout", "--world", str(world), "--endpoint", url, "--out", str(tmp_path / "run"),
                   "--no-progress", "--tasks", "40", "--concurrency", "2"]  # fmt: skip
        rollout = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=WIDE)
        wait_for_lines(episodes, 3)
        before = episodes.read_bytes()
        zygote = next(
            pid for pid in children_of(rollout.pid) if b"sandbox.zygote" in Path(f"/proc/{pid}/cmdline").read_bytes()
        )
        victims = children_of(zygote) if target == "episodes" else [zygote]  # episodes: those playing, the spare
        assert victims
        killed = 0
        for victim in victims:  # an episode's process may end of itself between the listing and the kill
            with contextlib.suppress(ProcessLookupError):
                os.kill(victim, signal.SIGKILL)
                killed += 1
        assert killed
        _, errors = rollout.communicate(timeout=120)
    # The world is quarantined after the kill, so most episodes fail: the run says so, and exits 3.
    assert rollout.returncode == 3 and "failed for infrastructure reasons (world_" in errors, errors
    after = episodes.read_bytes()
    assert after.startswith(before), "records written before the kill must stay as they were"
    records = [json.loads(line) for line in after.splitlines()]
    assert sorted(record["key"]["seed"] for record in records) == list(range(40))
    failed = [record for record in records if record["status"] != "ok"]
    assert failed, "the kill must have cost an episode"
    assert {record["status"] for record in failed} == {"infra_error"}
    assert {record["cause"] for record in failed} <= {"world_crash", "world_quarantined", "world_worker_lost"}
    assert all(record["reward"] is None for record in failed)
    assert all(record["reward"] == 1.0 for record in records if record["status"] == "ok")


def test_a_model_written_file_that_does_not_load_is_a_clear_error(tmp_path: Path) -> None:
    broken = tmp_path / "broken.py"
    broken.write_text(Path("toolworlds/examples/library.py").read_text() + "\nraise RuntimeError('no luck')\n")
    completed = run([*SPADEWORK, "rollout", "--world", str(broken), "--endpoint", "http://127.0.0.1:9/v1",
                     "--out", str(tmp_path / "run"), "--no-progress"])  # fmt: skip
    assert completed.returncode == 2
    assert "does not load in the sandbox" in completed.stderr and "RuntimeError: no luck" in completed.stderr
