"""World pools: `spadework worlds export` writes a run's worlds as a Parquet dataset that `datasets` reads, with
a dataset card; `run.archive_from` starts another run's archive with it, and a damaged pool is refused before
anything starts, naming the file, the row and what is wrong."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tests.engine.conftest import mock_model
from tests.servers import SPADEWORK
from tests.trainers.test_design_loop import design_command, design_flags
from toolworlds.examples import EXAMPLE_SPEC, EXAMPLE_WORLD
from trainers.designer.memory import RememberedWorld, WorldMemory, code_hash
from trainers.pools import COLUMNS, DATA_FILE, FROM_POOL, SCHEMA, read_pool

ENV = {**os.environ, "COLUMNS": "200"}
SPEC_WORLD = RememberedWorld(code_hash=code_hash(EXAMPLE_SPEC), name="library_spec", iteration=3, document="table:x",
                             description="A library.", tools=["search"], source=EXAMPLE_SPEC, scores_plain=[0.0, 1.0],
                             scores_hinted=[1.0, 1.0], mean_plain=0.5, mean_hinted=1.0, regret=0.5, reward=0.4,
                             status="frontier")  # fmt: skip


@pytest.fixture(scope="module")
def designed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, str]]:
    """A `spadework design` run whose designer wrote a Python world (and a spec world in its archive), and the
    mock model's URL, still serving the same design."""
    folder = tmp_path_factory.mktemp("designs")
    with mock_model(*design_flags(folder, {"sound.py": EXAMPLE_WORLD})) as url:
        run = tmp_path_factory.mktemp("run")
        knobs = ("designer.documents=1", "agent.plays=2", "designer.smoke_seeds=2")
        done = subprocess.run(design_command(url, run, *knobs), capture_output=True, text=True, timeout=300, env=ENV)
        assert done.returncode == 0, done.stderr[-3000:]
        with WorldMemory.open(run / "memory.sqlite") as memory:
            memory.remember(SPEC_WORLD)
        yield run, url


@pytest.fixture(scope="module")
def pool(designed: tuple[Path, str], tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("pool")
    done = subprocess.run([*SPADEWORK, "worlds", "export", str(designed[0]), "--out", str(out)], capture_output=True,
                          text=True, timeout=300, env=ENV)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert "2 worlds (1 frontier, 1 too_easy)" in done.stdout
    return out


def test_the_pool_is_a_dataset_with_a_card(pool: Path, designed: tuple[Path, str]) -> None:
    from datasets import load_dataset

    rows = load_dataset("parquet", data_files=str(pool / DATA_FILE), split="train")
    assert rows.column_names == SCHEMA.names and len(rows) == 2
    by_format = {row["format"]: row for row in rows}
    python, spec = by_format["python"], by_format["spec"]
    assert python["source"] == EXAMPLE_WORLD and python["world_hash"] == code_hash(EXAMPLE_WORLD)
    assert python["scores_hinted"] == [1.0, 1.0] and python["iteration"] == 0 and python["status"] == "too_easy"
    assert {tool["function"]["name"] for tool in json.loads(python["tools"])} == {"search", "borrow"}
    assert python["task"] and python["hint"] and python["task"] != python["hint"] and python["max_steps"] > 0
    assert spec["source"] == EXAMPLE_SPEC and spec["win_rate"] == 0.5 and spec["regret"] == 0.5
    assert spec["designer_reward"] == 0.4 and spec["run"] == designed[0].name and spec["document"] == "table:x"
    # the card's own front matter says where the data is: the folder loads as a dataset by itself
    assert load_dataset(str(pool), split="train").num_rows == 2
    card = (pool / "README.md").read_text()
    assert card.startswith("---\n") and "path: data/worlds.parquet" in card
    assert all(f"`{name.split(', ')[0]}`" in card for name in COLUMNS)


def test_a_design_run_starts_its_archive_from_the_pool(pool: Path, designed: tuple[Path, str], tmp_path: Path) -> None:
    _, url = designed
    second = tmp_path / "second"
    done = subprocess.run(design_command(url, second, "designer.documents=1", "agent.plays=2", "designer.smoke_seeds=2",
                                         f"run.archive_from={pool}"), capture_output=True, text=True, timeout=300,
                          env=ENV)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    with WorldMemory.open(second / "memory.sqlite") as memory:
        archived = {world.name: world for world in memory.worlds()}
    assert archived["library_spec"].iteration == FROM_POOL and archived["library_spec"].status == "frontier"
    first_prompt = json.loads((second / "designs.jsonl").read_text().splitlines()[0])["sample"]["messages"][1]
    assert "Worlds you wrote before" in first_prompt["content"] and "library_spec" in first_prompt["content"]


def test_a_damaged_pool_is_refused_naming_the_row(pool: Path, tmp_path: Path) -> None:
    table = pq.read_table(pool / DATA_FILE).to_pylist()
    table[1]["source"] = table[1]["source"].replace("search", "seek", 1)  # code changed, hash kept
    damaged = tmp_path / "damaged.parquet"
    pq.write_table(pq.read_table(pool / DATA_FILE).from_pylist(table, schema=SCHEMA), damaged)
    with pytest.raises(ValueError, match=r"damaged.parquet, row 1 \(.*\): world_hash is not the hash of source"):
        read_pool(damaged)
    table[1]["source"], table[0]["mean_plain"] = pq.read_table(pool / DATA_FILE).to_pylist()[1]["source"], 1.5
    pq.write_table(pq.read_table(pool / DATA_FILE).from_pylist(table, schema=SCHEMA), damaged)
    with pytest.raises(ValueError, match=r"row 0 .*mean_plain must be a score in \[0, 1\], not 1.5"):
        read_pool(damaged)
    # the training run refuses it before it loads a model, with the knob named
    train = [*SPADEWORK, "train", "--out", str(tmp_path / "run"), "--set"]
    started = subprocess.run([*train, f"run.archive_from={damaged}"], capture_output=True, text=True, timeout=120,
                             env=ENV)  # fmt: skip
    assert started.returncode == 2 and "run.archive_from" in started.stderr and "mean_plain" in started.stderr
    missing = subprocess.run([*train, f"run.archive_from={tmp_path / 'nothing'}"], capture_output=True, text=True,
                             timeout=120, env=ENV)  # fmt: skip
    assert missing.returncode == 2 and "not a readable world pool" in missing.stderr
