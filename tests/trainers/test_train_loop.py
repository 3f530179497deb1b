"""What each ablation switch changes, through the self-play loop itself (against the scripted mock model
over HTTP, with the real sandbox and engine), and bad settings refused before anything starts. The whole
`spadework train` run, killed and resumed, is in `test_train_run.py`."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, closing
from pathlib import Path
from typing import Any

import pytest

from benchmarks.tau2.data import load_domain
from benchmarks.tau2.world import TelecomWorld
from engine.endpoints import EndpointPool
from engine.local_models import default_gguf
from engine.rollout import InfrastructureFailure
from engine.settings import EpisodeSettings
from engine.store import read_records
from tests.engine.conftest import mock_model
from tests.servers import SPADEWORK
from tests.trackers import tensorboard_points
from toolworlds.examples import EXAMPLE_WORLD
from toolworlds.registry import builtin_worlds
from toolworlds.sandbox import SandboxPool
from trainers import journal
from trainers.compare import ArmResult, compute_gaps
from trainers.config import DesignerConfig, load_config
from trainers.corpus import Corpus, open_source
from trainers.designer.loop import DesignRun, DesignSettings, IterationMetrics
from trainers.designer.memory import RememberedWorld, WorldMemory, code_hash
from trainers.pools import export_pool, read_pool
from trainers.run_records import IterationReport, read_iterations
from trainers.selfplay import SelfPlay
from trainers.tracking import TENSORBOARD_DIR, NoTracker, Tracker, open_tracker

TINY = ["run.iterations=1", "run.eval_seeds=1", "designer.documents=1", "designer.generations=2", "agent.plays=2",
        "agent.reference_tasks=1", "update.rows_per_update=2", "designer.smoke_seeds=2", "agent.archive_tasks=1",
        "run.eval_tasks=2"]  # fmt: skip


@pytest.fixture(scope="module")
def designing_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    world = tmp_path_factory.mktemp("designs") / "library.py"
    world.write_text(EXAMPLE_WORLD)
    with mock_model("--tokenizer", str(default_gguf()), "--design", str(world)) as url:
        yield url


def test_a_bad_setting_stops_the_run_before_it_starts(tmp_path: Path) -> None:
    command = [*SPADEWORK, "train", "--out", str(tmp_path), "--set", "agent.plays=0"]
    completed = subprocess.run(
        command, capture_output=True, text=True, timeout=120, env={**os.environ, "COLUMNS": "200"}
    )
    assert completed.returncode == 2 and "agent.plays: Input should be greater than or equal to 1" in completed.stderr
    (tmp_path / "train.jsonl").write_text("{}\n")
    again = subprocess.run([*SPADEWORK, "train", "--out", str(tmp_path)], capture_output=True, text=True, timeout=120,
                           env={**os.environ, "COLUMNS": "200"})  # fmt: skip
    assert again.returncode == 2 and "already holds a run" in again.stderr and "--resume" in again.stderr
    resumed = subprocess.run([*SPADEWORK, "train", "--resume", str(tmp_path)], capture_output=True, text=True,
                             timeout=120, env={**os.environ, "COLUMNS": "200"})  # fmt: skip
    assert resumed.returncode == 2 and "config.json is missing: not a spadework training run" in resumed.stderr


def test_a_run_stopped_before_its_first_checkpoint_starts_over_on_resume(tmp_path: Path) -> None:
    """It was a dead end: a rerun said "already holds a run; continue it with --resume", and --resume said
    "has no checkpoint: nothing to resume"."""
    broken = tmp_path / "broken.gguf"
    broken.write_bytes(b"GGUF" + b"\0" * 64)  # its server will not start
    out = tmp_path / "run"
    env = {**os.environ, "COLUMNS": "200"}
    started = subprocess.run([*SPADEWORK, "train", "--out", str(out), "--set", f"policy.model={broken}"],
                             capture_output=True, text=True, timeout=120, env=env)  # fmt: skip
    assert started.returncode == 2 and (out / "config.json").exists(), started.stderr[-2000:]
    (out / "eval.jsonl").write_text("{}\n")  # as if the held-out evaluation had begun
    resumed = subprocess.run([*SPADEWORK, "train", "--resume", str(out)], capture_output=True, text=True,
                             timeout=120, env=env)  # fmt: skip
    assert "no checkpoint yet: the run starts over with its config" in resumed.stderr, resumed.stderr[-2000:]
    assert resumed.returncode == 2 and "policy.model" in resumed.stderr  # it got as far as the server, again
    assert sorted(path.name for path in out.iterdir()) == ["config.json"]


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (
            ["--endpoint", "http://127.0.0.1:9/v1", "--set", "policy.weight_sync=vllm-nccl"],
            "vllm-nccl weight sync streams weights over NCCL and needs a CUDA",
        ),
        (["--preset", "gpu-qwen3-4b"], "the embedded server runs GGUF files, not 'Qwen/Qwen3-4B-Instruct-2507'"),
    ],
)
def test_a_policy_the_machine_cannot_train_or_serve_stops_the_run(
    tmp_path: Path, arguments: list[str], message: str
) -> None:
    command = [*SPADEWORK, "train", "--out", str(tmp_path / "run"), *arguments]
    completed = subprocess.run(
        command, capture_output=True, text=True, timeout=120, env={**os.environ, "COLUMNS": "200"}
    )
    assert not (tmp_path / "run").exists(), "a run that cannot start leaves nothing behind"
    assert completed.returncode == 2 and message in " ".join(completed.stderr.split()), completed.stderr[-2000:]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@asynccontextmanager
async def self_play(out: Path, url: str, overrides: list[str],
                    remembered: RememberedWorld | None = None, tracker: Tracker | None = None,
                    ) -> AsyncIterator[SelfPlay]:  # fmt: skip
    """The loop of cpu-tiny with `overrides`, without an update, against the scripted server at `url`."""
    config = load_config("cpu-tiny", overrides)
    agent = EpisodeSettings(mode="tokens", tokenizer=str(default_gguf()), max_turns=4, max_tokens_per_turn=128)
    knobs = DesignerConfig(documents=1, generations=2, smoke_seeds=2)
    settings = DesignSettings(knobs=knobs, plays=2, designer=agent.model_copy(
        update={"max_turns": 1, "max_tokens_per_turn": 512}), agent=agent,
        memory_examples=0 if config.ablations.no_memory else 1)  # fmt: skip
    corpus = Corpus(open_source("none" if config.ablations.no_corpus else "python-docs"), max_tokens=200)
    async with SandboxPool() as sandbox, EndpointPool.open([url]) as endpoints:
        with WorldMemory.open(out / "memory.sqlite") as memory:
            if remembered is not None:
                memory.remember(remembered)
            design = DesignRun("test", out, corpus, endpoints, sandbox, memory, settings)
            yield SelfPlay(config, out, design, endpoints, agent, learner=None, tracker=tracker or NoTracker())


async def iterations(out: Path, url: str, ablation: str | None, remembered: RememberedWorld | None = None,
                     extra: tuple[str, ...] = (), tracker: Tracker | None = None) -> SelfPlay:  # fmt: skip
    """Two iterations through the loop without an update: what each switch changes is in the rows and files."""
    overrides = [*TINY, *extra, *([f"ablations.{ablation}=true"] if ablation else [])]
    async with self_play(out, url, overrides, remembered, tracker) as loop:
        for index in range(2):
            await loop.iteration(index)
    return loop


@pytest.mark.anyio
@pytest.mark.parametrize("ablation", [None, "fixed_pool", "frozen_designer", "no_memory", "no_corpus"])
async def test_each_ablation_changes_what_it_claims(tmp_path: Path, designing_url: str, ablation: str | None) -> None:
    with closing(open_tracker("tensorboard", tmp_path, "test", {})) as tracker:
        await iterations(tmp_path, designing_url, ablation, tracker=tracker)
    reports = [json.loads(line) for line in (tmp_path / "train.jsonl").read_text().splitlines()]
    tracked = tensorboard_points(tmp_path / TENSORBOARD_DIR)
    # the tracker got each iteration's numbers at its step, as train.jsonl and metrics.jsonl hold them
    assert tracked["actor/return"] == {1: pytest.approx(reports[0]["agent_return"]),
                                       2: pytest.approx(reports[1]["agent_return"])}  # fmt: skip
    assert tracked["rows/agent"] == {1: reports[0]["rows"]["agent"], 2: reports[1]["rows"]["agent"]}
    designs = (tmp_path / "designs.jsonl").read_text().splitlines() if (tmp_path / "designs.jsonl").exists() else []
    last_prompt = json.loads(designs[-1])["sample"]["messages"][1]["content"] if designs else ""
    if ablation == "fixed_pool":
        assert not designs and all(r["rows"] == {"agent": 4, "designer": 0} for r in reports)
        return
    assert len(designs) == 4
    designed = journal.read(tmp_path / "metrics.jsonl", IterationMetrics)
    assert tracked["env/valid_worlds"] == {1: designed[0].valid_after_repair, 2: designed[1].valid_after_repair}
    assert set(tracked["env/avg_regret"]) == {1, 2} and set(tracked["env/avg_r_hint"]) == {1, 2}
    # agent groups: the reference task's two (one per hint condition) and the designed world's two (both designs
    # are the scripted model's one world; its plays on seeds 0 and 1 open alike, so they are one group a side,
    # not four groups of one); and the designer's group where it trains
    assert all(r["groups"] == 4 + (ablation != "frozen_designer") for r in reports)
    if ablation == "frozen_designer":
        assert all(r["rows"]["designer"] == 0 and r["rows"]["agent"] == 12 for r in reports)
    else:
        assert all(r["rows"]["designer"] == 2 for r in reports)
    assert ("Worlds you wrote before" in last_prompt) is (ablation != "no_memory")
    assert ("a domain of your choice" in last_prompt) is (ablation == "no_corpus")


@pytest.mark.anyio
async def test_without_eval_seeds_the_held_out_measure_plays_only_the_suite(tmp_path: Path, designing_url: str) -> None:
    """cpu-tiny's `run.eval_seeds=0`: the full reference tasks (never solved in a main job with a record of them)
    are not played; the suite's tasks are."""
    async with self_play(tmp_path, designing_url, [*TINY, "run.eval_seeds=0"]) as loop:
        held = await loop.held_out(-1)
    worlds = sorted(builtin_worlds())
    assert sorted(path.name for path in (tmp_path / "eval").iterdir()) == [
        f"after--1-reference-lite-{world}" for world in worlds
    ]
    assert len(held.tasks) == 2 * len(worlds) and held.success_plain == {} and held.mean_plain is None
    assert json.loads((tmp_path / "eval.jsonl").read_text())["mean_hinted"] is None


@pytest.mark.anyio
async def test_reference_tasks_come_from_the_worlds_named_and_tau2_gives_only_its_train_split(
    tmp_path: Path, designing_url: str
) -> None:
    """`agent.reference_worlds`: the reference plays are tau2-telecom's (the official solo mode), on tasks of the
    release's train split only; the held-out measure is not touched (it stays on the built-in worlds)."""
    overrides = [*TINY, "agent.reference_worlds=tau2-telecom", "agent.suite=reference", "agent.reference_tasks=2"]
    async with self_play(tmp_path, designing_url, overrides) as loop:
        records = await loop.reference_plays(0)
    assert {record.key.world for record in records} == {"tau2-telecom"} and len(records) == 2 * 2 * 2
    # the scripted model plays each task's reference, cut at cpu-tiny's 4 turns: played and graded, never failed
    assert {record.status for record in records} <= {"ok", "truncated"}
    assert all(record.reward is not None for record in records)
    world = TelecomWorld()
    train, test = (set(load_domain("telecom").splits[name]) for name in ("train", "test"))
    assert all(world.reset(record.key.seed).variant in train - test for record in records)
    assert {path.name.split("-", 2)[2] for path in (tmp_path / "reference").iterdir()} == {"tau2-telecom"}


@pytest.fixture(scope="module")
def invalid_designs_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    world = tmp_path_factory.mktemp("invalid") / "broken.py"
    world.write_text("def reset(:\n")  # fails the syntax gate
    with mock_model("--tokenizer", str(default_gguf()), "--design", str(world)) as url:
        yield url


def _arms_and_designs() -> list[Any]:
    """Each arm with valid designs, and with one archived task; invalid designs for the arms with a designer
    (the fixed pool plays none). Three pairs of the nine, each about 5 s, run in `just test-slow` only."""
    default = {(None, "valid"), (None, "invalid"), ("fixed_pool", "valid, one archived"), ("frozen_designer", "valid"),
               ("frozen_designer", "invalid"), ("frozen_designer", "valid, one archived")}  # fmt: skip
    return [
        pytest.param(ablation, designs, marks=() if (ablation, designs) in default else pytest.mark.slow)
        for ablation in (None, "fixed_pool", "frozen_designer")
        for designs in ("valid", "invalid", "valid, one archived")
    ]


@pytest.mark.anyio
@pytest.mark.parametrize(("ablation", "designs"), _arms_and_designs())
async def test_with_fill_reference_every_compare_arm_plays_as_many_agent_episodes(
    tmp_path: Path, designing_url: str, invalid_designs_url: str, designs: str, ablation: str | None
) -> None:
    """The arms of `train-compare` at equal agent compute: 1 reference task + 2 designs (+ 1 archived task)
    per iteration, 2 plays each way; a reference task stands in for each design or archived task not played
    (all of them without a designer). Without the fill, the fixed pool would play 4 episodes an iteration
    against spade's 12, and this would fail."""
    url = designing_url if designs.startswith("valid") else invalid_designs_url
    archive = designs.endswith("archived")
    remembered = None
    if archive:
        remembered = RememberedWorld(code_hash=code_hash(EXAMPLE_WORLD), name="Library", iteration=-1,
                                     document="pydoc:x", description="d", tools=["search"], source=EXAMPLE_WORLD,
                                     scores_plain=[0.0, 1.0], scores_hinted=[1.0], mean_plain=0.5, mean_hinted=1.0,
                                     regret=0.5, reward=0.5, status="frontier")  # fmt: skip
    extra = ("agent.fill_reference=true", f"agent.archive_tasks={int(archive)}")
    await iterations(tmp_path, url, ablation, remembered=remembered, extra=extra)
    reports = [json.loads(line) for line in (tmp_path / "train.jsonl").read_text().splitlines()]
    tasks = 1 + 2 + int(archive)
    assert [r["agent_episodes"] for r in reports] == [tasks * 4] * 2
    assert all(r["agent_tokens"] > 0 for r in reports)
    reference = sorted(path.name for path in (tmp_path / "reference").iterdir())
    filled = ablation == "fixed_pool" or designs == "invalid"
    assert len(reference) == 2 * (tasks if filled else 1)


@pytest.mark.anyio
async def test_learning_from_plain_plays_keeps_the_hinted_ones_for_regret_alone(tmp_path: Path,
                                                                              designing_url: str) -> None:  # fmt: skip
    """`agent.learn_from=plain` (the official SPADE code's semantics): the reference task is played without the
    hint only, 2 plays; the designed worlds are still played both ways (4 + 4), since their hinted plays score
    regret, but only their plain plays become rows. With `both`, rows would be 12 and groups 5."""
    await iterations(tmp_path, designing_url, None, extra=("agent.learn_from=plain",))
    reports = read_iterations(tmp_path)
    assert [(r.rows["agent"], r.rows["designer"], r.groups, r.agent_episodes) for r in reports] == [(6, 2, 3, 10)] * 2
    reference = [record for path in (tmp_path / "reference").iterdir() for record in read_records(path)]
    assert len(reference) == 4 and not any(record.key.hinted for record in reference)
    outcomes = [json.loads(line) for line in (tmp_path / "designs.jsonl").read_text().splitlines()]
    assert all(outcome["regret"] is not None and outcome["mean_hinted"] is not None for outcome in outcomes)
    designed = [record for outcome in outcomes for record in read_records(tmp_path / outcome["plays"])]
    assert sorted({record.key.hinted for record in designed}) == [False, True]


@pytest.mark.anyio
@pytest.mark.parametrize("ablation", ["fixed_pool", "frozen_designer"])
async def test_learning_from_plain_plays_two_reference_tasks_stand_in_for_a_world_not_played(
    tmp_path: Path, designing_url: str, invalid_designs_url: str, ablation: str
) -> None:
    """With `agent.learn_from=plain` a reference task is 2 plays, a designed world 4 (both ways): the fill plays
    two reference tasks for each world the arm does not play (and one for the archived task none has), so its
    episodes equal spade's, 2 + 8 + 2. One each would leave the fixed pool 8 episodes an iteration against 12."""
    extra = ("agent.learn_from=plain", "agent.fill_reference=true")
    await iterations(tmp_path / "spade", designing_url, None, extra=extra)
    url = designing_url if ablation == "fixed_pool" else invalid_designs_url  # the frozen designer's are invalid
    await iterations(tmp_path / ablation, url, ablation, extra=extra)
    assert [r.agent_episodes for r in read_iterations(tmp_path / "spade")] == [12, 12]
    assert [r.agent_episodes for r in read_iterations(tmp_path / ablation)] == [12, 12]


@pytest.mark.anyio
@pytest.mark.parametrize(("tokens", "episodes"), [(10**7, 40), (1800, 24), (10, 4)])
async def test_an_arm_following_another_runs_compute_settles_between_its_episodes_and_tokens(
    tmp_path: Path, designing_url: str, tokens: int, episodes: int
) -> None:
    """`agent.compute_from` (the arms of `train-compare` after spade): a run that sampled 40 episodes and
    `tokens` agent tokens in its first iteration; the scripted model replies about 90 tokens a play and a task
    is 4 plays. Next to ten million tokens (out of reach), the fixed pool matches the episodes, 40; next to
    1,800 (half its rate), it settles where the squared relative gaps are least, 24 episodes and about 2,200
    tokens; next to 10 tokens, it stops after the one task its estimate allowed. Filled by tasks instead
    (`agent.fill_reference` alone), it would play 16 either way."""
    source = tmp_path / "spade"
    source.mkdir()
    journal.append(source / "train.jsonl", [IterationReport(
        iteration=0, rows={}, skipped={}, agent_return=None, designer_reward=None, valid_worlds=0, agent_episodes=40,
        agent_tokens=tokens, seconds={})])  # fmt: skip
    arm = tmp_path / "arm"
    follow = ("agent.fill_reference=true", f"agent.compute_from={source}")
    async with self_play(arm, designing_url, [*TINY, *follow, "ablations.fixed_pool=true"]) as loop:
        await loop.iteration(0)
    report = read_iterations(arm)[0]
    assert report.agent_episodes == episodes and report.agent_tokens
    assert len(list((arm / "reference").iterdir())) == episodes // 4


@pytest.mark.anyio
async def test_the_arms_following_spade_sample_its_agent_tokens_within_ten_percent(
    tmp_path: Path, designing_url: str
) -> None:
    """Spade plays 1 reference task, 2 designed worlds and a reference task in place of the archived one per
    iteration; the fixed pool and the frozen designer follow its agent compute over two iterations."""
    spade = tmp_path / "spade"
    await iterations(spade, designing_url, None, extra=("agent.fill_reference=true",))
    follow = ("agent.fill_reference=true", f"agent.compute_from={spade}")
    arms = {"spade": spade}
    for ablation in ("fixed_pool", "frozen_designer"):
        arms[ablation] = tmp_path / ablation
        await iterations(arms[ablation], designing_url, ablation, extra=follow)
    results = [ArmResult(arm=arm.replace("_", "-"), seed=0, iterations=2, suite=None, before=None, after=None,
                         lift=None, credit_lift=None, validity=[], regret=[], agent_rows=0,
                         agent_episodes=sum(r.agent_episodes or 0 for r in read_iterations(out)),
                         agent_tokens=sum(r.agent_tokens or 0 for r in read_iterations(out)), minutes=None)
               for arm, out in arms.items()]  # fmt: skip
    assert compute_gaps(results) == [], [(r.arm, r.agent_episodes, r.agent_tokens) for r in results]


@pytest.mark.anyio
async def test_archived_frontier_worlds_are_replayed_least_reused_first(tmp_path: Path, designing_url: str) -> None:
    digest = code_hash(EXAMPLE_WORLD)
    frontier = RememberedWorld(code_hash=digest, name="Library", iteration=-1, document="pydoc:x", description="d",
                               tools=["search"], source=EXAMPLE_WORLD, scores_plain=[0.0, 1.0], scores_hinted=[1.0],
                               mean_plain=0.5, mean_hinted=1.0, regret=0.5, reward=0.5, status="frontier")  # fmt: skip
    await iterations(tmp_path, designing_url, None, remembered=frontier)
    reports = [json.loads(line) for line in (tmp_path / "train.jsonl").read_text().splitlines()]
    assert [r["rows"]["agent"] for r in reports] == [16, 16]  # 12 as before + 1 archived task x 2 plays x 2 ways
    assert all(r["seconds"]["archive"] > 0 for r in reports)
    for index in range(2):
        played = [json.loads(line) for line in (tmp_path / "archive" / f"{index}-0-{digest[:16]}" /
                                                "episodes.jsonl").read_text().splitlines()]  # fmt: skip
        assert sorted(record["key"]["hinted"] for record in played) == [False, False, True, True]
        assert {record["status"] for record in played} == {"ok"}
    with WorldMemory.open(tmp_path / "memory.sqlite") as memory:
        assert memory.training_pool(1)[0].reuse_count == 2


@pytest.mark.anyio
async def test_a_pool_exported_by_one_run_is_replayed_by_the_next(tmp_path: Path, designing_url: str) -> None:
    first = tmp_path / "first"
    frontier = RememberedWorld(code_hash=code_hash(EXAMPLE_WORLD), name="Library", iteration=0, document="pydoc:x",
                               description="d", tools=["search"], source=EXAMPLE_WORLD, scores_plain=[0.0, 1.0],
                               scores_hinted=[1.0], mean_plain=0.5, mean_hinted=1.0, regret=0.5, reward=0.5,
                               status="frontier")  # fmt: skip
    with WorldMemory.open(first / "memory.sqlite") as memory:
        memory.remember(frontier)
    async with SandboxPool() as sandbox:
        await export_pool(first, tmp_path / "pool", sandbox)
    [pooled] = read_pool(tmp_path / "pool")
    second = tmp_path / "second"
    async with self_play(second, designing_url, TINY, pooled) as loop:
        await loop.iteration(0)
    played = [json.loads(line) for line in (second / "archive" / f"0-0-{pooled.code_hash[:16]}" /
                                            "episodes.jsonl").read_text().splitlines()]  # fmt: skip
    assert len(played) == 4 and {record["status"] for record in played} == {"ok"}
    assert [report.rows["agent"] for report in read_iterations(second)] == [16]  # 12 + 1 pooled task x 2 x 2


def test_a_held_out_reference_play_never_becomes_a_training_row(tmp_path: Path) -> None:
    from engine.trajectory import EpisodeKey, EpisodeRecord
    from trainers.suite import HELD_OUT_FIRST_SEED, HeldOutSeedError

    def record(seed: int) -> EpisodeRecord:
        return EpisodeRecord(run="t", key=EpisodeKey(world="orders", seed=seed, sample=0, hinted=False), mode="tokens",
                             model="m", status="ok", reward=1.0, messages=[], turns=[], started_at=0.0,
                             duration_s=0.0)  # fmt: skip

    loop = SelfPlay(load_config("cpu-tiny"), tmp_path, design=None, endpoints=None, agent=None, learner=None)  # type: ignore[arg-type]
    loop.rows(None, [record(HELD_OUT_FIRST_SEED - 1)])
    with pytest.raises(HeldOutSeedError, match="orders/10000003 is on a held-out seed"):
        loop.rows(None, [record(HELD_OUT_FIRST_SEED - 1), record(HELD_OUT_FIRST_SEED + 3)])


@pytest.mark.anyio
async def test_plays_an_outage_cost_stop_the_loop_instead_of_training_on_nothing(tmp_path: Path) -> None:
    world = tmp_path / "library.py"
    world.write_text(EXAMPLE_WORLD)
    outage = ["--fault-rate", "1", "--faults", "5xx"]
    faulty = mock_model("--tokenizer", str(default_gguf()), "--design", str(world), *outage)
    failed = r"of \d+ (episodes|designer requests) failed for infrastructure reasons \(endpoint"
    with faulty as url, pytest.raises(InfrastructureFailure, match=failed):
        await iterations(tmp_path / "run", url, None)
    assert not (tmp_path / "run" / "train.jsonl").exists(), "no iteration may be reported from plays that failed"
