"""The environment memory: a SQLite archive of every valid world the designer wrote.

Each world is kept with its code (keyed by the code's hash), the document it came from, its scores with
and without the hint, its regret and a status (too easy / frontier / too hard). The archive feeds the
designer's prompt (a few worlds of each kind) and serves training pools (frontier worlds first, least
reused first). One file, safe to reopen: a run that stops and resumes keeps everything.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import time
from collections.abc import Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

Status = Literal["too_easy", "frontier", "too_hard"]
SCHEMA_VERSION = 1

_SCHEMA = """
CREATE TABLE IF NOT EXISTS worlds (
    code_hash     TEXT PRIMARY KEY,
    name          TEXT NOT NULL,
    iteration     INTEGER NOT NULL,
    created_at    REAL NOT NULL,
    document      TEXT NOT NULL,
    description   TEXT NOT NULL,
    tools         TEXT NOT NULL,
    source        TEXT NOT NULL,
    scores_plain  TEXT NOT NULL,
    scores_hinted TEXT NOT NULL,
    mean_plain    REAL NOT NULL,
    mean_hinted   REAL NOT NULL,
    regret        REAL NOT NULL,
    reward        REAL,
    status        TEXT NOT NULL CHECK (status IN ('too_easy', 'frontier', 'too_hard')),
    reuse_count   INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS worlds_by_status ON worlds (status, reuse_count);
"""


def code_hash(source: str) -> str:
    return hashlib.sha256(source.encode()).hexdigest()


@dataclass(frozen=True)
class StatusThresholds:
    """Too easy: solved unaided on average at least `easy`. Too hard: even with the hint below `hard`."""

    easy: float = 0.8
    hard: float = 0.2

    def classify(self, mean_plain: float, mean_hinted: float) -> Status:
        if mean_plain >= self.easy:
            return "too_easy"
        if mean_hinted < self.hard:
            return "too_hard"
        return "frontier"


@dataclass(frozen=True)
class RememberedWorld:
    code_hash: str
    name: str
    iteration: int
    document: str
    description: str
    tools: list[str]
    source: str
    scores_plain: list[float]
    scores_hinted: list[float]
    mean_plain: float
    mean_hinted: float
    regret: float
    reward: float | None
    status: Status
    reuse_count: int = 0
    created_at: float = 0.0

    @property
    def is_spec(self) -> bool:
        """Whether the source is a JSON spec (compiled by trusted code) rather than Python (sandboxed)."""
        return self.source.lstrip().startswith("{")

    def line(self) -> str:
        """One line for the designer's prompt: what was built, and how the agent fared."""
        return (
            f"- {self.name} ({', '.join(self.tools)}): {self.description.splitlines()[0] if self.description else ''} "
            f"[solved {self.mean_plain:.2f} without the hint, {self.mean_hinted:.2f} with it]"
        )


class WorldMemory:
    """Open with `WorldMemory.open(path)`; every method commits before it returns."""

    def __init__(self, connection: sqlite3.Connection) -> None:
        self._db = connection

    @classmethod
    @contextmanager
    def open(cls, path: Path) -> Iterator[WorldMemory]:
        path.parent.mkdir(parents=True, exist_ok=True)
        connection = sqlite3.connect(path)
        try:
            connection.row_factory = sqlite3.Row
            connection.execute("PRAGMA journal_mode=WAL")
            found = connection.execute("PRAGMA user_version").fetchone()[0]
            if found not in (0, SCHEMA_VERSION):
                raise ValueError(f"{path}: memory schema version {found}; this spadework reads {SCHEMA_VERSION}")
            connection.executescript(_SCHEMA)
            connection.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            yield cls(connection)
        finally:
            connection.close()

    def backup(self, path: Path) -> None:
        """A consistent copy of the memory at `path` (SQLite's online backup), e.g. for a checkpoint."""
        with closing(sqlite3.connect(path)) as copy:
            self._db.backup(copy)

    def remember(self, world: RememberedWorld) -> bool:
        """Archive a valid world; False (and nothing changed) if the same code is already there."""
        row = {**world.__dict__, "created_at": world.created_at or time.time()}
        for key in ("tools", "scores_plain", "scores_hinted"):
            row[key] = json.dumps(row[key])
        columns = ", ".join(row)
        with self._db:
            cursor = self._db.execute(
                f"INSERT OR IGNORE INTO worlds ({columns}) VALUES ({', '.join(':' + k for k in row)})", row
            )
        return cursor.rowcount == 1

    def get(self, digest: str) -> RememberedWorld | None:
        row = self._db.execute("SELECT * FROM worlds WHERE code_hash = ?", (digest,)).fetchone()
        return _world(row) if row else None

    def counts(self) -> dict[str, int]:
        rows = self._db.execute("SELECT status, COUNT(*) FROM worlds GROUP BY status").fetchall()
        return {status: 0 for status in ("too_easy", "frontier", "too_hard")} | {r[0]: r[1] for r in rows}

    def worlds(self) -> list[RememberedWorld]:
        """Every world in the archive, oldest first."""
        return [_world(row) for row in self._db.execute("SELECT * FROM worlds ORDER BY created_at, code_hash")]

    def prompt_examples(self, per_status: int = 1) -> list[RememberedWorld]:
        """The newest `per_status` worlds of each kind: what the designer is shown of its past."""
        examples = []
        for status in ("too_easy", "frontier", "too_hard"):
            rows = self._db.execute(
                "SELECT * FROM worlds WHERE status = ? ORDER BY created_at DESC, code_hash LIMIT ?",
                (status, per_status),
            ).fetchall()
            examples += [_world(row) for row in rows]
        return examples

    def training_pool(self, limit: int, status: Status = "frontier") -> list[RememberedWorld]:
        """Up to `limit` worlds of `status`, least reused first; their reuse counts go up by one."""
        rows = self._db.execute(
            "SELECT * FROM worlds WHERE status = ? ORDER BY reuse_count, created_at DESC LIMIT ?", (status, limit)
        ).fetchall()
        with self._db:
            self._db.executemany(
                "UPDATE worlds SET reuse_count = reuse_count + 1 WHERE code_hash = ?", [(r["code_hash"],) for r in rows]
            )
        return [_world(row) for row in rows]


def _world(row: sqlite3.Row) -> RememberedWorld:
    values = dict(row)
    for key in ("tools", "scores_plain", "scores_hinted"):
        values[key] = json.loads(values[key])
    return RememberedWorld(**values)
