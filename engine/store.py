"""The trajectory store: one run directory, an append-only JSONL of finished episodes, and a reader.

    RUN_DIR/run.json         what the run is (its plan); a resumed run must match it
    RUN_DIR/episodes.jsonl   one `EpisodeRecord` per line, appended as each episode finishes

Each record is written with a single `write` and flushed at once, so a process killed with SIGKILL
loses at most the line it was writing. Opening the store again repairs such a torn last line (it is cut
off and counted) and reports which episode keys are finished, so a resumed run repeats none of them.

An infrastructure failure (`infra_error`: the endpoint or the sandbox failed, not the model) is not an
outcome: its record stays in the file as the attempt it was, but the episode is not finished, so a resumed
run plays it again, and readers see only an episode's last record.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import structlog
from pydantic import BaseModel, ValidationError

from engine.trajectory import EpisodeRecord

log = structlog.get_logger()

PLAN_FILE = "run.json"
EPISODES_FILE = "episodes.jsonl"


class StoreError(Exception):
    """The run directory cannot be used as asked (a different plan, or an unreadable record)."""


class TrajectoryStore:
    """A rollout's records, appended to a JSONL file as episodes end, so a killed rollout resumes where it was.
    With `keep`, it also holds each episode's last record in memory (`records`): a caller that trains on the
    plays takes them from here, not from the file read back."""

    def __init__(self, directory: Path, keep: bool = False) -> None:
        self.directory = directory
        self.path = directory / EPISODES_FILE
        self.finished: set[str] = set()
        self.failed: set[str] = set()  # keys whose last record is an infrastructure failure: played again
        self.torn_lines = 0
        self._file: IO[bytes] | None = None
        self._keep = keep
        self._outcomes: dict[str, EpisodeRecord] = {}
        self._failures: dict[str, EpisodeRecord] = {}

    @classmethod
    def open(cls, directory: Path, plan: BaseModel, keep: bool = False) -> TrajectoryStore:
        """Create the run directory, or reopen it to resume; refuse if it holds a different plan."""
        directory.mkdir(parents=True, exist_ok=True)
        plan_path = directory / PLAN_FILE
        wanted = plan.model_dump(mode="json")
        if plan_path.exists():
            held = json.loads(plan_path.read_text())
            changed = plan_changes(held, wanted)
            if changed:
                raise StoreError(
                    f"{directory} holds a run with a different plan (differs in: {', '.join(changed)}); "
                    "resume with the same options or choose another --out"
                )
            if held == wanted:
                return cls._opened(directory, keep)
        # New, or resumed somewhere else: the plan says where it plays now (written whole, or not at all).
        partial = plan_path.with_name(f".{PLAN_FILE}.partial")
        partial.write_text(json.dumps(wanted, indent=2) + "\n")
        os.replace(partial, plan_path)
        return cls._opened(directory, keep)

    @classmethod
    def _opened(cls, directory: Path, keep: bool) -> TrajectoryStore:
        store = cls(directory, keep)
        store._recover()
        store._file = store.path.open("ab")
        return store

    def _recover(self) -> None:
        """Cut a torn last line (from a killed writer) and learn which keys are finished."""
        if not self.path.exists():
            return
        data = self.path.read_bytes()
        complete = data.rfind(b"\n") + 1
        if complete < len(data):
            self.torn_lines = 1
            log.warning("torn last record cut", path=str(self.path), bytes=len(data) - complete)
            with self.path.open("r+b") as handle:
                handle.truncate(complete)
        for number, record in enumerate(_records(data[:complete], self.path), start=1):
            key = record.key.text
            if key in self.finished:
                raise StoreError(f"{self.path}:{number}: episode {key} is recorded twice")
            self._note(record)

    def append(self, record: EpisodeRecord) -> None:
        """Write one played episode; it is on disk (in the page cache) when this returns."""
        if self._file is None:
            raise StoreError("the store is closed")
        self._file.write(record.model_dump_json().encode() + b"\n")
        self._file.flush()
        self._note(record)

    def _note(self, record: EpisodeRecord) -> None:
        key = record.key.text
        if record.status == "infra_error":
            self.failed.add(key)
        else:
            self.failed.discard(key)
            self.finished.add(key)
        if self._keep:
            self._failures.pop(key, None)
            (self._failures if record.status == "infra_error" else self._outcomes)[key] = record

    def records(self) -> list[EpisodeRecord]:
        """Each episode's last record, as `read_records` would read them back: outcomes in the order they
        finished, then the infrastructure failures no later attempt replaced (a store opened with `keep`)."""
        if not self._keep:
            raise StoreError("this store keeps no records in memory: open it with keep=True, or use read_records")
        return [*self._outcomes.values(), *self._failures.values()]

    def close(self) -> None:
        if self._file is not None:
            self._file.flush()
            os.fsync(self._file.fileno())
            self._file.close()
            self._file = None

    def __enter__(self) -> TrajectoryStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# What a resume may change: where and how patiently a run is played, not what is played (a server restarted at
# another address, a longer timeout after an outage, the run's folder renamed). Anything else is a new run.
RESUMABLE = frozenset({"run", "endpoint", "user_endpoint", "concurrency", "max_failed_share"})
RESUMABLE_SETTINGS = frozenset({"request_timeout_s", "episode_timeout_s"})


def plan_changes(held: Any, wanted: Any, path: str = "") -> list[str]:
    """The dotted paths at which two plans differ in what they play (`settings.temperature`); changes a resume
    may make (`RESUMABLE`, and any settings' timeouts) are left out."""
    if isinstance(held, dict) and isinstance(wanted, dict):
        keys = sorted(set(held) | set(wanted))
        return [found for key in keys for found in plan_changes(held.get(key), wanted.get(key), f"{path}{key}.")]
    where = path.rstrip(".")
    if held == wanted or where in RESUMABLE or where.rsplit(".", 1)[-1] in RESUMABLE_SETTINGS:
        return []
    return [where]


def read_records(directory: Path) -> Iterator[EpisodeRecord]:
    """Stream each episode's last record, in one pass: outcomes in the order they finished, then the
    infrastructure failures no later attempt replaced (held until the end: only a later record can replace
    one, and a torn last line is skipped)."""
    failed: dict[str, EpisodeRecord] = {}
    for record in read_attempts(directory):
        key = record.key.text
        failed.pop(key, None)
        if record.status == "infra_error":
            failed[key] = record
        else:
            yield record
    yield from failed.values()


def read_attempts(directory: Path) -> Iterator[EpisodeRecord]:
    """Stream every record, failed attempts that were played again included (a torn last line is skipped)."""
    path = directory / EPISODES_FILE
    if not path.exists():
        raise StoreError(f"{directory} has no {EPISODES_FILE}; is it a rollout's --out directory?")
    with path.open("rb") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.endswith(b"\n"):
                return
            yield _parse(line, path, number)


def _records(data: bytes, path: Path) -> Iterator[EpisodeRecord]:
    for number, line in enumerate(data.splitlines(), start=1):
        yield _parse(line, path, number)


def _parse(line: bytes, path: Path, number: int) -> EpisodeRecord:
    try:
        return EpisodeRecord.model_validate_json(line)
    except ValidationError as error:
        raise StoreError(f"{path}:{number}: not an episode record: {error.errors()[0]['msg']}") from None


def read_plan(directory: Path) -> dict[str, Any]:
    plan: dict[str, Any] = json.loads((directory / PLAN_FILE).read_text())
    return plan
