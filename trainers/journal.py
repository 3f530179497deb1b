"""A run's append-only journals: one pydantic record per JSON line, appended whole, read back typed.

Every file a training or designer run grows (`designs.jsonl`, `metrics.jsonl`, `train.jsonl`,
`eval.jsonl`) is one of these; `trainers.run_state` cuts them back to a checkpoint by byte length, which
is sound because a record is only ever appended as complete lines.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ValidationError

Record = TypeVar("Record", bound=BaseModel)


class JournalError(ValueError):
    """A line that is not a record of the expected kind; the message names the file, line and field."""


def append(path: Path, records: Iterable[BaseModel]) -> None:
    with path.open("a") as lines:
        lines.writelines(record.model_dump_json() + "\n" for record in records)


def read(path: Path, kind: type[Record]) -> list[Record]:
    """Every record in `path` (none if it does not exist yet)."""
    if not path.exists():
        return []
    records = []
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        if not line.strip():
            continue
        try:
            records.append(kind.model_validate_json(line))
        except ValidationError as error:
            first = error.errors()[0]
            where = ".".join(str(part) for part in first["loc"]) or kind.__name__
            raise JournalError(f"{path}: a record does not parse ({where}: {first['msg']}; line {number})") from None
    return records
