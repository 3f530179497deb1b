"""World pools: a run's valid designed worlds as a Parquet dataset that another run starts from.

`export_pool` writes `DIR/data/worlds.parquet` (one row per world in a run's environment memory: its spec or
code, its tools, task 0 and its hint, the agent's measured scores, regret, win rate and status, the document
and iteration it came from) and `DIR/README.md`, a dataset card; `datasets.load_dataset("parquet", ...)`
reads it. `read_pool` is the way back: `run.archive_from=DIR` starts a training or design run's archive with
a pool's worlds, so the designer's prompt shows them as worlds written before and the agent replays the
frontier ones (`agent.archive_tasks`). A pool is data from elsewhere: every row is checked before it is
remembered (its hash is its source's, its numbers are scores), and its Python worlds run only in the sandbox,
as every model-written world does.
"""

from __future__ import annotations

import json
import math
import statistics
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import structlog

from toolworlds.episode import LocalWorld, World
from toolworlds.sandbox import SandboxPool, WorldLoadError
from toolworlds.sandbox.described import SandboxWorld
from toolworlds.spec import SpecError, parse_spec
from toolworlds.spec_compile import compile_spec
from trainers.designer.memory import RememberedWorld, WorldMemory, code_hash

DATA_FILE = Path("data") / "worlds.parquet"
log = structlog.get_logger()
FROM_POOL = -1  # the iteration a world taken from a pool is remembered under: none of this run's

SCHEMA = pa.schema([
    pa.field("world_hash", pa.string(), nullable=False),
    pa.field("name", pa.string(), nullable=False),
    pa.field("format", pa.string(), nullable=False),  # spec (JSON, compiled by trusted code) or python (sandboxed)
    pa.field("source", pa.string(), nullable=False),
    pa.field("description", pa.string(), nullable=False),
    pa.field("tools", pa.string(), nullable=False),  # the tools in OpenAI's format, as JSON
    pa.field("task", pa.string(), nullable=False),  # task 0's instruction
    pa.field("hint", pa.string(), nullable=False),  # task 0's privileged hint
    pa.field("max_steps", pa.int32(), nullable=False),
    pa.field("document", pa.string(), nullable=False),
    pa.field("iteration", pa.int32(), nullable=False),
    pa.field("status", pa.string(), nullable=False),
    pa.field("scores_plain", pa.list_(pa.float64()), nullable=False),
    pa.field("scores_hinted", pa.list_(pa.float64()), nullable=False),
    pa.field("mean_plain", pa.float64(), nullable=False),
    pa.field("mean_hinted", pa.float64(), nullable=False),
    pa.field("win_rate", pa.float64(), nullable=False),
    pa.field("regret", pa.float64(), nullable=False),
    pa.field("designer_reward", pa.float64()),
    pa.field("run", pa.string(), nullable=False),
])  # fmt: skip
COLUMNS: dict[str, str] = {
    "world_hash": "SHA-256 of `source`: the world's identity",
    "name": "the world's name",
    "format": "`spec` (a JSON spec, compiled by trusted code) or `python` (model-written code: run it sandboxed)",
    "source": "the spec or the code, as the gates accepted it",
    "description": "what the agent is told about the world",
    "tools": "the world's tools in OpenAI's format (JSON)",
    "task": "task 0's instruction (a world makes one task per seed)",
    "hint": "task 0's privileged hint",
    "max_steps": "the step limit of an episode",
    "document": "the grounding document the designer read",
    "iteration": "the self-play iteration that wrote it",
    "status": "`frontier`, `too_easy` or `too_hard` for the agent that played it",
    "scores_plain, scores_hinted": "the agent's scores in its plays without and with the hint",
    "mean_plain, mean_hinted": "their means",
    "win_rate": "share of the unhinted plays that solved the task",
    "regret": "hint-based regret: mean_hinted - mean_plain",
    "designer_reward": "what the designer was paid for it (empty: not paid)",
    "run": "the run directory it came from",
}


class PoolError(ValueError):
    """A pool that cannot be read or a row that fails its checks; the message names the file, row and field."""


@dataclass(frozen=True)
class Described:
    """What a world says of itself once loaded: its tools, task 0 and the step limit."""

    tools: list[dict[str, Any]]
    task: str
    hint: str
    max_steps: int


async def export_pool(run: Path, out: Path, sandbox: SandboxPool) -> list[dict[str, Any]]:
    """Write the worlds of `run`'s environment memory as a pool in `out`; the rows written."""
    memory_path = run / "memory.sqlite"
    if not memory_path.is_file():
        raise PoolError(f"{run}: no memory.sqlite (not a training or design run directory)")
    with WorldMemory.open(memory_path) as memory:
        worlds = memory.worlds()
    rows = []
    for world in worlds:
        try:
            described = await _described(world, sandbox)
        except WorldLoadError as error:  # it loaded when it was archived: say so, and keep the others
            log.warning("an archived world no longer loads; left out of the pool", world=world.name, reason=str(error))
            continue
        rows.append(_row(world, described, run.resolve().name))
    (out / DATA_FILE).parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows, schema=SCHEMA), out / DATA_FILE)
    (out / "README.md").write_text(dataset_card(rows, run))
    return rows


async def _described(world: RememberedWorld, sandbox: SandboxPool) -> Described:
    if world.is_spec:
        return await _describe(LocalWorld(compile_spec(parse_spec(world.source))))
    info = await sandbox.load(world.source, f"{world.code_hash[:16]}.py")
    try:
        return await _describe(SandboxWorld(sandbox, info))
    finally:
        await sandbox.unload(info)


async def _describe(world: World) -> Described:
    episode = await world.open()
    try:
        task = await episode.reset(0)
    finally:
        await episode.close()
    tools = [dict(tool) for tool in world.openai_tools()]
    return Described(tools, task.instruction, task.hint, task.max_steps)


def _row(world: RememberedWorld, described: Described, run: str) -> dict[str, Any]:
    plain = world.scores_plain
    win_rate = sum(score >= 1.0 for score in plain) / len(plain) if plain else 0.0
    return {
        "world_hash": world.code_hash, "name": world.name, "format": "spec" if world.is_spec else "python",
        "source": world.source, "description": world.description, "tools": json.dumps(described.tools),
        "task": described.task, "hint": described.hint, "max_steps": described.max_steps,
        "document": world.document, "iteration": world.iteration, "status": world.status,
        "scores_plain": plain, "scores_hinted": world.scores_hinted, "mean_plain": world.mean_plain,
        "mean_hinted": world.mean_hinted, "win_rate": win_rate,
        "regret": world.regret, "designer_reward": world.reward, "run": run,
    }  # fmt: skip


def dataset_card(rows: list[dict[str, Any]], run: Path) -> str:
    """The pool's README: Hugging Face's dataset-card front matter, what it holds, and how to use it."""
    statuses = Counter(row["status"] for row in rows)
    formats = Counter(row["format"] for row in rows)
    regret = f"{statistics.fmean(row['regret'] for row in rows):+.3f}" if rows else "n/a"
    columns = "\n".join(f"| `{'`, `'.join(name.split(', '))}` | {what} |" for name, what in COLUMNS.items())
    return f"""---
pretty_name: spadework worlds from {run.resolve().name}
tags: [tool-use, reinforcement-learning, self-play, spadework]
configs:
- config_name: default
  data_files:
  - split: train
    path: {DATA_FILE.as_posix()}
---

# Worlds designed in the spadework run `{run.resolve().name}`

{len(rows)} tool-use worlds a language model wrote and spadework's gates accepted: each an executable
environment with hidden state, tools with JSON Schemas, a task per seed with a privileged hint, and a scorer
with partial credit. Formats: {dict(formats)}. Status for the agent that played them: {dict(statuses)}; mean
hint-based regret {regret}.

Load it: `datasets.load_dataset("parquet", data_files="{DATA_FILE.as_posix()}")` from this folder. Train on
it with spadework: `spadework train --set run.archive_from=PATH` (or `spadework design --set
run.archive_from=PATH`): its worlds start the run's archive, the frontier ones replayed by the agent.

Caveats: `format=python` rows are model-written code; run them only in a sandbox (spadework does). Scores,
status and regret were measured for the agent of that run, at the iteration that wrote the world.

| column | what it holds |
|---|---|
{columns}
"""


def read_pool(path: Path) -> list[RememberedWorld]:
    """A pool's worlds (`path`: a pool folder or its Parquet file), each checked, to remember."""
    file = path / DATA_FILE if path.is_dir() else path
    try:
        table = pq.read_table(file)
    except (OSError, pa.ArrowInvalid) as error:
        raise PoolError(f"{file}: not a readable world pool ({error})") from None
    missing = [field.name for field in SCHEMA if field.name not in table.column_names]
    if missing:
        raise PoolError(f"{file}: not a world pool, it lacks the columns {', '.join(missing)}")
    return [_remembered(row, f"{file}, row {index}") for index, row in enumerate(table.to_pylist())]


def _remembered(row: dict[str, Any], where: str) -> RememberedWorld:
    name = row.get("name")
    if not isinstance(row.get("source"), str) or code_hash(row["source"]) != row.get("world_hash"):
        raise PoolError(f"{where} ({name}): world_hash is not the hash of source (an edited or damaged row)")
    if row.get("status") not in ("too_easy", "frontier", "too_hard"):
        raise PoolError(f"{where} ({name}): status must be too_easy, frontier or too_hard, not {row.get('status')!r}")
    for field in ("mean_plain", "mean_hinted"):
        if not _score(row.get(field)):
            raise PoolError(f"{where} ({name}): {field} must be a score in [0, 1], not {row.get(field)!r}")
    for field in ("scores_plain", "scores_hinted"):
        if not isinstance(row.get(field), list) or not all(_score(value) for value in row[field]):
            raise PoolError(f"{where} ({name}): {field} must be a list of scores in [0, 1]")
    if row["format"] == "spec":
        try:
            parse_spec(row["source"])
        except SpecError as error:
            raise PoolError(f"{where} ({name}): source is not a valid spec: {error}") from None
    try:
        tools = [tool["function"]["name"] for tool in json.loads(row["tools"])]
    except (TypeError, KeyError, json.JSONDecodeError):
        raise PoolError(f"{where} ({name}): tools must be a JSON list of OpenAI tools") from None
    return RememberedWorld(
        code_hash=row["world_hash"], name=str(name), iteration=FROM_POOL, document=str(row["document"]),
        description=str(row["description"]), tools=tools, source=row["source"], scores_plain=row["scores_plain"],
        scores_hinted=row["scores_hinted"], mean_plain=row["mean_plain"], mean_hinted=row["mean_hinted"],
        regret=row["mean_hinted"] - row["mean_plain"], reward=None, status=row["status"],
    )  # fmt: skip


def _score(value: object) -> bool:
    return isinstance(value, int | float) and math.isfinite(value) and 0.0 <= value <= 1.0
