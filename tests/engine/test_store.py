"""The store keeps what finished, survives torn writes, refuses a different plan, and streams records back."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest

from engine.rollout import RolloutPlan, infrastructure_failure
from engine.settings import EpisodeSettings
from engine.store import StoreError, TrajectoryStore, read_attempts, read_records
from engine.trajectory import EpisodeKey, EpisodeRecord, TokenTrace


def plan(**changes: object) -> RolloutPlan:
    fields: dict[str, object] = {"run": "r", "world": "banking", "tasks": 3, **changes}
    return RolloutPlan.model_validate(fields)


def record(seed: int, sample: int = 0, cause: str | None = None) -> EpisodeRecord:
    """An episode that scored 1.0, or (given a `cause`) one that failed for infrastructure reasons."""
    key = EpisodeKey(world="banking", seed=seed, sample=sample, hinted=False)
    return EpisodeRecord(
        run="r", key=key, mode="chat", model="m", status="infra_error" if cause else "ok", cause=cause,
        reward=None if cause else 1.0, messages=[], turns=[], started_at=0.0, duration_s=0.1,
    )  # fmt: skip


def test_reopening_learns_what_finished(tmp_path: Path) -> None:
    with TrajectoryStore.open(tmp_path, plan()) as store:
        store.append(record(0))
        store.append(record(1))
    with TrajectoryStore.open(tmp_path, plan()) as store:
        assert store.finished == {record(0).key.text, record(1).key.text}
        store.append(record(2))
    assert [r.key.seed for r in read_records(tmp_path)] == [0, 1, 2]


def test_a_keeping_store_holds_in_memory_what_read_records_would_read_back(tmp_path: Path) -> None:
    """Records stay in memory from play to training row: a store opened with `keep` answers `records()` with
    each episode's last record, across a resume, exactly as the file read back says."""
    with TrajectoryStore.open(tmp_path, plan(), keep=True) as store:
        store.append(record(0))
        store.append(record(1, cause="endpoint:timeout"))
        store.append(record(2))
        assert [(r.key.seed, r.status) for r in store.records()] == [(0, "ok"), (2, "ok"), (1, "infra_error")]
    with TrajectoryStore.open(tmp_path, plan(), keep=True) as store:  # resumed: what was on disk, then more
        store.append(record(1))
        assert store.records() == list(read_records(tmp_path))
        assert [r.key.seed for r in store.records()] == [0, 2, 1]
    with TrajectoryStore.open(tmp_path, plan()) as store, pytest.raises(StoreError, match="keep=True"):
        store.records()


def test_a_torn_last_line_is_cut_and_the_rest_kept(tmp_path: Path) -> None:
    with TrajectoryStore.open(tmp_path, plan()) as store:
        store.append(record(0))
    with (tmp_path / "episodes.jsonl").open("ab") as handle:
        handle.write(record(1).model_dump_json().encode()[:40])  # killed mid-write
    assert [r.key.seed for r in read_records(tmp_path)] == [0]
    with TrajectoryStore.open(tmp_path, plan()) as store:
        assert store.torn_lines == 1 and store.finished == {record(0).key.text}
        store.append(record(1))
    assert [r.key.seed for r in read_records(tmp_path)] == [0, 1]


def test_a_different_plan_is_refused_by_name(tmp_path: Path) -> None:
    TrajectoryStore.open(tmp_path, plan()).close()
    with pytest.raises(StoreError, match=r"differs in: settings.max_turns, tasks"):
        TrajectoryStore.open(tmp_path, plan(tasks=4, settings=EpisodeSettings(max_turns=3)))


def test_a_resume_may_change_where_and_how_patiently_it_plays_but_not_what(tmp_path: Path) -> None:
    """A long run could not be resumed once its server moved or its timeout had to grow after an outage."""
    with TrajectoryStore.open(tmp_path, plan()) as store:
        store.append(record(0))
    patient = EpisodeSettings(request_timeout_s=900.0, episode_timeout_s=7200.0)
    with TrajectoryStore.open(tmp_path, plan(run="renamed", settings=patient)) as store:
        assert store.finished == {record(0).key.text}
    assert json.loads((tmp_path / "run.json").read_text())["settings"]["request_timeout_s"] == 900.0
    with pytest.raises(StoreError, match=r"differs in: settings.temperature\)"):
        TrajectoryStore.open(tmp_path, plan(run="renamed", settings=patient.model_copy(update={"temperature": 0.5})))


def test_a_corrupt_record_names_its_line(tmp_path: Path) -> None:
    with TrajectoryStore.open(tmp_path, plan()) as store:
        store.append(record(0))
    with (tmp_path / "episodes.jsonl").open("ab") as handle:
        handle.write(b'{"not": "a record"}\n')
    with pytest.raises(StoreError, match=r"episodes.jsonl:2: not an episode record"):
        TrajectoryStore.open(tmp_path, plan())


def test_a_duplicate_key_is_refused(tmp_path: Path) -> None:
    with TrajectoryStore.open(tmp_path, plan()) as store:
        store.append(record(0))
        store.append(record(0))
    with pytest.raises(StoreError, match="recorded twice"):
        TrajectoryStore.open(tmp_path, plan())


def test_an_infrastructure_failure_is_an_attempt_a_reopened_store_plays_again(tmp_path: Path) -> None:
    with TrajectoryStore.open(tmp_path, plan()) as store:
        store.append(record(0))
        store.append(record(1, cause="endpoint:connection"))
    with TrajectoryStore.open(tmp_path, plan()) as store:
        assert store.finished == {record(0).key.text} and store.failed == {record(1).key.text}
        store.append(record(1, cause="endpoint:timeout"))  # failed again: still to play
    with TrajectoryStore.open(tmp_path, plan()) as store:
        assert store.failed == {record(1).key.text}
        store.append(record(1))
    assert [(r.key.seed, r.status) for r in read_records(tmp_path)] == [(0, "ok"), (1, "ok")]
    assert [r.cause for r in read_attempts(tmp_path)] == [None, "endpoint:connection", "endpoint:timeout", None]
    with TrajectoryStore.open(tmp_path, plan()) as store:
        assert store.finished == {record(0).key.text, record(1).key.text} and not store.failed
        store.append(record(1))  # a second outcome for a finished episode is corrupt
    with pytest.raises(StoreError, match="recorded twice"):
        TrajectoryStore.open(tmp_path, plan())


def test_a_run_fails_as_a_whole_on_most_or_all_episodes_failing_for_infrastructure() -> None:
    down = [record(seed, cause="endpoint:connection") for seed in range(3)]
    assert infrastructure_failure(down, 1.0) == (
        "3 of 3 episodes failed for infrastructure reasons (endpoint:connection 3); they count as not played"
    )
    mixed = [record(0), record(1, cause="endpoint:http_500"), record(2, cause="world_quarantined")]
    assert infrastructure_failure(mixed, 0.5) is not None and infrastructure_failure(mixed, 0.7) is None
    # Where worlds are model-written, a world that crashes is that world's outcome, not a broken run.
    assert infrastructure_failure(mixed, 0.4, endpoint_only=True) is None
    assert infrastructure_failure(mixed, 0.3, endpoint_only=True) is not None
    assert infrastructure_failure([], 0.0) is None


def test_reading_a_directory_that_is_not_a_run(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match=r"has no episodes\.jsonl"):
        list(read_records(tmp_path))


def test_plan_keys_cover_every_seed_sample_and_hint() -> None:
    keys = list(plan(samples=2, hints="both").episodes())
    assert len(keys) == plan(samples=2, hints="both").size == 12
    assert len({key.text for key in keys}) == 12


def test_token_trace_appends_and_detects_drift() -> None:
    trace = TokenTrace()
    trace.add_turn(0, [1, 2, 3], [4, 5], [-0.1, -0.2])
    trace.add_turn(1, [1, 2, 3, 4, 5, 6, 7], [8], [-0.3])
    assert trace.prompt_ids == [1, 2, 3]
    assert trace.completion_ids == [4, 5, 6, 7, 8]
    assert trace.loss_mask == [1, 1, 0, 0, 1]
    assert trace.logprobs == [-0.1, -0.2, 0.0, 0.0, -0.3]
    assert trace.exact
    trace.add_turn(2, [1, 2, 3, 4, 9, 6, 7, 8, 10], [11], [-0.4])
    assert not trace.exact and trace.drift[0].turn == 2 and trace.drift[0].position == 4
    assert trace.completion_ids == [4, 5, 6, 7, 8]  # nothing appended on top of a mismatch


@pytest.mark.anyio
async def test_cancelling_a_rollout_leaves_a_readable_store(tmp_path: Path, oracle_url: str) -> None:
    from tests.engine.conftest import mock_model, play

    stored = tmp_path / "episodes.jsonl"

    async def cancel_after_the_first_episodes(scope: anyio.CancelScope) -> None:
        with anyio.fail_after(120):  # when it is cancelled depends on the store, not on the machine's speed
            while not stored.exists() or stored.read_bytes().count(b"\n") < 3:
                await anyio.sleep(0.05)
        scope.cancel()

    with mock_model("--latency", "0.05") as url:
        async with anyio.create_task_group() as group:
            group.start_soon(cancel_after_the_first_episodes, group.cancel_scope)
            await play(tmp_path, [url], tasks=200, concurrency=4)
    records = list(read_records(tmp_path))
    assert 0 < len(records) < 200
    assert all(r.status == "ok" for r in records)
    lines = (tmp_path / "episodes.jsonl").read_bytes().splitlines()
    assert all(json.loads(line) for line in lines)


def test_parquet_export_keeps_every_record_and_its_tokens(tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    from engine.parquet import export_parquet

    run = tmp_path / "run"
    with TrajectoryStore.open(run, plan()) as store:
        for seed in range(3):
            entry = record(seed)
            if seed == 1:
                trace = TokenTrace(prompt_ids=[1, 2], completion_ids=[3, 4], loss_mask=[1, 0], logprobs=[-0.5, 0.0])
                entry = entry.model_copy(update={"tokens": trace})
            store.append(entry)
    assert export_parquet(run, tmp_path / "run.parquet", batch_size=2) == 3
    table = pq.read_table(tmp_path / "run.parquet").to_pylist()
    assert [row["seed"] for row in table] == [0, 1, 2]
    assert table[1]["completion_ids"] == [3, 4] and table[1]["loss_mask"] == [1, 0]
    assert table[1]["logprobs"] == [-0.5, 0.0] and table[1]["token_exact"] is True
    assert table[0]["prompt_ids"] is None and table[0]["status"] == "ok" and table[0]["reward"] == 1.0


def test_exporting_never_destroys_a_run_or_an_earlier_export(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from spadework.cli import app

    run = tmp_path / "run"
    with TrajectoryStore.open(run, plan()) as store:
        store.append(record(0))
    stored = (run / "episodes.jsonl").read_bytes()
    runner = CliRunner()
    onto_the_run = runner.invoke(app, ["episodes", str(run), "--parquet", str(run / "episodes.jsonl")])
    assert onto_the_run.exit_code == 2 and "the run's own episodes.jsonl" in onto_the_run.output
    assert (run / "episodes.jsonl").read_bytes() == stored
    earlier = tmp_path / "earlier.parquet"
    assert runner.invoke(app, ["episodes", str(run), "--parquet", str(earlier)]).exit_code == 0
    exported = earlier.read_bytes()
    missing = runner.invoke(app, ["episodes", str(tmp_path / "no-such-run"), "--parquet", str(earlier)])
    assert missing.exit_code == 2 and earlier.read_bytes() == exported
    assert sorted(path.name for path in tmp_path.iterdir()) == ["earlier.parquet", "run"]  # no partial file left
